"""Exact restarts (DESIGN.md "Contracts"): a run killed with SIGKILL and restarted ends bit-identical to one that
was never interrupted; a SIGTERM saves the step reached and stops; the data position travels with each
checkpoint; a non-finite loss stops the run by name and leaves the last good checkpoint intact.

The killed run and its references are ``trainer.train`` on the tiny synthetic config in subprocesses
(tests/scripts/train_tiny.py), so they can be killed; the checks restore their checkpoints here on one device.
Nothing races a clock: a run to be signalled holds at a given step (train_tiny.py --hold_at) until the test has
signalled it, so the SIGKILL lands between two checkpoints and the SIGTERM's stop step is known, on any machine.
The non-finite-loss runs are in-process: they continue a healthy 3-step run with an exploding learning rate.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

import tiny_setup as tiny
from transformer_jax.data import pipeline
from transformer_jax.run import folder
from transformer_jax.run.metrics import read_metrics
from transformer_jax.train.trainer import NonFiniteLossError, train

SCRIPT = str(Path(__file__).parent / "scripts" / "train_tiny.py")
TIMEOUT_S = 600  # generous: the machine running the tests may be shared; a healthy run takes seconds
KILL_AFTER_CHECKPOINT = 8  # SIGKILL once this checkpoint is complete, well before the end (24)
KILL_AT = 10  # ... with the run held after step 10: between the saves of steps 8 and 12
TERM_AT = 5  # the SIGTERM comes while the run is held after step 5, between the saves of steps 4 and 8


def train_cmd(workdir: Path, *args: str) -> list[str]:
    return [sys.executable, SCRIPT, str(workdir), *args]


def cached_compiles_env(cache_dir: Path) -> dict[str, str]:
    """JAX's persistent compilation cache, shared by the runs of one test: the same programs compile only once."""
    return {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(cache_dir), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}


