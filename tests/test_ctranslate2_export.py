"""Export to CTranslate2 and `--engine=ctranslate2` (issue 53): the exported model computes our function, and
CTranslate2's beam search under our decoding rules gives our translations.

* The mapping (transformer_jax/export/ctranslate2.py), on randomly initialised models of every shape option CTranslate2
  can express (post-/pre-LN, shared or separate embeddings, sinusoidal / learned / no positions, no biases, no
  √d_model scale, d_k ≠ d_model/h): CTranslate2's teacher-forced log-probabilities equal ours to 1e-5.
* What it cannot express is refused in one line (d_k ≠ d_v, restricted attention), without restoring anything; so
  are the command lines `--engine` cannot serve, and a missing ctranslate2 names the extra to install.
* Beam search (slow: a trained tiny model, the synthetic dev and test splits, 600 sentences; α 0.6, 0 and 1; a
  maximum length that binds): token-for-token equal outputs, n-best scores equal to 1e-4 where both searches return
  a hypothesis, and every difference a search difference bounded by our own model's scores
  (decode/ctranslate2_engine.py names the two rules): the hypothesis CTranslate2 returns never scores better under
  our model than the one we return. The same on Table 3 row C1 of the demo, whose int8 export keeps test BLEU
  within 0.3; `decode` and `evaluate` give the same lines and scores with either engine.
* bench/decode_throughput.py compares the engines on the same weights (a tiny run of it).
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from cli_runs import run_all
from transformer_jax.configs import table3, tiny
from transformer_jax.data import pipeline
from transformer_jax.data.tokenizer import EOS_ID
from transformer_jax.decode.beam_search import beam_search
from transformer_jax.export import ctranslate2 as ct2
from transformer_jax.export import exported
from transformer_jax.model.transformer import START_ID, Transformer

REPO = Path(__file__).resolve().parent.parent
needs_ct2 = pytest.mark.skipif(importlib.util.find_spec("ctranslate2") is None,
                               reason=f"needs the [ctranslate2] extra: {ct2.INSTALL}")


def pieces_of(vocab_size: int) -> list[str]:
    """A vocabulary for the mapping tests: our special pieces, then one piece per id (no SentencePiece needed)."""
    return ["<pad>", "</s>", "<unk>"] + [f"p{i}" for i in range(3, vocab_size)]


def random_model(tmp_path, **model):
    """configs/tiny.py (2+2 layers, ``model`` changed) with random parameters (biases and LayerNorms too, so a
    transposed or swapped one shows): (its graph, the parameters, a Translator on its export, the vocabulary)."""
    config = tiny.get_config()
    config.model.num_encoder_layers = config.model.num_decoder_layers = 2
    config.model.update(model)
    graphdef, abstract = nnx.split(nnx.eval_shape(lambda: Transformer(config.model, rngs=nnx.Rngs(0))), nnx.Param)
    rng = np.random.RandomState(0)

    def draw(path, leaf) -> np.ndarray:  # LayerNorm gains near 1, everything else near 0
        gain = jax.tree_util.keystr(path).endswith("['scale']")
        return (gain + rng.normal(0.0, 0.15, leaf.shape)).astype(np.float32)

    params = jax.tree_util.tree_map_with_path(draw, nnx.to_pure_dict(abstract))
    vocab = pieces_of(config.model.vocab_size)
    out = str(tmp_path / "ct2")
    ct2.save(ct2.transformer_spec(config, params, vocab), out)
    return graphdef, params, ct2.require().Translator(out, compute_type="float32", intra_threads=1), vocab


def padded(rows: list[list[int]], length: int) -> jax.Array:
    return jnp.array([row + [0] * (length - len(row)) for row in rows])


@needs_ct2
@pytest.mark.parametrize("model", [
    {},  # the paper: post-LN, shared embeddings × √d_model, sinusoids, biases
    {"norm_position": "pre", "share_embeddings": False, "positional": "learned"},
    {"use_bias": False, "scale_embeddings": False, "positional": "none"},
    {"d_k": 8, "d_v": 8},  # d_k < d_model / h: CTranslate2's head_dim
    {"num_heads": 4, "d_k": 16, "d_v": 16},  # d_k > d_model / h
], ids=lambda m: ",".join(f"{k}={v}" for k, v in m.items()) or "paper")
def test_the_exported_model_computes_ours(tmp_path, model):
    """Teacher-forced log p(y_t | y_<t, x) of CTranslate2's float32 model (score_batch) equal ours to 1e-5."""
    graphdef, params, translator, vocab = random_model(tmp_path, **model)
    rng = np.random.RandomState(0)
    sources = [list(rng.randint(3, len(vocab), rng.randint(2, 20))) + [EOS_ID] for _ in range(4)]
    targets = [list(rng.randint(3, len(vocab), rng.randint(2, 20))) + [EOS_ID] for _ in range(4)]
    forward = jax.jit(lambda p, x, y: jax.nn.log_softmax(nnx.merge(graphdef, p)(x, y), -1))
    log_probs = np.asarray(forward(params, padded(sources, 24), padded(targets, 24)))  # [4, 24, vocab]
    scored = translator.score_batch([[vocab[i] for i in s[:-1]] for s in sources],  # + EOS by the model
                                    [[vocab[i] for i in t[:-1]] for t in targets])  # EOS scored last
    for row, (target, result) in enumerate(zip(targets, scored)):
        np.testing.assert_allclose(result.log_probs, log_probs[row, np.arange(len(target)), target], atol=1e-5)


