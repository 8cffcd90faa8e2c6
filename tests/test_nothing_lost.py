"""No lost work (issue 13): a bad disk never costs more than the checkpoint it broke, and says so in one line.

- A checkpoint with a truncated file is moved aside (``checkpoints/<step>.corrupt-<time>``) with one warning, and
  training, decoding and averaging continue from the newest checkpoint that restores; a checkpoint that does not fit
  the model (a shape mismatch) is not corrupt: its error is raised and nothing is moved.
- A full disk during a save is one DiskFullError line; no unfinished ``*.orbax-checkpoint-tmp*`` folder is left,
  and the same command resumes once space is back (injected ENOSPC; and a real 1.5 MB tmpfs where mounting works).
- metrics.jsonl holds each step once after an interrupted attempt is resumed, and `compare` counts its train time
  once.

All in-process on the tiny config: one 4-step run (checkpoints 2 and 4) is copied by each test.
"""

import errno
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import tiny_setup as tiny
from transformer_jax import sharding
from transformer_jax.decode.restore import restore_run
from transformer_jax.evaluate.report import train_seconds
from transformer_jax.run import folder
from transformer_jax.run.checkpoints import Checkpointer
from transformer_jax.run.metrics import read_metrics
from transformer_jax.train.step import make_setup
from transformer_jax.train.trainer import train

NUM_STEPS = 8


def config():
    return tiny.tiny_config(num_steps=NUM_STEPS, checkpoint_every_steps=2)


def unfinished(workdir: Path) -> list[str]:
    return [p.name for p in (workdir / "checkpoints").iterdir() if ".orbax-checkpoint-tmp" in p.name]


def set_aside(workdir: Path) -> list[str]:
    return sorted(p.name for p in (workdir / "checkpoints").iterdir() if ".corrupt-" in p.name)


@pytest.fixture(scope="module")
def four_steps(tmp_path_factory) -> Path:
    """A run stopped after 4 of 8 steps, with checkpoints at steps 2 and 4 (each test copies it)."""
    workdir = tmp_path_factory.mktemp("good") / "run"
    train(config(), str(workdir), progress=False, stop_after=4)
    assert folder.checkpoint_steps(workdir) == [2, 4]
    return workdir


def copy_of(good: Path, tmp_path: Path, name: str = "run") -> Path:
    workdir = tmp_path / name
    shutil.copytree(good, workdir, symlinks=True)
    return workdir


