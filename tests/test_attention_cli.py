"""`transformer-jax attention`: a trained run's attention weights for one sentence (§3.2, Figures 3–5).

One tiny run is trained in-process for the module (configs/tiny.py via tiny_setup, 30 steps); the command lines, the
two that draw and the refused ones, start together as subprocesses. The weights the command writes must be the
model's own (`Transformer.attention_weights` on the same ids), softmax rows over the live keys with exact zeros
elsewhere, labelled with the tokenizer's pieces.
"""

import json
import os

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cli_runs import run_all
from tiny_setup import tiny_config
from transformer_jax.data.sources import get_source
from transformer_jax.data.tokenizer import EOS_ID
from transformer_jax.decode.restore import restore_run
from transformer_jax.decode.translate import Translator
from transformer_jax.evaluate import attention_maps
from transformer_jax.launch import attention as attention_cli
from transformer_jax.train.trainer import train

SENTENCE = "The man says that the woman has seen the small dog."
TARGET = "Der Mann sagt, dass die Frau den kleinen Hund gesehen hat."
FIGURES = ("encoder.png", "decoder.png", "cross.png", "lines.png")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("run"))
    config = tiny_config(num_steps=30, checkpoint_every_steps=30)
    config.decode.max_length_offset = 8  # an undertrained model's beam output stays short
    train(config, path, progress=False)
    return path


@pytest.fixture(scope="module")
def run(workdir):
    return restore_run(workdir)


@pytest.fixture(scope="module")
def dev_index(run) -> int:
    """The index (from 1) of the first dev sentence short enough for the tiny model's 64 positions."""
    pairs = get_source(run.config.data).load("dev")
    return next(i for i, (source, _) in enumerate(pairs, 1) if len(run.tokenizer.encode(source)) <= 40)


@pytest.fixture(scope="module")
def procs(workdir, dev_index, tmp_path_factory) -> dict:
    """Every command line of the module, started together: (CompletedProcess, its --out folder)."""
    tmp = tmp_path_factory.mktemp("attention")

    def args(name: str, *more: str, sentence: str | None = SENTENCE) -> list[str]:
        given = [f"--input={sentence}"] if sentence is not None else []
        return ["attention", f"--workdir={workdir}", *given, f"--out={tmp / name}", *more]

    commands = {
        "beam": args("beam"),
        "given": args("given", f"--target={TARGET}", "--heads=2", "--lines=cross", "--head=2"),
        "bad_layers": args("bad_layers", "--layers=1-2"),
        "bad_head": args("bad_head", "--head=3"),
        "no_input": args("no_input", sentence=None),
        "empty": args("empty", sentence="  "),
        "no_out": ["attention", f"--workdir={workdir}", f"--input={SENTENCE}"],
        "dev_index": args("dev_index", "--split=dev", f"--index={dev_index}", sentence=None),
        "both": args("both", "--split=dev", "--index=2"),
        "split_alone": args("split_alone", "--split=dev", sentence=None),
        "index_range": args("index_range", "--split=dev", "--index=33", sentence=None),
    }
    return {name: (proc, str(tmp / name)) for name, proc in run_all(commands).items()}


