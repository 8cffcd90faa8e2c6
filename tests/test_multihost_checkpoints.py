"""Multi-host checkpointing, simulated with 2 processes on localhost (gloo; tests/scripts/multihost_train.py):
every process must save at the same steps (orbax's save is a collective), whatever each host's clock says, and a
SIGTERM delivered to one host stops both at one step from which the run resumes bit-identically.

Each test owns its subprocesses, so pytest-xdist never starts the same 2-process run twice. Nothing races a clock:
the SIGTERM run holds at a step until the notice has reached both hosts (multihost_train.py --hold_at), and the
coordinator's port is reserved for the test (conftest.py's coordinator_port says why no other process can take it).
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

import tiny_setup as tiny
from transformer_jax.run import folder

WORKER = str(Path(__file__).parent / "scripts" / "multihost_train.py")
# A healthy 2-process run takes ~20 s; hosts that disagree on a save hang in orbax's barrier. Longer than the
# scripts' own initialisation timeout (tiny_setup.INITIALIZATION_TIMEOUT_S), so a slow start fails there, by name.
TIMEOUT_S = 600
SCHEDULE = [4, 8, 12]  # multihost_config(12): every 4 steps and the last
HOLD_AT = 5  # the SIGTERM run holds here, between the saves of steps 4 and 8


def start(workdir: Path, tmp: Path, port: int, *args: str, only: dict[int, list[str]] | None = None) -> list:
    """Starts both processes of one run with ``args``, plus ``only[i]`` for process ``i``; returns (process, log).
    The runs of one test start one after the other, so they share the test's coordinator port."""
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(tmp / "jax_cache"),
           "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
    procs = []
    for i in range(2):
        log = tmp / f"{workdir.name}.p{i}.{time.monotonic_ns()}.log"
        command = [sys.executable, WORKER, str(i), "2", str(port), str(workdir), *args, *(only or {}).get(i, [])]
        with open(log, "w") as f:  # a file, not a pipe: nobody reads while the run goes on
            procs.append((subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, env=env), log))
    return procs


def finish(procs) -> list[tuple[int, str]]:
    """Waits for both processes; returns (exit status, output) of each; kills both if either hangs."""
    try:
        for proc, _ in procs:
            proc.wait(timeout=TIMEOUT_S)
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return [(proc.returncode, log.read_text()) for proc, log in procs]


def saved(output: str) -> list[tuple[int, str]]:
    """The (step, kind) of every save a process logged."""
    return [(int(s), k) for s, k in re.findall(r"Saving the checkpoint of step (\d+) \((\w+)\)", output)]


def final_state(workdir: Path, step: int) -> dict:
    state, data = tiny.restore_checkpoint(workdir, tiny.multihost_config(), step)
    return {"state": state, "data": data}


@pytest.mark.slow  # two processes train, one is stopped and both resume (~2 min on 2 cores): the slow step
def test_a_skewed_clock_and_a_sigterm_on_one_host(tmp_path, coordinator_port):
    # Host 1's clock jumps 10 minutes (one safety-save interval) after its 3rd reading. Had each host asked its own
    # clock, host 1 alone would enter orbax's collective save and the run would hang; only host 0's clock counts.
    reference = tmp_path / "skewed"
    results = finish(start(reference, tmp_path, coordinator_port, only={1: ["--jump_clock_after=3"]}))
    for rc, output in results:
        assert rc == 0, output[-4000:]
        assert saved(output) == [(s, "scheduled") for s in SCHEDULE], output[-4000:]  # as an unskewed run
    assert folder.checkpoint_steps(reference) == SCHEDULE

    # SIGTERM to host 1 only, mid-run: JAX's preemption sync point stops both hosts at one step, both save it and
    # exit with 143 (launch/cluster.py); the same command then resumes and ends bit-identical to the reference.
    # Both hosts hold after step 5 until the notice has reached both, so the sync point is step 6, on any machine.
    preempted, held = tmp_path / "preempted", tmp_path / "held"
    procs = start(preempted, tmp_path, coordinator_port, f"--hold_at={HOLD_AT}", f"--held_file={held}")
    deadline = time.monotonic() + TIMEOUT_S
    while not all(Path(f"{held}.p{i}").exists() for i in range(2)):
        assert all(p.poll() is None for p, _ in procs), "a host ended before the signal"
        assert time.monotonic() < deadline, "the hosts did not reach the hold"
        time.sleep(0.05)
    procs[1][0].send_signal(signal.SIGTERM)
    results = finish(procs)
    assert [rc for rc, _ in results] == [143, 143], results[0][1][-3000:] + results[1][1][-3000:]
    stops = [int(re.search(r"stopped by SIGTERM after step (\d+)", out).group(1)) for _, out in results]
    assert stops == [HOLD_AT + 1, HOLD_AT + 1], stops  # off the every-4-steps schedule
    assert folder.checkpoint_steps(preempted) == [4, HOLD_AT + 1]
    assert saved(results[0][1]) == saved(results[1][1]) == [(4, "scheduled"), (HOLD_AT + 1, "safety")]
    for rc, output in finish(start(preempted, tmp_path, coordinator_port)):
        assert rc == 0 and f"Resumed from step {HOLD_AT + 1}" in output, output[-4000:]
    ref, res = final_state(reference, 12), final_state(preempted, 12)
    assert res["data"] == ref["data"]
    leaves = jax.tree_util.tree_flatten_with_path(ref["state"])[0]
    assert len(leaves) > 50
    for (path, a), b in zip(leaves, jax.tree.leaves(res["state"])):
        assert np.array_equal(a, b), f"{jax.tree_util.keystr(path)} differs after the SIGTERM and resume"


@pytest.mark.slow  # two processes train to a safety save (~45 s on 2 cores): the slow step
def test_host_zeros_clock_decides_a_safety_save_for_every_host(tmp_path, coordinator_port):
    """The other way round: host 0's clock jumps, and both hosts take the same safety save (then pruned, being
    neither on the schedule nor the newest)."""
    workdir = tmp_path / "run"
    results = finish(start(workdir, tmp_path, coordinator_port, "--num_steps=6", only={0: ["--jump_clock_after=3"]}))
    for rc, output in results:
        assert rc == 0, output[-4000:]
    assert saved(results[0][1]) == saved(results[1][1]) == [(3, "safety"), (4, "scheduled"), (6, "scheduled")]
    assert folder.checkpoint_steps(workdir) == [4, 6]
