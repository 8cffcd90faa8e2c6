"""Branching a run (transformer_jax/run/branch.py): a run started from another run's checkpoint of step S, whose
config differs only after S, ends bit-identical to the same config trained from scratch; every difference that
would change steps 1..S is refused by name, before anything is written.

The runs are tiny in-process trainings (tests/scripts/tiny_setup.py) through launch/train.py's run_training, the
function behind `transformer-jax train --branch_from=RUN --branch_step=S`, with dropout on so that the dropout
keys must continue exactly too.
"""

import json
from pathlib import Path

import jax
import numpy as np
import pytest

import tiny_setup as tiny
from transformer_jax.launch.train import run_training
from transformer_jax.run import folder
from transformer_jax.run.metrics import START_EVENT, read_metrics

BRANCH_STEP = 4


def config(**train):
    """tiny with dropout, a checkpoint every 2 steps, 6 steps unless told."""
    c = tiny.tiny_config(**{"num_steps": 6, "checkpoint_every_steps": 2, **train})
    c.model.dropout_rate = 0.1
    return c


def train_run(c, workdir: Path, branch_from=None) -> None:
    run_training(c, str(workdir), eval_splits=(), branch_from=branch_from, command=["test"])


def final_state(c, workdir: Path) -> dict:
    state, _ = tiny.restore_checkpoint(workdir, c, folder.checkpoint_steps(workdir)[-1])
    return state


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A finished 6-step run without a cooldown: checkpoints 2, 4, 6."""
    workdir = tmp_path_factory.mktemp("branch") / "source"
    train_run(config(), workdir)
    assert folder.checkpoint_steps(workdir) == [2, 4, 6]
    return workdir


@pytest.mark.parametrize("num_steps", [8, 7])
def test_a_branch_equals_the_run_from_scratch(source, tmp_path, num_steps):
    """Branched at step 4 into 8 steps with a 4-step cooldown (steps 5-8 at 4/4, 3/4, 2/4, 1/4 of the rate; with 7
    steps the ramp's first, full-rate step is step 4 itself): the same parameters, optimizer state, step and dropout
    key as the cooldown run trained from step 0."""
    longer = config(num_steps=num_steps, cooldown_steps=4)
    branched, scratch = tmp_path / "branched", tmp_path / "scratch"
    train_run(longer, branched, branch_from=(str(source), BRANCH_STEP))
    train_run(longer, scratch)
    got, want = final_state(longer, branched), final_state(longer, scratch)
    assert int(got["step"]) == num_steps
    want_leaves = jax.tree_util.tree_leaves(want)
    for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(got)[0], want_leaves, strict=True):
        np.testing.assert_array_equal(a, b, err_msg=jax.tree_util.keystr(path))
    # The source's step-6 checkpoint (a rate without cooldown) stayed behind; 6 and 8 are the branch's own.
    assert folder.checkpoint_steps(branched) == [2, 4, 6, num_steps]
    source_6, branch_6 = (jax.tree_util.tree_leaves(tiny.restore_checkpoint(w, c, 6)[0]["params"])
                          for w, c in ((source, config()), (branched, longer)))
    assert any(not np.array_equal(a, b) for a, b in zip(source_6, branch_6, strict=True))
    # One history: every step once, a training segment from 0 and one from the branch step.
    records = read_metrics(str(branched))
    assert sorted(r["step"] for r in records if "train_loss" in r) == list(range(1, num_steps + 1))
    assert [r["step"] for r in records if r.get("event") == START_EVENT] == [0, BRANCH_STEP]
    provenance = (branched / folder.PROVENANCE_FILE).read_text().splitlines()
    assert len(provenance) == 2  # the source's start before step 4, then the branch's


def test_running_the_branch_again_resumes_it(source, tmp_path):
    c = config(num_steps=8, cooldown_steps=4)
    branched = tmp_path / "branched"
    train_run(c, branched, branch_from=(str(source), BRANCH_STEP))
    before = final_state(c, branched)
    train_run(c, branched, branch_from=(str(tmp_path / "gone"), BRANCH_STEP))  # nothing copied: the source may go
    assert folder.checkpoint_steps(branched) == [2, 4, 6, 8]
    for a, b in zip(*(jax.tree_util.tree_leaves(s["params"]) for s in (final_state(c, branched), before)),
                    strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("change,message", [
    (dict(train=dict(learning_rate_scale=0.9)), "config.train.learning_rate_scale (0.6 → 0.9)"),
    (dict(train=dict(label_smoothing=0.2)), "config.train.label_smoothing"),
    (dict(model=dict(d_ff=96)), "config.model.d_ff (64 → 96)"),
    (dict(seed=7), "config.seed"),
    (dict(data=dict(tokens_per_batch=512)), "config.data.tokens_per_batch"),
    (dict(train=dict(num_steps=6, cooldown_steps=4)), "cooldown starts after step 3"),
    (dict(train=dict(num_steps=4)), "leaves nothing to train"),
    (dict(step=3), "has no checkpoint of step 3 (it has: 2, 4, 6)"),
])
def test_what_would_change_the_first_steps_is_refused(source, tmp_path, change, message):
    c = config(num_steps=8)
    c.train.update(change.get("train", {}))
    c.model.update(change.get("model", {}))
    c.data.update(change.get("data", {}))
    c.seed = change.get("seed", c.seed)
    workdir = tmp_path / "branched"
    with pytest.raises(ValueError, match="^--branch") as error:
        train_run(c, workdir, branch_from=(str(source), change.get("step", BRANCH_STEP)))
    assert message in str(error.value)
    assert not workdir.exists()  # refused before anything was written


def test_a_cooldown_of_the_source_before_the_step_is_refused(tmp_path):
    """The source's step 4 ran at 3/4 of the rate: its step-4 state is not a plain run's, whatever the branch does."""
    cooled = tmp_path / "cooled"
    train_run(config(num_steps=6, cooldown_steps=4), cooled)
    with pytest.raises(ValueError, match="cooled's cooldown starts after step 3"):
        train_run(config(num_steps=8, cooldown_steps=3), tmp_path / "b", branch_from=(str(cooled), BRANCH_STEP))
    # The config.json of a run trained before cooldown_steps existed reads as no cooldown.
    saved = json.loads((cooled / folder.CONFIG_FILE).read_text())
    from transformer_jax.run.branch import changed_fields
    del saved["train"]["cooldown_steps"]
    assert changed_fields(saved, json.loads(config().to_json_best_effort())) == []


def test_a_workdir_with_a_run_but_no_checkpoint_is_refused(source, tmp_path):
    """A config.json without checkpoints (a run begun elsewhere): the branch would mix two runs' files."""
    workdir = tmp_path / "half"
    workdir.mkdir()
    (workdir / folder.CONFIG_FILE).write_text((source / folder.CONFIG_FILE).read_text())
    with pytest.raises(ValueError, match="already holds a run: a branch needs a new --workdir"):
        train_run(config(num_steps=8), workdir, branch_from=(str(source), BRANCH_STEP))
    assert sorted(p.name for p in workdir.iterdir()) == [folder.CONFIG_FILE]


def test_a_search_row_may_branch_from_the_table3_row_it_continues():
    """The row labels (config.table3_row, config.sweep_row, config.name) say where a config came from, not what it
    trains: search row base_ls2_9k_cd2k is Table 3's D4 on Multi30k trained longer, and branches from D4's run."""
    from transformer_jax.configs import multi30k_search, table3
    from transformer_jax.run.branch import changed_fields

    d4, longer = (json.loads(c.to_json_best_effort()) for c in (
        table3.get_config("D4,base=multi30k"), multi30k_search.get_config("base_ls2_9k_cd2k")))
    assert d4["table3_row"] == "D4" and "table3_row" not in longer
    assert changed_fields(d4, longer) == []
    assert changed_fields(d4, json.loads(table3.get_config("D3,base=multi30k").to_json_best_effort())) == [
        "config.train.label_smoothing (0.2 → 0.0)"]