@pytest.mark.parametrize("row,message", [
    ("B1", "d_k = 4 ≠ d_v = 16 (Table 3 rows B): CTranslate2's attention has one head size"),
    ("window", "model.attention_window = 3 (restricted self-attention, §4)"),
])
def test_what_ctranslate2_cannot_express_is_refused_before_restoring(tmp_path, row, message):
    """A run folder holding only config.json is enough: the refusal comes before any checkpoint is read."""
    config = table3.get_config("B1,base=tiny") if row == "B1" else tiny.get_config()
    if row == "window":
        config.model.attention_window = 3
    (tmp_path / "config.json").write_text(config.to_json_best_effort())
    with pytest.raises(ct2.NotExpressible) as error:
        exported.export(str(tmp_path), "latest", "none", str(tmp_path / "out"))
    assert message in str(error.value) and "\n" not in str(error.value)
    assert not (tmp_path / "out").exists()


def test_a_missing_ctranslate2_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 → ImportError
    with pytest.raises(ImportError, match=r'CTranslate2 is not installed; install the optional extra: pip install -e '
                                          r'"\.\[ctranslate2\]"'):
        ct2.require()


def test_the_export_command_refuses_in_one_line(tmp_path):
    """`transformer-jax export` on a Table 3 row B run: status 2 (the command asks for what the format cannot
    express); on a run where ctranslate2 is not installed: status 1 naming the extra. Both before any restoring."""
    row_b, run = tmp_path / "B1", tmp_path / "run"
    for workdir, config in ((row_b, table3.get_config("B1,base=tiny")), (run, tiny.get_config())):
        workdir.mkdir()
        (workdir / "config.json").write_text(config.to_json_best_effort())
    hidden = tmp_path / "hidden" / "ctranslate2"  # first on the path: `import ctranslate2` fails
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    procs = run_all({"B1": ["export", f"--workdir={row_b}"], "missing": ["export", f"--workdir={run}"]},
                    env={"PYTHONPATH": str(hidden.parent)})
    refused = "transformer-jax export: CTranslate2 cannot express this model: d_k = 4 ≠ d_v = 16 (Table 3 rows B)"
    missing = 'transformer-jax export: CTranslate2 is not installed; install the optional extra: pip install -e ".['
    expected = {"B1": (2, refused), "missing": (1, missing)}
    for name, (status, message) in expected.items():
        lines = procs[name].stderr.strip().splitlines()
        assert procs[name].returncode == status and len(lines) == 1 and lines[0].startswith(message), procs[name]
    assert not (row_b / "export").exists() and not (run / "export").exists()


# --- beam search on a trained model (slow) ---

NUM_STEPS = 400  # as tests/test_decode_cli.py: translations that differ from sentence to sentence
SPLIT_SIZE = 300  # dev and test sentences each: 600 compared


def trained_config():
    """tests/test_decode_cli.py's tiny run (d_model 32, 1+1 layers, 400 steps) with 300-sentence dev and test
    splits."""
    from test_decode_cli import tiny_config

    config = tiny_config()
    config.data.synthetic.dev_size = config.data.synthetic.test_size = SPLIT_SIZE
    return config


