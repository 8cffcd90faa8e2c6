"""Parsing as a task of the CLI (§6.3): the treebank sources through training, decoding, repair and EVALB.

Checked: gold linearisations scored against their gold trees give F1 100 with nothing repaired; damaged outputs
are repaired (and counted) and lower F1 by what EVALB says; a tiny parsing run trained and evaluated through the
CLI writes EVALB scores (not BLEU) and one repaired tree per test sentence, over exactly its words.
"""

import json
import os

import pytest

from cli_runs import run_all
from transformer_jax.data.ptb import SyntheticParseSource
from transformer_jax.evaluate import evalb
from transformer_jax.evaluate.parsing import score_parses
from transformer_jax.parsing.trees import linearize, read_trees

SYNTHETIC = {"seed": 3, "train_size": 300, "dev_size": 20, "test_size": 20}


@pytest.fixture(scope="module")
def gold():
    from types import SimpleNamespace

    source = SyntheticParseSource(SimpleNamespace(synthetic=SYNTHETIC))
    return source.gold_trees("test"), [target for _, target in source.load("test")]


def test_gold_outputs_score_100_and_need_no_repair(gold):
    trees, outputs = gold
    scores, parses = score_parses(outputs, trees)
    assert scores["f1"] == scores["precision"] == scores["recall"] == scores["exact_match"] == 100.0
    assert scores["repaired"] == 0 and scores["errors"] == 0 and "tagging_accuracy" not in scores
    assert [read_trees(p)[0].leaves() for p in parses] == [t.leaves() for t in trees]


def test_damaged_outputs_are_repaired_counted_and_scored_by_evalb(gold):
    trees, outputs = gold
    damaged = list(outputs)
    damaged[0] = " ".join(outputs[0].split()[:-3])  # cut off: unbalanced, words missing
    damaged[1] = ""  # nothing decoded
    damaged[2] = linearize(trees[3])  # a well-formed tree of another sentence: slots for the wrong words
    scores, parses = score_parses(damaged, trees)
    assert scores["repaired"] >= 2 and scores["repair_rate"] == pytest.approx(100 * scores["repaired"] / 20)
    assert scores["errors"] == 0  # every repaired tree is over the sentence's own words
    assert 0 < scores["f1"] < 100
    expected = evalb.score(trees, [read_trees(p)[0] for p in parses])  # the same trees, scored directly
    assert scores["f1"] == pytest.approx(expected["f1"]) and scores["matched_brackets"] == expected["matched_brackets"]
    for parse, tree in zip(parses, trees):
        assert read_trees(parse)[0].leaves() == tree.leaves()


def test_a_parsing_run_is_scored_with_evalb_through_the_cli(tmp_path):
    workdir = str(tmp_path / "parse")
    overrides = ["--config.model.d_model=32", "--config.model.d_ff=64", "--config.model.num_heads=2",
                 "--config.model.d_k=16", "--config.model.d_v=16", "--config.model.num_encoder_layers=1",
                 "--config.model.num_decoder_layers=1", "--config.model.vocab_size=512",
                 "--config.data.tokens_per_batch=1024", "--config.data.max_length=128",
                 "--config.data.num_length_buckets=1",
                 *[f"--config.data.synthetic.{k}={v}" for k, v in SYNTHETIC.items()],
                 "--config.train.num_steps=10", "--config.train.warmup_steps=5", "--config.train.cooldown_steps=5",
                 "--config.train.checkpoint_every_steps=10", "--config.train.eval_every_steps=10",
                 "--config.decode.beam_size=2", "--config.decode.max_length_offset=20"]
    train = run_all({"train": ["train", "--config=configs/parsing_demo.py", f"--workdir={workdir}",
                               "--eval_splits=test", "--json", *overrides]})["train"]
    assert train.returncode == 0, train.stderr[-3000:]
    summary = json.loads(train.stdout.strip().splitlines()[-1])
    assert "test_f1" in summary and "test_bleu" not in summary
    with open(os.path.join(workdir, "eval_test.json")) as f:
        result = json.load(f)
    assert {"precision", "recall", "f1", "exact_match", "repaired", "repair_rate", "len<=40"} <= set(result)
    assert result["sentences"] == 20 and result["errors"] == 0 and result["beam_size"] == 2
    assert result["repaired"] == 0  # parsing_demo decodes under config.decode.tree_constraint: trees by construction
    assert result["tree_constraint"] is True
    with open(os.path.join(workdir, "parses_test.txt")) as f:
        parses = [read_trees(line)[0] for line in f]
    with open(os.path.join(workdir, "translations_test.txt")) as f:
        assert len(f.read().splitlines()) == 20
    source = SyntheticParseSource(type("D", (), {"synthetic": SYNTHETIC})())
    assert [p.leaves() for p in parses] == [t.leaves() for t in source.gold_trees("test")]
    evaluate = run_all({"eval": ["evaluate", f"--workdir={workdir}", "--split=test"]})["eval"]
    assert evaluate.returncode == 0, evaluate.stderr[-3000:]
    assert "F1" in evaluate.stdout and "outputs repaired" in evaluate.stdout
    short = result["len<=40"]  # EVALB's second summary prints beside the first
    assert f"≤ 40 words: F1 {short['f1']:.2f}  exact match {short['exact_match']:.2f} ({short['sentences']} sentences)" \
        in evaluate.stdout