def truncate_largest_file(checkpoint: Path) -> None:
    """Cuts the largest file of a checkpoint to 100 bytes (a copy or a disk that failed half-way)."""
    largest = max((p for p in checkpoint.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    assert largest.stat().st_size > 1000
    os.truncate(largest, 100)


def truncate_array_files(checkpoint: Path) -> None:
    """Cuts every array data file of a checkpoint in half: whatever orbax put where, the parameters are hit too
    (decoding reads only those; the largest file alone may hold only optimizer moments)."""
    files = [p for p in (checkpoint / "state").rglob("*") if p.is_file() and p.parent.name == "d"]
    assert files
    for path in files:
        os.truncate(path, path.stat().st_size // 2)


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith(
        "transformer_jax") and "Checkpoint" in r.getMessage()]


def test_truncated_latest_checkpoint_training_resumes_from_the_previous_one(four_steps, tmp_path, caplog):
    workdir = copy_of(four_steps, tmp_path)
    truncate_largest_file(workdir / "checkpoints" / "4")
    with caplog.at_level(logging.INFO, logger="transformer_jax"):
        last = train(config(), str(workdir), progress=False)
    assert last["step"] == NUM_STEPS
    moved = set_aside(workdir)
    assert len(moved) == 1 and moved[0].startswith("4.corrupt-"), moved
    warning = warnings_of(caplog)
    assert len(warning) == 1 and "\n" not in warning[0], warning  # one line ...
    assert "Checkpoint step 4" in warning[0] and str(workdir / "checkpoints" / moved[0]) in warning[0]  # ... naming it
    assert "Resumed from step 2" in caplog.text
    assert folder.checkpoint_steps(workdir) == [2, 4, 6, 8]  # step 4 trained and saved again


def test_truncated_checkpoint_decoding_and_averaging_fall_back(four_steps, tmp_path, caplog):
    workdir = copy_of(four_steps, tmp_path)
    truncate_array_files(workdir / "checkpoints" / "4")
    with caplog.at_level(logging.WARNING, logger="transformer_jax"):
        run = restore_run(str(workdir))  # latest
    assert run.checkpoint == "step 2"
    moved = set_aside(workdir)
    assert len(moved) == 1 and moved[0].startswith("4.corrupt-"), moved
    warning = warnings_of(caplog)
    assert len(warning) == 1 and "\n" not in warning[0] and moved[0] in warning[0], warning

    # Asking for the corrupt step by number (or averaging over it) fails with one line, not a tensorstore traceback.
    explicit = copy_of(four_steps, tmp_path, "explicit")
    truncate_array_files(explicit / "checkpoints" / "4")
    with pytest.raises(OSError) as error:
        restore_run(str(explicit), "4")
    assert "\n" not in str(error.value) and "Checkpoint step 4" in str(error.value), str(error.value)[:3000]
    assert "moved it aside to" in str(error.value) and len(set_aside(explicit)) == 1
    averaged = copy_of(four_steps, tmp_path, "averaged")
    truncate_array_files(averaged / "checkpoints" / "4")
    with pytest.raises(ValueError, match=r"^Cannot average the last 2 checkpoints: the run has 1 on its step schedule"):
        restore_run(str(averaged), "avg2")  # the remaining one is not enough: one line, 4 set aside
    assert restore_run(str(averaged), "avg1").checkpoint == "step 2"


def test_a_checkpoint_that_does_not_fit_the_model_is_not_corrupt(four_steps):
    """A restore that fails on the target (here: another d_ff) is raised as it is, and nothing is moved aside."""
    other = config()
    other.model.d_ff = 2 * other.model.d_ff
    setup = make_setup(other, sharding.make_mesh(other.train.mesh))
    checkpointer = Checkpointer(str(four_steps), keep=100)
    try:
        with pytest.raises(ValueError, match="not compatible with the stored shape"):
            checkpointer.restore(4, setup.abstract_state)
    finally:
        checkpointer.close()
    assert folder.checkpoint_steps(four_steps) == [2, 4] and set_aside(four_steps) == []


def _fail_data_save_of_step(monkeypatch, step: int) -> None:
    """The data item of checkpoint ``step`` hits a full disk half-way through its (asynchronous) write."""
    from orbax.checkpoint._src.handlers import json_checkpoint_handler

    handler = json_checkpoint_handler.JsonCheckpointHandler
    original = handler._save_fn

    async def save_fn(self, x, directory):
        if f"{os.sep}{step}.orbax-checkpoint-tmp" in str(directory):
            (directory / "metadata").write_text('{"half')
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory / "metadata"))
        return await original(self, x, directory)

    monkeypatch.setattr(handler, "_save_fn", save_fn)


def assert_one_disk_full_line(error: BaseException, workdir: Path) -> None:
    message = str(error)
    assert type(error).__name__ == "DiskFullError", f"{type(error).__name__}: {message[:3000]}"
    assert "\n" not in message and str(workdir / "checkpoints") in message and "Free space" in message, message


def test_disk_full_during_a_save_is_one_error_leaves_no_tmp_and_the_rerun_resumes(four_steps, tmp_path, monkeypatch,
                                                                                   caplog):
    workdir = copy_of(four_steps, tmp_path)
    _fail_data_save_of_step(monkeypatch, 6)
    with pytest.raises(OSError) as error:
        train(config(), str(workdir), progress=False)
    assert_one_disk_full_line(error.value, workdir)
    assert "last complete checkpoint is step 4" in str(error.value)
    assert unfinished(workdir) == [] and folder.checkpoint_steps(workdir) == [2, 4]

    monkeypatch.undo()  # space is back
    (workdir / "checkpoints" / "3.orbax-checkpoint-tmp-1700000000").mkdir()  # and a run killed mid-save left this
    with caplog.at_level(logging.INFO, logger="transformer_jax"):
        assert train(config(), str(workdir), progress=False)["step"] == NUM_STEPS
    assert "Resumed from step 4" in caplog.text
    assert folder.checkpoint_steps(workdir) == [2, 4, 6, 8] and unfinished(workdir) == []