def train_and_export(workdir: str, config) -> tuple:
    from transformer_jax.decode.restore import restore_run
    from transformer_jax.train.trainer import train

    train(config, workdir, progress=False)
    out, reused = exported.up_to_date(workdir, "latest", "none")
    assert not reused
    return restore_run(workdir), out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(restored run, its float32 export) of the tiny model."""
    return train_and_export(str(tmp_path_factory.mktemp("run")), trained_config())


def our_nbest(run, config, batches) -> dict[int, list[tuple[tuple[int, ...], float]]]:
    """Our beam search's ``beam_size`` finished hypotheses per sentence under ``config.decode`` (index → [(ids
    incl. EOS, score)], best first), with the run's maximum-length rule."""
    d, max_len = config.decode, int(config.model.max_len)

    @jax.jit
    def search(params, inputs):
        model = nnx.merge(run.graphdef, params)
        batch, length = inputs.shape
        cache_length = min(length + d.max_length_offset, max_len)
        memory = model.prepare_memory(model.encode(inputs), inputs)
        return beam_search(lambda t, c: model.decode_step(t, memory, c),
                           model.init_cache(batch, cache_length, d.beam_size), batch_size=batch,
                           beam_size=d.beam_size, max_decode_len=cache_length,
                           max_lengths=(inputs != 0).sum(-1) + d.max_length_offset, length_penalty=d.length_penalty,
                           eos_id=EOS_ID, start_id=START_ID, num_best=d.beam_size, reorder_fn=model.reorder_cache)

    out = {}
    for batch in batches:
        seqs, scores, lengths = map(np.asarray, search(run.params, jnp.asarray(batch["inputs"])))
        for row, index in enumerate(batch["index"]):
            if index >= 0:
                out[int(index)] = [(tuple(seqs[row, j, :lengths[row, j]].tolist()), float(scores[row, j]))
                                   for j in range(d.beam_size) if np.isfinite(scores[row, j])]
    return out


def compare_searches(run, model_dir: str, length_penalty: float, offset: int | None = None) -> dict:
    """Ours and CTranslate2's n-best on the dev and test splits under beam 4, α = ``length_penalty`` (and the
    maximum-length ``offset``): counts of equal 1-best outputs, of hypotheses both return, the largest difference of
    their scores, and the differences: (ours, CTranslate2's) best as (ids, our score)."""
    from transformer_jax.decode.ctranslate2_engine import CTranslate2Translator, max_output_length

    config = ml_collections.ConfigDict(run.config.to_dict())
    config.decode.update(beam_size=4, length_penalty=length_penalty)
    if offset is not None:
        config.decode.max_length_offset = offset
    engine = CTranslate2Translator(config, model_dir, run.tokenizer, threads=1)
    result = {"sentences": 0, "equal": 0, "at_limit": 0, "common": 0, "max_score_diff": 0.0, "differences": []}
    for split in ("dev", "test"):
        _, _, batches = pipeline.eval_data(config, run.tokenizer, split)
        ours = our_nbest(run, config, batches)
        sources = {int(i): row[row != 0].tolist()
                   for b in batches for row, i in zip(b["inputs"], b["index"]) if i >= 0}
        theirs = dict(zip(sources, engine.nbest(list(sources.values()))))
        for i, hypotheses in ours.items():
            mine = dict(hypotheses)
            their_scores = {tuple(ids): score for ids, score in theirs[i]}
            their_best = (tuple(theirs[i][0][0]), theirs[i][0][1])
            common = [h for h in mine if h in their_scores]
            result["sentences"] += 1
            result["equal"] += hypotheses[0][0] == their_best[0]
            result["at_limit"] += len(hypotheses[0][0]) == max_output_length(len(sources[i]), config)
            result["common"] += len(common)
            result["max_score_diff"] = max([result["max_score_diff"]] +
                                           [abs(mine[h] - their_scores[h]) for h in common])
            if hypotheses[0][0] != their_best[0]:
                result["differences"].append((hypotheses[0], their_best))
    return result


def assert_equal_but_search(result: dict, min_equal: float) -> None:
    """Most outputs equal; the model's numbers agree (1e-4); every difference is CTranslate2 returning a hypothesis
    no better under our scores than ours (its rules finish fewer candidates, never better ones)."""
    assert result["equal"] >= min_equal * result["sentences"], result
    assert result["common"] >= 3 * result["sentences"], result  # most of the n-best is the same
    assert result["max_score_diff"] < 1e-4, result
    for (_, ours), (_, theirs) in result["differences"]:
        assert theirs <= ours + 1e-4, result["differences"]


@needs_ct2
@pytest.mark.slow
def test_beam_outputs_equal_ours_token_for_token(trained):
    """§6.1's beam 4, α 0.6, input + 50 on 600 sentences: equal outputs (all of them on this model)."""
    result = compare_searches(*trained, length_penalty=0.6)
    print({k: v for k, v in result.items() if k != "differences"})
    assert_equal_but_search(result, min_equal=0.99)


