"""End to end: ``trainer.train`` on the tiny synthetic config learns, and leaves a complete run folder behind.

One training run (the tiny config of tests/scripts/tiny_setup.py, 200 steps of 16 × 64 tokens, about ten seconds)
is shared by the checks in the same test, so pytest-xdist never runs it twice.
"""

import json
import math

import pytest

import tiny_setup as tiny
from transformer_jax.run.folder import load_config, save_config
from transformer_jax.run.metrics import read_metrics
from transformer_jax.train.trainer import train

NUM_STEPS = 200


def e2e_config():
    return tiny.tiny_config(num_steps=NUM_STEPS, eval_every_steps=100, checkpoint_every_steps=100, log_every_steps=1)


def test_tiny_model_learns_and_writes_a_complete_run(tmp_path):
    workdir = tmp_path / "run"
    config = e2e_config()
    last = train(config, str(workdir), progress=False)
    assert last["step"] == NUM_STEPS

    # It learns: the smoothed training loss falls well below half its start, and so does the dev loss.
    records = read_metrics(str(workdir))
    train_records = [r for r in records if "train_loss" in r]
    assert [r["step"] for r in train_records] == list(range(1, NUM_STEPS + 1))  # log_every_steps=1
    first, final = train_records[0]["train_loss"], train_records[-1]["train_loss"]
    assert first > 4.0  # about ln(384) − H(q_ε) at initialisation
    assert final < 0.5 * first, (first, final)
    evals = [r for r in records if "dev_loss" in r]
    assert [r["step"] for r in evals] == [100, 200]
    assert evals[-1]["dev_loss"] < 0.6 * first
    assert evals[-1]["dev_ppl"] < evals[0]["dev_ppl"] < config.model.vocab_size

    # metrics.jsonl: per-step records with the loss, learning rate and throughput; eval records with dev loss/PPL.
    for r in train_records:
        assert {"step", "time", "train_loss", "train_nll", "learning_rate", "tokens_per_s", "grad_norm"} <= set(r)
        # The rate of the step the record names (§5.3: linear warm-up to step 30, then ∝ 1/√step).
        t, step = config.train, r["step"]
        lrate = t.learning_rate_scale * config.model.d_model**-0.5 * min(step**-0.5, step * t.warmup_steps**-1.5)
        assert r["learning_rate"] == pytest.approx(lrate, rel=1e-6), step
    for r in evals:
        assert {"step", "dev_loss", "dev_nll", "dev_ppl"} <= set(r)
        assert math.isclose(r["dev_ppl"], math.exp(r["dev_nll"]), rel_tol=1e-6)
    assert last["train_loss"] == final and last["dev_loss"] == evals[-1]["dev_loss"]

    # The run folder: resolved config, vocabulary, checkpoints, TensorBoard events.
    saved = json.loads((workdir / "config.json").read_text())
    assert saved == json.loads(config.to_json_best_effort())
    assert load_config(str(workdir)).model.d_model == config.model.d_model
    assert (workdir / "vocab.model").is_file()
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir() if p.name.isdigit()) == ["100", "200"]
    events = list((workdir / "tensorboard").glob("events.out.tfevents.*"))
    assert events and all(e.stat().st_size > 0 for e in events)

    # Training again in the same folder with another model is refused, with the changed field named.
    other = e2e_config()
    other.model.d_ff = 128
    with pytest.raises(ValueError, match=r"different config\.model.*d_ff.*--workdir"):
        train(other, str(workdir), progress=False)
    assert json.loads((workdir / "config.json").read_text()) == saved  # untouched
    # The same command again resumes from the last checkpoint, finds the run complete and stops at once.
    assert train(e2e_config(), str(workdir), progress=False)["step"] == NUM_STEPS


def test_save_config_refuses_only_model_changes(tmp_path):
    config = tiny.tiny_config()
    save_config(config, str(tmp_path))
    config.train.num_steps += 1  # the training section may change on resume (more steps, another eval cadence)
    save_config(config, str(tmp_path))
    assert load_config(str(tmp_path)).train.num_steps == config.train.num_steps
    # how the same parameters are computed may change too: a run resumes on a GPU in bf16 ("auto")
    config.model.dtype, config.model.attention_implementation = "bfloat16", "xla"
    save_config(config, str(tmp_path))
    del config.model["attention_implementation"]  # run folders written before the field existed
    save_config(config, str(tmp_path))
    config.model.num_heads = 4
    with pytest.raises(ValueError, match="num_heads"):
        save_config(config, str(tmp_path))
