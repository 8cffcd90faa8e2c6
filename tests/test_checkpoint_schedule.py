"""The checkpoint step schedule (§6.1, run/checkpoints.py): averaging draws from the scheduled saves only, never from
the time-based safety saves interleaved with them; pruning keeps the last K scheduled saves plus the newest one."""

import itertools
import logging
import re
from pathlib import Path

import pytest

import tiny_setup as tiny
from transformer_jax.decode.restore import restore_run, write_average
from transformer_jax.run import folder
from transformer_jax.run.checkpoints import on_schedule, planned_schedule, schedule_steps
from transformer_jax.train.trainer import train


def test_schedule_arithmetic():
    assert planned_schedule(1500, 100_000)[-5:] == [94_500, 96_000, 97_500, 99_000, 100_000]  # base's avg5
    assert planned_schedule(600, 300_000)[-20] == 288_600  # big's avg20: 20 saves 600 steps apart
    assert planned_schedule(0, 100) == []
    assert on_schedule(100, 30, 100) and on_schedule(90, 30, 100) and not on_schedule(91, 30, 100)
    assert schedule_steps([3, 4, 7, 8, 10], 4, 10) == [4, 8, 10]
    assert schedule_steps([3, 4, 7], 0, 10) == [3, 4, 7]  # no step schedule: every save is in the series


@pytest.fixture(scope="module")
def clocked_run(tmp_path_factory):
    """24 steps, scheduled saves every 4; a fake clock that reads 4 minutes later each time, so a 10-minute safety
    save falls between the scheduled ones (the clock is read once per step and at each save)."""
    workdir = tmp_path_factory.mktemp("clocked") / "run"
    config = tiny.tiny_config(num_steps=24, checkpoint_every_steps=4, checkpoint_every_minutes=10.0,
                              keep_checkpoints=5, log_every_steps=1)
    ticks = itertools.count(0, 240)
    with _capture("transformer_jax.run.checkpoints") as records:
        train(config, str(workdir), progress=False, stop_after=10, clock=lambda: float(next(ticks)))
        mid = folder.checkpoint_steps(workdir)
        mid_avg = {spec: _restored(workdir, spec) for spec in ("latest", "avg2")}
        train(config, str(workdir), progress=False, clock=lambda: float(next(ticks)))
        log = [r.getMessage() for r in records]
    return workdir, mid, mid_avg, log


class _capture:
    """Collects a logger's records (INFO and up) without depending on pytest's caplog in a module fixture."""

    def __init__(self, name: str):
        self.logger, self.records = logging.getLogger(name), []

    def __enter__(self):
        self.handler = logging.Handler(logging.INFO)
        self.handler.emit = self.records.append
        self.level = self.logger.level
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self.handler)
        return self.records

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)


def _restored(workdir: Path, spec: str) -> str:
    return restore_run(str(workdir), spec).checkpoint


def _saves(log: list[str]) -> list[tuple[int, str]]:
    return [(int(s), k) for line in log for s, k in re.findall(r"step (\d+) \((\w+)\)", line)]


def test_safety_saves_are_resumed_from_but_never_averaged(clocked_run):
    workdir, mid_steps, mid_restores, log = clocked_run
    saves = _saves(log)
    safety = [s for s, kind in saves if kind == "safety"]
    assert len(safety) >= 3 and all(s % 4 for s in safety), saves  # interleaved with the schedule
    # After 10 steps: the newest save is the safety save where this call stopped; averaging ignores it.
    assert mid_steps[-1] == 10 and 10 in safety and {4, 8} <= set(mid_steps)
    assert mid_restores["latest"] == "step 10"
    assert mid_restores["avg2"] == "avg2 (steps 4, 8)"
    # Finished: the last 5 scheduled saves survive (keep_checkpoints=5), every safety save was pruned.
    assert folder.checkpoint_steps(workdir) == [8, 12, 16, 20, 24]
    path, steps = write_average(str(workdir), 5)
    assert steps == [8, 12, 16, 20, 24] and Path(path).is_dir()


def test_averaging_more_than_the_schedule_holds_names_the_schedule(clocked_run):
    workdir = clocked_run[0]
    with pytest.raises(ValueError, match=r"Cannot average the last 6 checkpoints: the run has 5 on its step "
                                         r"schedule \(every 4 steps: 8, 12, 16, 20, 24\)"):
        restore_run(str(workdir), "avg6")


def test_a_resume_with_another_schedule_deletes_nothing_that_was_scheduled(tmp_path):
    """Extending a run (num_steps 14 → 20), respacing it (every 4 → every 6) or lowering keep_checkpoints on resume:
    a checkpoint saved on the schedule stays scheduled (kept, averaged), as checkpoint_schedule.json recorded it.
    Before the record, the extension deleted checkpoint 14 (no longer a final step) and the respacing 4 and 8."""
    extended = tmp_path / "extended"
    train(tiny.tiny_config(num_steps=14, checkpoint_every_steps=4, keep_checkpoints=3), str(extended), progress=False)
    assert folder.checkpoint_steps(extended) == [8, 12, 14]
    train(tiny.tiny_config(num_steps=20, checkpoint_every_steps=4, keep_checkpoints=3), str(extended), progress=False)
    assert folder.checkpoint_steps(extended) == [14, 16, 20]  # keep 3 of the scheduled 8, 12, 14, 16, 20
    assert _restored(extended, "avg3") == "avg3 (steps 14, 16, 20)"

    respaced = tmp_path / "respaced"
    train(tiny.tiny_config(num_steps=12, checkpoint_every_steps=4, keep_checkpoints=5), str(respaced), progress=False)
    with _capture("transformer_jax.run.checkpoints") as records:
        train(tiny.tiny_config(num_steps=18, checkpoint_every_steps=6, keep_checkpoints=2), str(respaced),
              progress=False)
    assert folder.checkpoint_steps(respaced) == [4, 8, 12, 18]  # keep stays at the 5 the run had
    assert any("keep_checkpoints=2 is lower than the 5" in r.getMessage() for r in records)
    assert _restored(respaced, "avg4") == "avg4 (steps 4, 8, 12, 18)"


def test_a_branch_takes_the_record_up_to_its_step(tmp_path):
    import json

    from transformer_jax.run.checkpoints import copy_schedule

    source, branch = tmp_path / "source", tmp_path / "branch"
    source.mkdir()
    branch.mkdir()
    (source / folder.SCHEDULE_FILE).write_text(json.dumps({"scheduled": [4, 8, 12, 14], "keep": 3}))
    copy_schedule(str(source), str(branch), 12)
    assert json.loads((branch / folder.SCHEDULE_FILE).read_text()) == {"scheduled": [4, 8, 12], "keep": 3}
    copy_schedule(str(tmp_path / "no_record"), str(tmp_path), 12)  # a run from before the record: nothing to copy
    assert not (tmp_path / folder.SCHEDULE_FILE).exists()