@needs_ct2
@pytest.mark.slow
@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_the_length_penalty_behaves_the_same(trained, length_penalty):
    """α = 0 (log-probabilities) and α = 1 (long outputs favoured): equal but for the search rules."""
    result = compare_searches(*trained, length_penalty=length_penalty)
    print(length_penalty, {k: v for k, v in result.items() if k != "differences"})
    assert_equal_but_search(result, min_equal=0.97)


@needs_ct2
@pytest.mark.slow
def test_the_maximum_length_rule_is_the_same(trained):
    """The limit input length + offset (EOS counted on both sides, at least 1) where it binds: the tiny model's
    outputs are ~30 tokens shorter than their sources (a 400-piece vocabulary), so +50 never does and -30 cuts
    about half of them, in both engines alike."""
    result = compare_searches(*trained, length_penalty=0.6, offset=-30)
    print({k: v for k, v in result.items() if k != "differences"})
    assert_equal_but_search(result, min_equal=0.99)
    assert result["at_limit"] >= 0.3 * result["sentences"], result


@needs_ct2
@pytest.mark.slow
def test_a_table3_row_decodes_the_same_and_int8_keeps_its_bleu(tmp_path):
    """Table 3 row C1 (N = 1) on configs/demo_table3.py (d_model 128, 400 steps: ~55 BLEU on the synthetic corpus):
    CTranslate2 float32 decodes as we do, and int8 weights move the sacreBLEU of the whole synthetic test split (1000
    sentences; on 300, one in eight outputs changing moved it by up to 0.5) by less than 0.3."""
    from transformer_jax.decode.ctranslate2_engine import CTranslate2Translator
    from transformer_jax.evaluate.evaluation import bleu_of

    config = table3.get_config("C1,base=demo_table3")
    config.data.synthetic.dev_size = SPLIT_SIZE  # the test split keeps its 1000 sentences
    config.train.eval_every_steps = 0
    run, out = train_and_export(str(tmp_path / "C1"), config)
    result = compare_searches(run, out, length_penalty=0.6)
    print({k: v for k, v in result.items() if k != "differences"})
    assert_equal_but_search(result, min_equal=0.98)  # 1291 of 1300 here; the rest CTranslate2's search rules
    _, refs, batches = pipeline.eval_data(run.config, run.tokenizer, "test")
    bleu = {}
    for quantization in ("none", "int8"):
        model_dir, _ = exported.up_to_date(str(tmp_path / "C1"), "latest", quantization)
        engine = CTranslate2Translator(run.config, model_dir, run.tokenizer)
        bleu[quantization] = bleu_of(run.config, engine.translate_batches(batches), refs)["sacrebleu"]
    print("test sacreBLEU", bleu)
    assert bleu["none"] > 30 and abs(bleu["int8"] - bleu["none"]) < 0.3, bleu


@needs_ct2
@pytest.mark.slow
def test_an_export_is_reused_while_up_to_date(trained):
    _, out = trained
    workdir = os.path.dirname(os.path.dirname(out))
    stamp = os.path.getmtime(os.path.join(out, "model.bin"))
    assert exported.up_to_date(workdir, "latest", "none") == (out, True)
    assert os.path.getmtime(os.path.join(out, "model.bin")) == stamp
    with open(os.path.join(out, exported.RECORD_FILE)) as f:
        record = json.load(f)
    assert record["steps"] == [NUM_STEPS] and record["quantization"] == "none"
    assert exported.up_to_date(workdir, "avg2", "int8")[1] is False  # another name, another folder
    assert exported.read_record(out)["steps"] == [NUM_STEPS]


@needs_ct2
def test_the_decode_bench_compares_jax_and_ctranslate2_on_the_same_weights():
    """bench/decode_throughput.py --engine=jax,ctranslate2 --quantization=none,int8 at a tiny size: one record per
    engine and quantization, each forced to the same generated length; CTranslate2's speed relative to JAX's."""
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "decode_throughput.py"), "--shapes=tiny", "--batch=2",
                           "--src-len=6", "--gen-len=4", "--budget-s=0.05", "--peak-gflops=1",
                           "--engine=jax,ctranslate2", "--quantization=none,int8"],
                          capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    *records, last = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")][1:]
    assert [(r["engine"], r["quantization"]) for r in records] == [
        ("jax", "none"), ("ctranslate2", "none"), ("ctranslate2", "int8")]
    assert all(r["gen_len"] == 4 and r["tokens_per_s"] == pytest.approx(2 * 4 / r["median_s"]) for r in records)
    assert records[1]["compute_type"] == "float32" and records[2]["compute_type"].startswith("int8")
    assert records[1]["vs_jax"] == pytest.approx(records[1]["tokens_per_s"] / records[0]["tokens_per_s"])
    assert last["results"] == records


