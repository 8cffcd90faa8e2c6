"""Tests for `transformer-jax decode|evaluate|average` and for decoding a trained model (§6.1).

One tiny model is trained once for the module (~15 s on 2 CPU cores); the commands run as subprocesses (the
CLI goes through absl's app.run and sys.exit; the ones of one test start together), the rest runs in-process with
the library.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from absl import flags
from flax import nnx

from transformer_jax.configs import demo
from transformer_jax.data import pipeline
from transformer_jax.data.batching import eval_batches
from transformer_jax.data.sources import read_lines
from transformer_jax.data.tokenizer import EOS_ID
from transformer_jax.decode.restore import check_shapes, restore_run
from transformer_jax.decode.translate import Translator, make_decode_fn
from transformer_jax.launch import cli as launch_cli
from transformer_jax.launch import decode as decode_cli
from transformer_jax.launch import overrides
from transformer_jax.train.step import make_setup
from transformer_jax.train.trainer import train

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUM_STEPS = 400  # enough for translations that differ from sentence to sentence (a 40-step model says "" or "eee")
CHECKPOINT_EVERY = 100


def tiny_config() -> ml_collections.ConfigDict:
    """configs/demo.py shrunk to a 1+1-layer d_model 32 model on 2000 synthetic pairs."""
    c = demo.get_config()
    m = c.model
    m.d_model, m.d_ff, m.num_heads, m.d_k, m.d_v = 32, 64, 2, 16, 16
    m.num_encoder_layers = m.num_decoder_layers = 1
    m.vocab_size, m.max_len = 400, 64  # SentencePiece needs ≥ ~330 pieces for the corpus's characters
    d = c.data
    d.source = "synthetic"
    d.synthetic.train_size, d.synthetic.dev_size, d.synthetic.test_size = 2000, 50, 50
    d.tokens_per_batch, d.max_length, d.num_length_buckets = 1024, 64, 1
    t = c.train
    t.num_steps, t.warmup_steps, t.learning_rate_scale = NUM_STEPS, 150, 1.0
    t.checkpoint_every_steps, t.checkpoint_every_minutes, t.keep_checkpoints = CHECKPOINT_EVERY, 0.0, 5
    t.eval_every_steps, t.log_every_steps = 0, 100
    c.decode.batch_size = 16
    return c


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("run"))
    train(tiny_config(), path, progress=False)
    return path


@pytest.fixture(scope="module")
def run(workdir):
    return restore_run(workdir)


@pytest.fixture(scope="module")
def sources(run) -> list[str]:
    """Six test-split sentences of different lengths with an empty line in the middle."""
    src, _, _ = pipeline.eval_data(run.config, run.tokenizer, "test")
    return src[:3] + [""] + src[3:6]


@pytest.fixture(scope="module")
def alone(run, sources) -> list[str]:
    """Each sentence translated on its own (beam search, the run's config.decode)."""
    translator = Translator(run.config, run.graphdef, run.params, run.tokenizer, run.mesh)
    return [translator.translate([text])[0] for text in sources]


def cli(*args: str) -> subprocess.CompletedProcess:
    """Runs ``transformer-jax ARGS`` in a fresh interpreter (as the console script does)."""
    return subprocess.run([sys.executable, "-c", "from transformer_jax.launch.cli import run; run()", *args], check=False,
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def clis(*commands: list[str]) -> list[subprocess.CompletedProcess]:
    """Runs several ``transformer-jax`` command lines at once (each pays the jax import); their results in order."""
    procs = [subprocess.Popen([sys.executable, "-c", "from transformer_jax.launch.cli import run; run()", *args], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for args in commands]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The error a failed command printed; asserts it failed with exactly one line on stderr and no traceback."""
    assert proc.returncode != 0, proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def with_decode(config: ml_collections.ConfigDict, **decode) -> ml_collections.ConfigDict:
    values = config.to_dict()
    values["decode"].update(decode)
    return ml_collections.ConfigDict(values)


def batch_of(run, texts: list[str]) -> jax.Array:
    ids = run.tokenizer.encode_batch(texts)
    return jnp.asarray(eval_batches([(s, s) for s in ids], batch_size=len(ids), max_len=64)[0]["inputs"])


# --- the commands ----------------------------------------------------------------------------------------------


def test_evaluate_writes_scores_and_prints_them_last(workdir):
    proc = cli("evaluate", f"--workdir={workdir}", "--split=test", "--checkpoint=avg2", "--config.decode.beam_size=2")
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout.strip().splitlines()[-1])
    with open(os.path.join(workdir, "eval_test.json")) as f:
        written = json.load(f)
    assert printed == written
    assert {"sacrebleu", "tokenized_bleu", "chrf", "signature", "checkpoint", "num_sentences"} <= set(printed)
    assert "samples" not in printed
    assert printed["num_sentences"] == 50 and printed["beam_size"] == 2
    assert printed["checkpoint"].startswith("avg2")
    assert "sacreBLEU" in proc.stdout  # the human summary above the JSON
    with open(os.path.join(workdir, "translations_test.txt"), encoding="utf-8") as f:
        assert len(f.read().split("\n")) == 51


def test_averaging_two_checkpoints_gives_their_elementwise_mean(workdir):
    proc = cli("average", f"--workdir={workdir}", "--last=2")
    assert proc.returncode == 0, proc.stderr
    path = proc.stdout.strip().splitlines()[-1]
    assert os.path.isdir(path) and path.endswith(os.path.join("averaged", "avg2"))
    averaged = restore_run(workdir, "avg2")
    assert path in averaged.checkpoint  # restored from the saved average
    before, last = (restore_run(workdir, str(s)).params for s in (NUM_STEPS - CHECKPOINT_EVERY, NUM_STEPS))
    mean = jax.tree.map(lambda a, b: (np.asarray(a, np.float64) + np.asarray(b, np.float64)) / 2, before, last)
    jax.tree.map(lambda m, a: np.testing.assert_allclose(np.asarray(a), m, rtol=1e-6, atol=1e-7), mean,
                 averaged.params)
    assert not all(jax.tree.leaves(jax.tree.map(lambda a, b: np.allclose(a, b), before, last)))  # a real mean


def test_checkpoint_of_another_vocabulary_is_a_value_error(workdir, tmp_path):
    """The CLI turns this ValueError into one line (as the d_ff case above)."""
    shutil.copy(os.path.join(workdir, "vocab.model"), tmp_path / "vocab.model")
    with open(os.path.join(workdir, "config.json")) as f:
        config = json.load(f)
    config["model"]["vocab_size"] = 500
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="400 pieces but config.model.vocab_size is 500"):
        restore_run(str(tmp_path))


def test_check_shapes_accepts_the_run_and_names_a_mismatch(run, workdir):
    abstract = make_setup(run.config, run.mesh).abstract_state["params"]
    check_shapes(run.params, abstract, "run")
    wrong = jax.tree.map(lambda x: x, run.params)
    wrong["embedding"]["table"] = wrong["embedding"]["table"][:-1]
    with pytest.raises(ValueError, match="embedding/table has shape"):
        check_shapes(wrong, abstract, "run")


def test_decode_takes_its_own_flags_and_config_decode_overrides():
    listed = set(launch_cli.command_flags(decode_cli))
    assert {"workdir", "checkpoint", "input", "output"} <= listed
    assert not listed & {"config", "eval_checkpoint", "json", "beam_size", "method", "split", "last"}
    assert all(flags.FLAGS[name].help for name in listed)
    assert "--config.decode.beam_size=1" in launch_cli.help_text("decode", decode_cli)


def with_other_d_ff(workdir: str, other) -> None:
    """``other``: the run's checkpoints and vocabulary under a config.json that says d_ff 128 (trained with 64)."""
    other.mkdir()
    shutil.copytree(os.path.join(workdir, "checkpoints"), other / "checkpoints")
    shutil.copy(os.path.join(workdir, "vocab.model"), other / "vocab.model")
    with open(os.path.join(workdir, "config.json")) as f:
        config = json.load(f)
    config["model"]["d_ff"] = 128
    (other / "config.json").write_text(json.dumps(config))


@pytest.fixture(scope="module")
def decoded(workdir, sources, tmp_path_factory) -> dict:
    """Seven commands on the trained run, started together: {name: (CompletedProcess, its output file or None)}."""
    tmp = tmp_path_factory.mktemp("decoded")
    src = tmp / "in.txt"
    src.write_text("".join(line + "\n" for line in sources), encoding="utf-8")
    kept = tmp / "kept.txt"
    kept.write_text("an earlier result\n", encoding="utf-8")
    with_other_d_ff(workdir, tmp / "other")
    parsing_run = tmp / "parsing_run"  # only a config.json with data.pos_tags, a field of parsing runs (§6.3) that
    parsing_run.mkdir()                # configs/demo.py, the default of --config, lacks: refused before any reading
    with open(os.path.join(workdir, "config.json")) as f:
        config = json.load(f)
    config["data"]["pos_tags"] = False
    (parsing_run / "config.json").write_text(json.dumps(config))
    commands = {
        "positional": (["decode", f"--workdir={workdir}", str(src), f"--output={tmp / 'out.txt'}"], tmp / "out.txt"),
        "beam1": (["decode", f"--workdir={workdir}", f"--input={src}", "--config.decode.beam_size=1",
                   f"--output={tmp / 'beam1.txt'}"], tmp / "beam1.txt"),
        "bad_output": (["decode", f"--workdir={workdir}", str(src), f"--output={tmp / 'no' / 'such' / 'out.txt'}"],
                       None),
        "twice": (["decode", f"--workdir={workdir}", str(src), f"--input={src}"], None),
        "bad_checkpoint": (["decode", f"--workdir={workdir}", "--checkpoint=avg9", str(src), f"--output={kept}"],
                           kept),
        "model": (["evaluate", f"--workdir={workdir}", "--split=test", "--config.model.d_model=64"], None),
        "other_shapes": (["decode", f"--workdir={tmp / 'other'}", "--input=/dev/null"], None),
        "run_only_field": (["evaluate", f"--workdir={parsing_run}", "--split=test", "--config.data.pos_tags=true"],
                           None),
        "unknown_field": (["decode", f"--workdir={workdir}", "--input=/dev/null", "--config.decode.beam_sise=2"], None),
        "bad_type": (["evaluate", f"--workdir={workdir}", "--split=test", "--config.decode.beam_size=four"], None),
    }
    results = clis(*(args for args, _ in commands.values()))
    return {name: (proc, out) for (name, (_, out)), proc in zip(commands.items(), results)}


def test_decode_translates_its_positional_file_in_order_keeping_empty_lines(decoded, sources, alone):
    """`decode --workdir=W in.txt` read stdin (0 lines, exit 0)."""
    proc, out = decoded["positional"]
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(sources)  # one line per input line, newline-terminated
    assert lines[3] == ""  # the empty input line
    assert lines[:-1] == alone  # order preserved: line i is sentence i's own translation
    assert len(set(alone)) > 2, alone  # the model's outputs depend on the input, so order is really tested
    assert "decode: 100%" in proc.stderr  # progress bar on stderr for a file


def test_config_decode_override_reaches_the_search(decoded, run, sources):
    """`--config.decode.beam_size=1` was ignored (beam 4); beam 1 is greedy search."""
    proc, out = decoded["beam1"]
    assert proc.returncode == 0, proc.stderr
    assert "(beam 1, α 0.6" in proc.stderr  # the config the Translator was built with
    greedy = Translator(with_decode(run.config, method="greedy"), run.graphdef, run.params, run.tokenizer, run.mesh)
    assert out.read_text(encoding="utf-8").split("\n")[:-1] == greedy.translate(sources)


def test_a_bad_output_is_refused_before_decoding(decoded):
    proc, _ = decoded["bad_output"]
    message = one_line_error(proc)
    assert "--output=" in message and "does not exist" in message
    assert "Decoding" not in proc.stderr  # refused before the checkpoint was restored


def test_decode_input_given_twice_is_a_usage_error(decoded):
    proc, _ = decoded["twice"]
    assert proc.returncode == 2 and "given twice" in one_line_error(proc)


def test_a_missing_checkpoint_leaves_the_output_alone(decoded):
    proc, kept = decoded["bad_checkpoint"]
    assert "Cannot average the last 9 checkpoints" in one_line_error(proc)
    assert kept.read_text(encoding="utf-8") == "an earlier result\n"  # opened only once there is something to write


def test_checkpoint_of_other_shapes_is_one_clear_error(decoded):
    message = one_line_error(decoded["other_shapes"][0])
    assert message.startswith("transformer-jax decode: Checkpoint step 400"), message
    assert "ffn/b_1 has shape (64,) in the checkpoint but (128,) in config.json" in message


def test_a_model_override_on_a_trained_run_is_refused(decoded):
    message = one_line_error(decoded["model"][0])
    assert message.startswith("transformer-jax evaluate: --config.model.d_model cannot change on a trained run")


@pytest.mark.parametrize("name,message", [
    ("run_only_field", "--config.data.pos_tags cannot change on a trained run"),
    ("unknown_field", "--config.decode.beam_sise: the run's config.json has no field decode.beam_sise"),
    ("bad_type", ("--config.decode.beam_size=four: 'four' is not a int (the type of config.decode.beam_size in the "
                  "run's config.json)")),
])
def test_an_override_is_checked_against_the_run_s_config(decoded, name, message):
    """The overrides are parsed against the run's config.json, not against configs/demo.py (the default of the
    shared --config flag): a field of the run that demo.py lacks was refused as unknown instead of as fixed by
    training. A mistake is one line with status 2, as any other wrong flag."""
    proc = decoded[name][0]
    assert message in one_line_error(proc)
    assert proc.returncode == 2


def test_run_overrides_change_decode_fields_only(run):
    config = overrides.apply_to_run(run.config, {"decode.beam_size": 1, "decode.length_penalty": 1.0})
    assert (config.decode.beam_size, config.decode.length_penalty) == (1, 1.0)
    assert run.config.decode.beam_size == 4  # a copy
    for bad, match in [({"model.d_model": 64}, "cannot change on a trained run"),
                       ({"train.num_steps": 5}, "cannot change on a trained run"),
                       ({"decode.beam_sise": 2}, "no field decode.beam_sise"),
                       ({"decode.method": "nucleus"}, "Unknown config.decode.method")]:
        with pytest.raises(ValueError, match=match):
            overrides.apply_to_run(run.config, bad)


def test_a_decode_field_newer_than_the_run_takes_its_default_and_can_be_overridden(run):
    """A run trained before config.decode.tree_constraint existed has no such field in its config.json; decoding
    options do not touch the checkpoints, so the field takes configs/base.py's default and an override applies."""
    older = run.config.to_dict()
    del older["decode"]["tree_constraint"]
    older = ml_collections.ConfigDict(older)
    assert overrides.apply_to_run(older, {}).decode.tree_constraint is False
    assert overrides.apply_to_run(older, {"decode.tree_constraint": "true"}).decode.tree_constraint is True


def test_read_lines_keeps_every_line(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes("\ufeffa\r\n\nb\x0bc\u2028d\n".encode())  # only \n ends a line; the BOM is no text
    assert list(read_lines(str(path))) == ["a", "", "b\x0bc\u2028d"]
    path.write_bytes(b"ok\n\xff\xfe bad\n")
    with pytest.raises(ValueError, match="line 2: invalid UTF-8"):
        list(read_lines(str(path)))


# --- evaluate --grid (launch/grid.py): decoding chosen on dev ---------------------------------------------------


@pytest.fixture(scope="module")
def gridded(workdir, tmp_path_factory) -> dict:
    """A 2 × 2 grid and a plain dev evaluation of one of its points, on a copy of the run, started together with
    three refusals on the original: {name: CompletedProcess}, plus the copy's path."""
    copy = str(tmp_path_factory.mktemp("grid") / "run")
    shutil.copytree(workdir, copy)
    for name in ("eval_dev.json", "decoding_dev.jsonl"):
        if os.path.exists(os.path.join(copy, name)):
            os.remove(os.path.join(copy, name))
    commands = {
        "grid": ["evaluate", f"--workdir={copy}", "--split=dev", "--grid=checkpoint=latest,300",
                 "--grid=decode.beam_size=1,3", "--config.decode.length_penalty=1.0"],
        "test_split": ["evaluate", f"--workdir={workdir}", "--split=test", "--grid=decode.beam_size=1,2"],
        "missing": ["evaluate", f"--workdir={workdir}", "--split=dev", "--grid=checkpoint=latest,avg9"],
        "conflict": ["evaluate", f"--workdir={workdir}", "--split=dev", "--grid=decode.beam_size=1,2",
                     "--config.decode.beam_size=3"],
    }
    results = dict(zip(commands, clis(*commands.values()), strict=True))
    # After the grid: the plain evaluation of its point (step 300, beam 3, α 1.0), for comparison.
    results["plain"] = cli("evaluate", f"--workdir={copy}", "--split=dev", "--checkpoint=300",
                           "--config.decode.beam_size=3", "--config.decode.length_penalty=1.0")
    return {"copy": copy, **results}


def test_a_grid_scores_every_combination_as_evaluate_would(gridded):
    proc, copy = gridded["grid"], gridded["copy"]
    assert proc.returncode == 0, proc.stderr
    with open(os.path.join(copy, "decoding_dev.jsonl")) as f:
        records = [json.loads(line) for line in f]
    assert [r["grid"] for r in records] == [{"checkpoint": c, "decode.beam_size": b}
                                            for c in ("latest", "300") for b in (1, 3)]
    assert [(r["checkpoint"], r["beam_size"], r["length_penalty"]) for r in records] == [
        (f"step {s}", b, 1.0) for s in (NUM_STEPS, 300) for b in (1, 3)]
    assert len({r["sacrebleu"] for r in records}) > 1  # the settings reach the decoder
    plain = json.loads(gridded["plain"].stdout.strip().splitlines()[-1])
    point = records[3]
    for key in ("sacrebleu", "sacrebleu_lowercase", "chrf", "tokenized_bleu", "brevity_penalty", "hyp_length",
                "ref_length", "num_sentences"):
        assert point[key] == plain[key], key
    best = max(records, key=lambda r: r["sacrebleu"])
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == best  # the last line: the best point
    assert "| checkpoint | decode.beam_size | sacreBLEU |" in proc.stdout and proc.stdout.count(" * |") == 1
    assert "| tokenized BLEU | BP | seconds |" in proc.stdout


def test_a_grid_writes_no_eval_json_or_translations(gridded):
    """The grid ran first, on a copy without eval_dev.json; only the plain evaluate after it wrote one."""
    with open(os.path.join(gridded["copy"], "eval_dev.json")) as f:
        assert json.load(f)["checkpoint"] == "step 300"
    assert "translations_dev.txt" not in gridded["grid"].stdout


@pytest.mark.parametrize("name,message", [
    ("test_split", "--grid chooses decoding settings, on the dev split only"),
    ("missing", "Cannot average the last 9 checkpoints"),
    ("conflict", "--grid=decode.beam_size=1,2 and --config.decode.beam_size both set"),
])
def test_a_grid_mistake_is_one_line_before_any_decoding(gridded, workdir, name, message):
    assert message in one_line_error(gridded[name])
    assert not os.path.exists(os.path.join(workdir, "decoding_dev.jsonl"))


@pytest.mark.parametrize("specs,message", [
    (["decode.beam_size"], "write NAME=V1,V2"),
    (["decode.beam_size=1", "decode.beam_size=2"], "given twice"),
    (["decode.beam_size=1,1"], "listed twice"),
    (["decode.beam=1,2"], "NAME is checkpoint or a field of config.decode"),
    (["model.d_model=32,64"], "NAME is checkpoint or a field of config.decode"),
    (["decode.beam_size=four"], "'four' is not a int"),
    (["decode.beam_size=4.5"], "'4.5' is not a int"),
    (["checkpoint=last"], "bad checkpoint 'last'"),
])
def test_grid_specs_are_checked(run, specs, message):
    from transformer_jax.launch import grid
    with pytest.raises(ValueError, match=re.escape(message)):
        grid.parse_axes(specs, run.config, {}, checkpoint_given=False)


def test_grid_values_take_the_field_s_type_and_checkpoint_goes_first(run):
    from transformer_jax.launch import grid
    axes = grid.parse_axes(["decode.length_penalty=0.6,1", "decode.method=beam,greedy", "checkpoint=avg2,latest"],
                           run.config, {}, checkpoint_given=False)
    assert axes == [("checkpoint", ["avg2", "latest"]), ("decode.length_penalty", [0.6, 1.0]),
                    ("decode.method", ["beam", "greedy"])]
    assert isinstance(axes[1][1][1], float)
    assert len(grid.combinations(axes)) == 8
    with pytest.raises(ValueError, match="--checkpoint both name the checkpoint"):
        grid.parse_axes(["checkpoint=latest"], run.config, {}, checkpoint_given=True)


# --- decoding the trained model ----------------------------------------------------------------------------------


def test_translating_a_list_equals_each_sentence_alone(run, sources, alone):
    translator = Translator(run.config, run.graphdef, run.params, run.tokenizer, run.mesh)
    assert translator.translate(sources) == alone
    assert translator.translate(sources[::-1]) == alone[::-1]


def test_cached_greedy_decoding_equals_full_recomputation(run, sources):
    """Each greedy token (cached decode_step) is the argmax of the full decoder re-run on the prefix so far.

    Row t of the recomputation batch is the prefix y_<t, a placeholder at t (shifted out, never seen) and padding.
    """
    texts = [s for s in sources if s][:3]
    inputs = batch_of(run, texts)
    ids = np.asarray(make_decode_fn(with_decode(run.config, method="greedy"), run.graphdef)(
        run.params, inputs, jax.random.PRNGKey(0)))  # [B, T]
    steps = ids.shape[1]

    @jax.jit
    def full_decoder(params, prefixes, src):  # prefixes [T, T], src [T, S] → logits [T, T, vocab]
        model = nnx.merge(run.graphdef, params)
        return model.decode(prefixes, model.encode(src), src)

    for row in range(len(texts)):
        length = int(np.argmax(ids[row] == EOS_ID)) + 1 if EOS_ID in ids[row] else steps
        assert (ids[row, :length] != 0).all() and (ids[row, length:] == 0).all()
        prefixes = np.zeros((steps, steps), np.int32)
        for t in range(steps):
            prefixes[t, :t], prefixes[t, t] = ids[row, :t], EOS_ID
        logits = full_decoder(run.params, jnp.asarray(prefixes), jnp.repeat(inputs[row:row + 1], steps, axis=0))
        recomputed = np.asarray(jnp.argmax(logits[jnp.arange(steps), jnp.arange(steps)], axis=-1))
        np.testing.assert_array_equal(recomputed[:length], ids[row, :length])


def test_beam_of_one_equals_greedy(run, sources):
    inputs = batch_of(run, [s for s in sources if s])
    rng = jax.random.PRNGKey(0)
    greedy = make_decode_fn(with_decode(run.config, method="greedy"), run.graphdef)(run.params, inputs, rng)
    beam1 = make_decode_fn(with_decode(run.config, method="beam", beam_size=1), run.graphdef)(run.params, inputs, rng)
    np.testing.assert_array_equal(np.asarray(beam1), np.asarray(greedy))