@pytest.fixture
def small_disk(tmp_path):
    """A 1.5 MB tmpfs (room for two tiny checkpoints, not three); skipped where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1536k", "tmpfs", str(mount)], check=True,
                       capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"cannot mount a tmpfs here: {e}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True, timeout=30)


def test_a_real_full_disk_is_one_error_and_the_rerun_resumes(four_steps, tmp_path, small_disk, caplog):
    """The same with tensorstore's own ENOSPC: the checkpoints folder is a tmpfs that fills up at step 6."""
    workdir = tmp_path / "run"
    shutil.copytree(four_steps, workdir, ignore=shutil.ignore_patterns("checkpoints"))
    for checkpoint in (four_steps / "checkpoints").iterdir():
        shutil.copytree(checkpoint, small_disk / checkpoint.name)
    (workdir / "checkpoints").symlink_to(small_disk, target_is_directory=True)
    with pytest.raises(OSError) as error:
        train(config(), str(workdir), progress=False)
    assert_one_disk_full_line(error.value, workdir)
    assert unfinished(workdir) == [] and folder.checkpoint_steps(workdir) == [2, 4]

    subprocess.run(["mount", "-o", "remount,size=8m", str(small_disk)], check=True, capture_output=True, timeout=30)
    with caplog.at_level(logging.INFO, logger="transformer_jax"):
        assert train(config(), str(workdir), progress=False)["step"] == NUM_STEPS
    assert "Resumed from step 4" in caplog.text and folder.checkpoint_steps(workdir) == [2, 4, 6, 8]


def test_resumed_run_logs_each_step_once_and_compare_counts_its_time_once(four_steps, tmp_path):
    workdir = copy_of(four_steps, tmp_path)
    first_segment = read_metrics(str(workdir))
    # An attempt that trained steps 5 and 6 and was killed before checkpoint 6 was complete, mid-way through a line.
    train(config(), str(workdir), progress=False, stop_after=2)
    shutil.rmtree(workdir / "checkpoints" / "6")
    with open(workdir / "metrics.jsonl", "a") as f:
        f.write('{"step": 7, "train_lo')
    assert [r["step"] for r in read_metrics(str(workdir)) if "train_loss" in r] == [1, 2, 3, 4, 5, 6]

    train(config(), str(workdir), progress=False)  # resumes from 4
    records = read_metrics(str(workdir))
    assert len(records) == len((workdir / "metrics.jsonl").read_text().splitlines())  # every line whole
    logged = [r["step"] for r in records if "train_loss" in r]
    assert logged == list(range(1, NUM_STEPS + 1)), logged  # each step once, in order
    compiled = [r["step"] for r in records if "compile_time_s" in r]
    assert compiled == sorted(set(compiled)), compiled
    # compare's train time: the segment up to checkpoint 4 plus the resumed one; the lost attempt is not counted.
    before = [r["elapsed_s"] for r in first_segment if "elapsed_s" in r][-1]
    after = [r["elapsed_s"] for r in records if "elapsed_s" in r][-1]
    assert train_seconds(records) == pytest.approx(before + after)


def test_train_time_segments_open_at_start_records():
    """A resumed segment whose first elapsed_s exceeds the last one kept before it is still a new segment."""
    records = [{"step": 0, "event": "start"}, {"step": 2, "elapsed_s": 5.0}, {"step": 2, "event": "start"},
               {"step": 3, "elapsed_s": 6.0}, {"step": 4, "elapsed_s": 7.0}]
    assert train_seconds(records) == pytest.approx(12.0)
    assert train_seconds([{"elapsed_s": 1.0}, {"elapsed_s": 2.0}, {"elapsed_s": 0.5}]) == 2.5  # files without them
