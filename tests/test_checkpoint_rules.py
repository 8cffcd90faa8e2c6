"""Which checkpoints a run keeps and which ones a checkpoint name restores (§6.1 averaging; run/checkpoints.py,
decode/restore.py), with a fake clock so that time-based safety saves fall between the scheduled ones.

- keep_checkpoints=K keeps the last K checkpoints on the step schedule plus the newest one of any kind;
- an average that `transformer-jax average` wrote (averaged/avg2) is reused only while the run's last 2 scheduled
  steps are the ones it was made from: after more training, avg2 is the mean of the new last 2;
- a checkpoint name that names nothing (avg9 of a run with 2, an unknown step, a malformed name) is one clear line.
"""

import itertools
import json
import os
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

import tiny_setup as tiny
from cli_runs import REPO
from transformer_jax.decode.restore import restore_run
from transformer_jax.run import folder
from transformer_jax.train.trainer import train

KEEP = 2
EVERY = 4
NUM_STEPS = 24
FIRST_STOP = 10  # the first call stops here: a save off the schedule, and the newest checkpoint


def cli(*args: str) -> subprocess.Popen:
    """Starts ``transformer-jax ARGS`` in a fresh interpreter, as the console script runs it."""
    return subprocess.Popen([sys.executable, "-c", "from transformer_jax.launch.cli import run; run()", *args],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)