def one_line_error(proc) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def written(procs, name: str) -> tuple[dict, dict]:
    """(attention.json, weights.npz as a dict) of a command that must have succeeded."""
    proc, out = procs[name]
    assert proc.returncode == 0, proc.stderr
    for figure in FIGURES:
        with open(os.path.join(out, figure), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", figure
        assert os.path.join(out, figure) in proc.stdout  # it says where the files are
    with open(os.path.join(out, "attention.json"), encoding="utf-8") as f:
        record = json.load(f)
    with np.load(os.path.join(out, "weights.npz")) as npz:  # no allow_pickle: pieces are unicode arrays
        return record, {key: npz[key] for key in npz.files}


@pytest.mark.slow  # trains the module's run (~1 min on 2 cores): the slow step
def test_the_weights_are_the_models_own_softmax_rows(procs, run):
    """The .npz equals a direct `attention_weights` pass on the same ids (there padded: 3 more source and target
    positions): every live query row sums to 1, padding and the future get exactly 0, padded queries nothing."""
    _, npz = written(procs, "beam")
    source, target = run.tokenizer.encode(SENTENCE), npz["target_ids"].tolist()
    assert npz["source_ids"].tolist() == source
    s, t, pad = len(source), len(target), [0] * 3
    model = nnx.merge(run.graphdef, run.params)
    direct = model.attention_weights(jnp.asarray([source + pad]), jnp.asarray([target + pad]))
    live = {"encoder": np.s_[:, :, :s, :s], "decoder": np.s_[:, :, :t, :t], "cross": np.s_[:, :, :t, :s]}
    for kind in attention_maps.KINDS:
        weights = np.stack([np.asarray(w[0]) for w in direct[kind]])  # [layers, heads, queries, keys]
        assert npz[kind].shape == (len(direct[kind]), run.config.model.num_heads, *weights[live[kind]].shape[2:])
        np.testing.assert_allclose(npz[kind], weights[live[kind]], atol=1e-6)
        np.testing.assert_allclose(npz[kind].sum(-1), 1.0, atol=1e-5)
        queries = s if kind == "encoder" else t
        assert (weights[:, :, :queries, s if kind != "decoder" else t:] == 0.0).all()  # padding keys
        assert (weights[:, :, queries:] == 0.0).all()  # padding queries
    assert (npz["decoder"][..., np.triu(np.ones((t, t), bool), 1)] == 0.0).all()  # the future


@pytest.mark.slow  # trains the module's run (~1 min on 2 cores): the slow step
def test_without_target_the_runs_own_beam_output_is_forced(procs, run):
    record, npz = written(procs, "beam")
    assert record["target_from"] == "beam" and record["sentence"] == SENTENCE
    assert record["checkpoint"] == "step 30" and record["decoding"].startswith("beam 4")
    translation, = Translator(run.config, run.graphdef, run.params, run.tokenizer).translate([SENTENCE])
    assert record["target"] == translation
    target = npz["target_ids"].tolist()
    assert run.tokenizer.decode(target) == translation and EOS_ID not in target[:-1]
    assert record["layers"] == [1] and record["heads"] == [1, 2]
    assert record["lines"] == {"kind": "encoder", "layer": 1, "heads": [1, 2]}  # default: last encoder layer


@pytest.mark.slow  # trains the module's run (~1 min on 2 cores): the slow step
def test_a_given_target_is_forced_and_the_pieces_are_the_tokenizers(procs, run):
    record, npz = written(procs, "given")
    assert record["target_from"] == "given" and record["target"] == TARGET and record["decoding"] is None
    source, target = run.tokenizer.encode(SENTENCE), run.tokenizer.encode(TARGET)
    assert npz["target_ids"].tolist() == target
    pieces = [run.tokenizer.id_to_piece(i) for i in source]
    assert npz["source_pieces"].tolist() == pieces == record["source_pieces"]
    assert npz["target_pieces"].tolist() == [run.tokenizer.id_to_piece(i) for i in target]
    assert npz["query_pieces"].tolist() == ["<s>", *npz["target_pieces"].tolist()[:-1]]  # the decoder's inputs
    assert "".join(pieces[:-1]).replace("▁", " ").strip() == SENTENCE and pieces[-1] == "</s>"
    assert record["heads"] == [2] and record["lines"] == {"kind": "cross", "layer": 1, "heads": [2]}
    assert npz["cross"].shape[1] == run.config.model.num_heads  # the .npz keeps every head; the figures choose


def test_bad_flags_are_one_line_with_status_2(procs):
    assert "--layers=1-2: out of range; the run has 1 layer, valid: 1-1" in one_line_error(procs["bad_layers"][0])
    assert "--head=3: out of range; the run has 2 heads, valid: 1-2" in one_line_error(procs["bad_head"][0])
    assert "--input is required" in one_line_error(procs["no_input"][0])
    assert "--input is empty" in one_line_error(procs["empty"][0])
    assert "--out is required" in one_line_error(procs["no_out"][0])
    for name in ("bad_layers", "bad_head", "no_input", "empty"):
        assert not os.path.exists(procs[name][1])  # refused before anything was written


@pytest.mark.slow  # trains the module's run (~1 min on 2 cores): the slow step
def test_a_sentence_of_the_dev_split_is_drawn_by_its_index(procs, run, dev_index):
    """--split=dev --index=N: the dev split's Nth sentence (from 1), read through the run's data source as
    `evaluate` reads it (the synthetic corpus is in no file of the run folder), with its reference in attention.json."""
    record, npz = written(procs, "dev_index")
    source, reference = get_source(run.config.data).load("dev")[dev_index - 1]
    assert (record["sentence"], record["reference"], record["split"], record["index"]) == (
        source, reference, "dev", dev_index)
    assert npz["source_ids"].tolist() == run.tokenizer.encode(source) and record["target_from"] == "beam"
    assert f"Sentence {dev_index} of the dev split: {source}" in procs["dev_index"][0].stdout


def test_the_sentence_is_given_once_and_its_index_in_range(procs):
    assert "given twice" in one_line_error(procs["both"][0])
    assert "--split and --index go together" in one_line_error(procs["split_alone"][0])
    assert ("--index=33: out of range; the dev split has 32 sentences, valid: 1-32"
            in one_line_error(procs["index_range"][0]))
    for name in ("both", "split_alone", "index_range"):
        assert not os.path.exists(procs[name][1])


def test_a_sentence_of_a_text_split_is_its_files_line(tmp_path):
    """The text source: sentence N is line N of config.data.dev_files."""
    config = tiny_config()
    (tmp_path / "dev.en").write_text("One.\nTwo dogs.\nThree.\n", encoding="utf-8")
    (tmp_path / "dev.de").write_text("Eins.\nZwei Hunde.\nDrei.\n", encoding="utf-8")
    config.data.source = "text"
    config.data.dev_files = f"{tmp_path / 'dev.en'},{tmp_path / 'dev.de'}"
    assert attention_cli.split_sentence(config, "dev", 2) == ("Two dogs.", "Zwei Hunde.")
    with pytest.raises(SystemExit) as exit_:
        attention_cli.split_sentence(config, "dev", 4)
    assert exit_.value.code == 2


def test_a_plot_scales_to_a_long_sentence(tmp_path):
    """60 pieces: the figures are drawn (tick font scaled down, within matplotlib's limits)."""
    rng = np.random.default_rng(0)
    n = 60
    weights = np.exp(3 * rng.normal(size=(2, 4, n, n))).astype(np.float32)  # peaked rows, as trained heads have
    att = attention_maps.SentenceAttention(list(range(n)), list(range(n)), [f"▁w{i}" for i in range(n)],
                                           [f"▁v{i}" for i in range(n)],
                                           {kind: weights / weights.sum(-1, keepdims=True)
                                            for kind in attention_maps.KINDS})
    files = attention_maps.write_all(att, str(tmp_path), [2], [1, 4], "encoder", 2, [1, 3])
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in files.values())