def run_to_end(cmd: list[str], env: dict[str, str]) -> str:
    """Runs a training subprocess to completion; returns its log (stderr)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-5000:]
    return proc.stderr


def signal_held_run(workdir: Path, env: dict[str, str], hold_at: int, sig: int, ready=lambda: True
                    ) -> tuple[int, str]:
    """Starts a run in ``workdir`` that holds after step ``hold_at``; once it holds and ``ready()``, sends it ``sig``.
    Returns (return code, stderr).

    stderr goes to a file beside ``workdir`` (a pipe nobody reads while waiting could fill and stall the run)."""
    log_path, held = workdir.parent / f"{workdir.name}.stderr", workdir.parent / f"{workdir.name}.held"
    with open(log_path, "w") as log_file:
        victim = subprocess.Popen(train_cmd(workdir, f"--hold_at={hold_at}", f"--held_file={held}"),
                                  stdout=subprocess.DEVNULL, stderr=log_file, env=env)
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while not (held.exists() and ready()):
                assert victim.poll() is None, f"the run ended before the signal:\n{log_path.read_text()[-3000:]}"
                assert time.monotonic() < deadline, "the run did not get there"
                time.sleep(0.02)
            victim.send_signal(sig)
            victim.wait(timeout=TIMEOUT_S)
        finally:
            if victim.poll() is None:
                victim.kill()
                victim.wait()
    return victim.returncode, log_path.read_text()


def restore(workdir: Path, step: int) -> tuple[dict, dict]:
    return tiny.restore_checkpoint(workdir, tiny.resume_config(), step)


def metrics_by_step(workdir: Path) -> dict[int, dict]:
    """The last train-metrics record of each step (a restarted run logs the steps after its checkpoint again)."""
    return {r["step"]: r for r in read_metrics(str(workdir)) if "train_loss" in r}


def test_killed_run_resumes_bit_identical(tmp_path):
    reference_dir, killed_dir = tmp_path / "uninterrupted", tmp_path / "killed"
    env = cached_compiles_env(tmp_path / "jax_cache")
    num_steps = tiny.resume_config().train.num_steps
    run_to_end(train_cmd(reference_dir), env)

    # Held after step 10, the run's save of step 8 completes in the background: then the kill.
    returncode, _ = signal_held_run(killed_dir, env, KILL_AT, signal.SIGKILL,
                                    lambda: KILL_AFTER_CHECKPOINT in folder.checkpoint_steps(killed_dir))
    assert returncode == -signal.SIGKILL
    assert folder.checkpoint_steps(killed_dir) == [4, KILL_AFTER_CHECKPOINT]  # killed mid-way, not at the end
    resume_step = KILL_AFTER_CHECKPOINT
    assert max(metrics_by_step(killed_dir)) == KILL_AT  # steps after the checkpoint were logged, to be dropped

    resumed_log = run_to_end(train_cmd(killed_dir), env)  # the same command again
    assert f"Resumed from step {resume_step}" in resumed_log

    # Final checkpoints: parameters, Adam moments, step, RNG and data position are all bit-identical.
    assert folder.checkpoint_steps(killed_dir)[-1] == folder.checkpoint_steps(reference_dir)[-1] == num_steps
    state_ref, data_ref = restore(reference_dir, num_steps)
    state_res, data_res = restore(killed_dir, num_steps)
    assert data_res == data_ref
    leaves_ref = jax.tree_util.tree_flatten_with_path(state_ref)[0]
    leaves_res = jax.tree.leaves(state_res)
    assert len(leaves_ref) == len(leaves_res) > 100
    for (path, a), b in zip(leaves_ref, leaves_res):
        assert np.array_equal(a, b), f"{jax.tree_util.keystr(path)} differs after the restart"
    # And the run did learn something in between (the comparison is not of two untouched initialisations).
    state_0, _ = restore(reference_dir, 4)
    assert not np.array_equal(state_0["params"]["embedding"]["table"], state_ref["params"]["embedding"]["table"])

    # metrics.jsonl holds every step once: the killed attempt's steps after its checkpoint were dropped on resume.
    logged = [r["step"] for r in read_metrics(str(killed_dir)) if "train_loss" in r]
    assert logged == list(range(1, num_steps + 1))
    # The metrics of every step after the restart equal the uninterrupted run's, to the last bit.
    m_ref, m_res = metrics_by_step(reference_dir), metrics_by_step(killed_dir)
    assert sorted(m_ref) == sorted(m_res) == list(range(1, num_steps + 1))
    for step in range(resume_step + 1, num_steps + 1):
        for key in ("train_loss", "train_nll", "grad_norm", "learning_rate", "target_tokens"):
            assert m_res[step][key] == m_ref[step][key], (step, key)
    dev_ref = [r for r in read_metrics(str(reference_dir)) if r["step"] == num_steps and "dev_loss" in r]
    dev_res = [r for r in read_metrics(str(killed_dir)) if r["step"] == num_steps and "dev_loss" in r]
    assert dev_res[-1]["dev_loss"] == dev_ref[-1]["dev_loss"]

    # The iterator position saved with a checkpoint is the one the training iterator had after that many steps.
    check_data_state_in_checkpoint(reference_dir, step=KILL_AFTER_CHECKPOINT)


def test_sigterm_saves_the_step_reached_stops_and_resumes(tmp_path):
    """A SIGTERM (preemption, a Slurm time limit) saves a checkpoint at the very step the run reached — between the
    every-4-steps saves — and stops with Preempted; the same command then resumes from that step."""
    workdir, env = tmp_path / "preempted", cached_compiles_env(tmp_path / "jax_cache")
    num_steps = tiny.resume_config().train.num_steps
    # The signal comes while the run holds after step 5; the run continues once its handler has run, so the step it
    # stops at is the next one, off the every-4-steps schedule.
    returncode, log = signal_held_run(workdir, env, TERM_AT, signal.SIGTERM)
    assert returncode == 1, log[-3000:]  # the script lets Preempted propagate (the CLI exits with 143)
    match = re.search(r"Preempted: stopped by SIGTERM after step (\d+); its checkpoint is saved", log)
    assert match, log[-3000:]
    stopped = int(match.group(1))
    assert stopped == TERM_AT + 1 < num_steps
    assert folder.checkpoint_steps(workdir) == [4, stopped]  # complete (renamed by orbax), whatever the schedule said
    assert max(metrics_by_step(workdir)) == stopped  # the step reached was logged; nothing after it ran
    assert f"Resumed from step {stopped}" in run_to_end(train_cmd(workdir), env)
    assert folder.checkpoint_steps(workdir)[-1] == num_steps


def check_data_state_in_checkpoint(workdir: Path, step: int) -> None:
    config = tiny.resume_config()
    tokenizer = pipeline.build_tokenizer(config, str(workdir))  # the run's own vocab.model
    _, saved = restore(workdir, step)
    fresh = pipeline.train_iterator(config, tokenizer, row_multiple=1, cache_dir=str(workdir))
    start = json.loads(json.dumps(fresh.get_state()))
    for _ in range(step):
        next(fresh)
    assert saved == json.loads(json.dumps(fresh.get_state())) != start  # the position moved, to where it should
    # Restoring it continues with the very batch an uninterrupted iterator yields next.
    restarted = pipeline.train_iterator(config, tokenizer, row_multiple=1, cache_dir=str(workdir))
    restarted.set_state(saved)
    expected, got = next(fresh), next(restarted)
    assert expected.keys() == got.keys()
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


@pytest.fixture(scope="module")
def three_good_steps(tmp_path_factory) -> Path:
    """A run folder after 3 healthy steps with a checkpoint at step 3 (copied by each test below)."""
    workdir = tmp_path_factory.mktemp("good") / "run"
    train(tiny.tiny_config(num_steps=3, checkpoint_every_steps=3), str(workdir), progress=False)
    assert folder.checkpoint_steps(workdir) == [3]
    return workdir


def continue_with(good: Path, tmp_path: Path, **train_overrides) -> tuple[Path, NonFiniteLossError]:
    """Copies the good run and continues it with ``train_overrides``; returns the folder and the error raised."""
    workdir = tmp_path / "run"
    shutil.copytree(good, workdir)
    config = tiny.tiny_config(**train_overrides)
    with pytest.raises(NonFiniteLossError) as error:
        train(config, str(workdir), progress=False)
    return workdir, error.value


def bad_step(error: NonFiniteLossError) -> int:
    """The step an error message names ("... at step N ...")."""
    match = re.search(r"\bstep (\d+)\b", str(error))
    assert match, f"the error does not name the step: {error}"
    return int(match.group(1))


def all_finite(state: dict) -> bool:
    return all(np.isfinite(x).all() for x in jax.tree.leaves(state["params"]))


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(three_good_steps, tmp_path):
    good, good_data = restore(three_good_steps, 3)
    assert all_finite(good)
    # A learning rate that makes step 4's update explode: step 5's loss is no longer finite. Metrics are only fetched
    # every 100 steps or at a checkpoint (step 6), yet the error names the first bad step.
    workdir, error = continue_with(three_good_steps, tmp_path, num_steps=9, checkpoint_every_steps=3,
                                   learning_rate_scale=1e30, log_every_steps=100)
    assert bad_step(error) in (4, 5), str(error)  # 5, or 4 if the exploded (finite) parameters are flagged as well
    assert "learning_rate_scale" in str(error)  # it says what to do
    # Nothing at or after the bad step was saved, and the good checkpoint is unchanged.
    assert folder.checkpoint_steps(workdir) == [3]
    again, again_data = restore(workdir, 3)
    assert again_data == good_data
    for a, b in zip(jax.tree.leaves(good), jax.tree.leaves(again)):
        assert np.array_equal(a, b)


def test_checkpoint_in_flight_is_completed_before_the_error(three_good_steps, tmp_path):
    # Step 4 (finite loss) is saved asynchronously; step 5's loss is NaN. When train() raises, the save of step 4
    # must be complete: the process (the CLI) exits right after the error, which would abandon it half-written and
    # leave only an older checkpoint behind, while the message promises the last good one is intact.
    workdir, error = continue_with(three_good_steps, tmp_path, num_steps=9, checkpoint_every_steps=1,
                                   learning_rate_scale=1e30)
    in_flight = [p.name for p in (workdir / "checkpoints").iterdir() if not p.name.isdigit()]
    assert in_flight == [], f"train() raised with checkpoint saves still in flight: {in_flight}"
    assert folder.checkpoint_steps(workdir) == [3, *range(4, bad_step(error))]  # every step before the bad one


def test_non_finite_update_is_never_checkpointed(three_good_steps, tmp_path):
    # An infinite learning rate stands for any update that is not finite while the loss that produced it was (e.g.
    # NaN gradients at a finite loss): step 4's loss is finite but its new parameters are not. No checkpoint may hold
    # them, or "run the same command again" resumes from NaN parameters.
    workdir, error = continue_with(three_good_steps, tmp_path, num_steps=9, checkpoint_every_steps=1,
                                   learning_rate_scale=float("inf"))
    assert bad_step(error) in (4, 5), str(error)
    # train() completes its saves before it raises (the test above), so every checkpoint there is is final.
    assert [p.name for p in (workdir / "checkpoints").iterdir() if not p.name.isdigit()] == []
    bad = [step for step in folder.checkpoint_steps(workdir) if not all_finite(restore(workdir, step)[0])]
    assert bad == [], f"checkpoints {bad} hold non-finite parameters"


SLOW_STEP_S = 0.05  # the simulated computation of one step; dispatching one takes ~1 ms


def test_sigterm_takes_effect_within_a_few_steps_of_the_computation(tmp_path, monkeypatch):
    """JAX dispatches steps asynchronously: a loop that synced only at log intervals ran up to a whole interval
    ahead of the computation, and a SIGTERM took effect only after every queued step had run (minutes at 3 s a step,
    past Slurm's 120 s notice). Here each step's computation takes 50 ms (a host callback the next step depends on)
    and the SIGTERM comes while step 5 computes; the log interval is longer than the run. The run must stop and
    save within three steps of that (trainer.STEPS_AHEAD = 2 queued behind the one computing), not at the end."""
    from jax.experimental import io_callback

    from transformer_jax.train import trainer
    from transformer_jax.train.preemption import Preempted

    term_at, computed = 5, []

    def compute(step):
        time.sleep(SLOW_STEP_S)
        computed.append(int(step))
        if int(step) == term_at:
            os.kill(os.getpid(), signal.SIGTERM)
        return step

    make_train_step = trainer.make_train_step

    def slow_train_step(setup):
        train_step = make_train_step(setup)
        slow = jax.jit(lambda step: io_callback(compute, jax.ShapeDtypeStruct(step.shape, step.dtype), step))

        def step_fn(state, batch):
            state, metrics = train_step(state, batch)
            return {**state, "step": slow(state["step"])}, metrics  # the next step waits for this one's callback

        return step_fn

    monkeypatch.setattr(trainer, "make_train_step", slow_train_step)
    config = tiny.tiny_config(num_steps=40, log_every_steps=1000)
    with pytest.raises(Preempted) as stopped:
        train(config, str(tmp_path / "run"), progress=False)
    assert term_at < stopped.value.step <= term_at + 3
    assert folder.checkpoint_steps(tmp_path / "run") == [stopped.value.step]
    assert max(computed) == stopped.value.step  # nothing ran past the step saved