def finished(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def as_numpy(params) -> list[np.ndarray]:
    return [np.asarray(x, np.float64) for x in jax.tree.leaves(params)]


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> dict:
    """Trains to step FIRST_STOP, averages the last 2 with the CLI, trains to the end; what was seen on the way."""
    workdir = tmp_path_factory.mktemp("rules") / "run"
    config = tiny.tiny_config(num_steps=NUM_STEPS, checkpoint_every_steps=EVERY, checkpoint_every_minutes=10.0,
                              keep_checkpoints=KEEP, log_every_steps=1)
    config.data.synthetic.dev_size = config.data.synthetic.test_size = 8
    ticks = itertools.count(0, 240)  # 4 fake minutes per clock reading: a 10-minute safety save every few steps
    seen: dict = {"workdir": str(workdir)}
    train(config, str(workdir), progress=False, stop_after=FIRST_STOP, clock=lambda: float(next(ticks)))
    seen["mid_steps"] = folder.checkpoint_steps(workdir)
    seen["average"] = finished(cli("average", f"--workdir={workdir}", "--last=2"))
    stale = restore_run(str(workdir), "avg2")
    seen["stale"] = (stale.checkpoint, stale.steps, as_numpy(stale.params))
    train(config, str(workdir), progress=False, clock=lambda: float(next(ticks)))
    seen["final_steps"] = folder.checkpoint_steps(workdir)
    return seen


def test_keep_k_keeps_the_last_k_scheduled_and_the_newest(history):
    # Safety saves fell at steps off the schedule (3, 7, ...); the call stopped at 10, off the schedule too.
    assert history["mid_steps"] == [4, 8, FIRST_STOP]  # the last 2 scheduled + the newest
    assert history["final_steps"] == [20, 24]  # the newest is scheduled: exactly the last 2; no safety save is left


def test_average_wrote_the_last_two_scheduled_steps(history):
    proc = history["average"]
    assert proc.returncode == 0, proc.stderr
    path = proc.stdout.strip().splitlines()[-1]
    assert path == folder.averaged_path(history["workdir"], "avg2")
    checkpoint, steps, _ = history["stale"]
    assert steps == (4, 8)  # the safety save at step 10 is resumed from, never averaged
    assert path in checkpoint  # while fresh, avg2 is the saved average


def test_a_stale_average_is_recomputed_from_the_new_last_steps(history):
    workdir = history["workdir"]
    with open(os.path.join(folder.averaged_path(workdir, "avg2"), "steps.json")) as f:
        assert json.load(f) == [4, 8]  # still on disk, from before the second call
    fresh = restore_run(workdir, "avg2")
    assert fresh.steps == (20, 24) and fresh.checkpoint == "avg2 (steps 20, 24)"
    last_two = [as_numpy(restore_run(workdir, str(s)).params) for s in (20, 24)]
    for got, a, b in zip(as_numpy(fresh.params), *last_two):
        np.testing.assert_allclose(got, (a + b) / 2, rtol=1e-6, atol=1e-7)
    stale = history["stale"][2]
    assert not all(np.allclose(s, f) for s, f in zip(stale, as_numpy(fresh.params)))  # the old average differs


@pytest.mark.parametrize("spec, error, match", [
    ("avg9", ValueError, (r"^Cannot average the last 9 checkpoints: the run has 2 on its step schedule "
                          r"\(every 4 steps: 20, 24\)\.$")),
    ("avg0", ValueError, r"^Cannot average the last 0 checkpoints"),
    ("123", ValueError, r"^No checkpoint at step 123; available: 20, 24\.$"),
    ("8", ValueError, r"^No checkpoint at step 8; available: 20, 24\.$"),  # pruned
    ("avgx", ValueError, r"^Bad checkpoint 'avgx': use latest, a step number, or avgN \(e\.g\. avg5\)\.$"),
    ("best", ValueError, r"^Bad checkpoint 'best': use latest"),
])
def test_a_checkpoint_name_that_names_nothing_is_a_clear_error(history, spec, error, match):
    with pytest.raises(error, match=match):
        restore_run(history["workdir"], spec)


def test_a_run_without_checkpoints_is_a_clear_error(history, tmp_path):
    for name in (folder.CONFIG_FILE, "vocab.model"):
        shutil.copy(os.path.join(history["workdir"], name), tmp_path / name)
    with pytest.raises(FileNotFoundError, match=r"^The run has no checkpoints yet\.$"):
        restore_run(str(tmp_path), "latest")
    os.remove(tmp_path / "vocab.model")
    with pytest.raises(FileNotFoundError, match=r"^No vocab\.model in .*: the run's vocabulary is needed to decode\.$"):
        restore_run(str(tmp_path), "latest")


@pytest.fixture(scope="module")
def cli_errors(history) -> dict[str, subprocess.CompletedProcess]:
    workdir = history["workdir"]
    commands = {
        "avg9": ["decode", f"--workdir={workdir}", "--checkpoint=avg9", "--input=/dev/null"],
        "123": ["evaluate", f"--workdir={workdir}", "--split=dev", "--checkpoint=123"],
        "avgx": ["decode", f"--workdir={workdir}", "--checkpoint=avgx", "--input=/dev/null"],
        "best": ["evaluate", f"--workdir={workdir}", "--split=dev", "--checkpoint=best"],
        "last9": ["average", f"--workdir={workdir}", "--last=9"],
    }
    procs = {name: cli(*args) for name, args in commands.items()}
    return {name: finished(proc) for name, proc in procs.items()}


@pytest.mark.parametrize("name, status, line", [  # 2: the command line is wrong; 1: the run lacks the checkpoint
    ("avg9", 1, "transformer-jax decode: Cannot average the last 9 checkpoints: the run has 2 on its step schedule"),
    ("123", 1, "transformer-jax evaluate: No checkpoint at step 123; available: 20, 24."),
    ("avgx", 2, "transformer-jax decode: --checkpoint=avgx: use latest, a step number, or avgN (e.g. avg5)."),
    ("best", 2, "transformer-jax evaluate: --checkpoint=best: use latest, a step number, or avgN (e.g. avg5)."),
    ("last9", 1, "transformer-jax average: Cannot average the last 9 checkpoints: the run has 2 on its step schedule"),
])
def test_the_cli_says_it_in_one_line(cli_errors, name, status, line):
    proc = cli_errors[name]
    assert proc.returncode == status, (proc.returncode, proc.stderr)
    lines = [text for text in proc.stderr.splitlines() if text.strip()]
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert lines[0].startswith(line), lines[0]