def test_engine_flags_are_checked_before_any_work(tmp_path):
    """Command lines `--engine` cannot serve are refused with status 2 and one line, before a checkpoint is read."""
    run, row_b = tmp_path / "run", tmp_path / "B1"
    for workdir, config in ((run, tiny.get_config()), (row_b, table3.get_config("B1,base=tiny"))):
        workdir.mkdir()
        (workdir / "config.json").write_text(config.to_json_best_effort())
    expected = {
        "quantization": (["decode", f"--workdir={run}", "--quantization=int8", "--input=/dev/null"],
                         "--quantization is how a CTranslate2 export stores its weights; add --engine=ctranslate2."),
        "hosts": (["decode", f"--workdir={run}", "--engine=ctranslate2", "--num_processes=2", "--input=/dev/null"],
                  "--num_processes: --engine=ctranslate2 decodes on one host"),
        "grid": (["evaluate", f"--workdir={run}", "--split=dev", "--engine=ctranslate2", "--grid=decode.beam_size=1,2"],
                 "--grid decodes with --engine=jax"),
        "row_b": (["evaluate", f"--workdir={row_b}", "--split=test", "--engine=ctranslate2"],
                  "--engine=ctranslate2: CTranslate2 cannot express this run: d_k = 4 ≠ d_v = 16"),
        "checkpoint": (["export", f"--workdir={run}", "--checkpoint=best"], "--checkpoint=best: use latest"),
    }
    procs = run_all({name: args for name, (args, _) in expected.items()})
    for name, (args, message) in expected.items():
        lines = procs[name].stderr.strip().splitlines()
        assert procs[name].returncode == 2 and len(lines) == 1, (name, procs[name].stderr)
        assert lines[0].startswith(f"transformer-jax {args[0]}: {message}"), (name, lines[0])
    assert not (run / "export").exists() and not (row_b / "export").exists()


@needs_ct2
@pytest.mark.slow
def test_decode_and_evaluate_switch_engines_with_one_flag(trained, tmp_path):
    """`decode` and `evaluate` with --engine=ctranslate2 give the JAX engine's lines and scores (this model's
    outputs are equal on every sentence: test_beam_outputs_equal_ours_token_for_token), reusing the run folder's
    up-to-date export; the JSON names the engine and what it decoded."""
    run, out = trained
    workdir = os.path.dirname(os.path.dirname(out))
    src, _, _ = pipeline.eval_data(run.config, run.tokenizer, "test")
    source = tmp_path / "source.txt"
    source.write_text("\n".join(src[:20] + [""] + src[20:30]) + "\n", encoding="utf-8")
    jax_copy = tmp_path / "jax_copy"  # (both evaluations write translations_test.txt and eval_test.json)
    shutil.copytree(workdir, jax_copy, ignore=shutil.ignore_patterns("export"))
    procs = run_all({
        "jax": ["decode", f"--workdir={workdir}", str(source)],
        "ct2": ["decode", f"--workdir={workdir}", "--engine=ctranslate2", str(source)],
        "eval_jax": ["evaluate", f"--workdir={jax_copy}", "--split=test", "--json"],
        "eval_ct2": ["evaluate", f"--workdir={workdir}", "--split=test", "--engine=ctranslate2", "--json"],
    })
    for proc in procs.values():
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert procs["ct2"].stdout == procs["jax"].stdout and procs["ct2"].stdout.splitlines()[20] == ""
    assert f"Reusing the CTranslate2 model {out}" in procs["ct2"].stderr
    jax_result, ct2_result = (json.loads(procs[name].stdout.splitlines()[-1]) for name in ("eval_jax", "eval_ct2"))
    assert ct2_result["engine"] == "ctranslate2" and jax_result["engine"] == "jax"
    assert ct2_result["checkpoint"] == f"latest (steps {NUM_STEPS}), ctranslate2 none"
    assert ct2_result["sacrebleu"] == jax_result["sacrebleu"] and ct2_result["chrf"] == jax_result["chrf"]
