"""Checkpoints with orbax: saves on a step schedule (§6.1), time-based safety saves, keep K, averaging.

§6.1 averages the last 5 (base) / 20 (big) checkpoints "written at 10-minute intervals". At the paper's step times
(base 0.4 s, big 1.0 s on 8 P100) that is every 1,500 / 600 steps, and the configs save on that STEP schedule
(``checkpoint_every_steps``): on faster hardware a 10-minute clock would average weights from far-apart (or too
few) steps. The schedule is every multiple of ``every_steps`` plus the run's final step; :func:`schedule_steps`
picks those out of a run's checkpoints, and averaging takes its last N from them only. Saves every
``every_minutes`` of wall-clock time (and the one a SIGTERM triggers) are *safety* saves for preemption: they are
resumed from, but never averaged, and only the newest one is kept (when it is newer than the schedule's).

Multi-host: orbax's save is a collective, so every process must save at the same step. The schedule is pure step
arithmetic; the clock is read only at clock-check steps (every ``clock_check_every`` steps, where the trainer
already waits for the devices) and only process 0's reading counts: it is broadcast to all processes, so a skewed
or jumping clock on one host cannot make the hosts disagree.

A checkpoint holds the train state (parameters, optimizer state, step, RNG) and the data-iterator position,
so a run restarted from it continues exactly as if it had not stopped. Saves are asynchronous; orbax writes
into a temporary folder and renames it when complete, so a run killed mid-save leaves the previous checkpoint
intact. Restoring takes the shardings of the *current* mesh, so a run may resume on a different mesh shape.
"""

import dataclasses
import logging
import os
import time
import warnings
from collections.abc import Callable, Sequence

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

CHECKPOINT_DIR = "checkpoints"

logger = logging.getLogger(__name__)


def on_schedule(step: int, every_steps: int, num_steps: int) -> bool:
    """Whether ``step`` belongs to the step schedule (every ``every_steps``, and the final step)."""
    return step == num_steps or bool(every_steps) and step % every_steps == 0


def schedule_steps(steps: Sequence[int], every_steps: int, num_steps: int) -> list[int]:
    """The scheduled checkpoints among ``steps`` (sorted); all of them when the run has no step schedule."""
    if not every_steps:  # time-based saves only: those are the series (the paper's own setup)
        return sorted(steps)
    return sorted(s for s in steps if on_schedule(s, every_steps, num_steps))


def planned_schedule(every_steps: int, num_steps: int) -> list[int]:
    """Every step the schedule will save at (for ``describe``; empty without a step schedule)."""
    if not every_steps:
        return []
    return sorted(set(range(every_steps, num_steps + 1, every_steps)) | {num_steps})


@dataclasses.dataclass
class _KeepSchedule:
    """orbax preservation policy: the last ``keep`` scheduled checkpoints, plus the newest one of any kind."""

    keep: int
    every_steps: int
    num_steps: int

    def should_preserve(self, checkpoints, *, context) -> list[bool]:
        del context
        steps = [c.step for c in checkpoints]
        kept = set(schedule_steps(steps, self.every_steps, self.num_steps)[-self.keep:])
        newest = max(steps, default=None)
        return [s in kept or s == newest for s in steps]


def _process_zero_decides(flag: bool) -> bool:
    """``flag`` as process 0 sees it, on every process (a collective: all processes call it at the same step)."""
    if jax.process_count() == 1:
        return flag
    return bool(multihost_utils.broadcast_one_to_all(np.asarray(flag, np.int32)))


class Checkpointer:
    """Saves on the step schedule and every ``every_minutes`` (safety), keeping the last ``keep`` scheduled ones.

    Args:
      workdir: the run folder (checkpoints go to ``<workdir>/checkpoints``).
      keep: scheduled checkpoints kept (≥ the number averaged); the newest safety save is kept besides.
      every_steps: the step schedule (0 = none: every save is part of the series, as in the paper's 10 minutes).
      num_steps: the run's final step (always on the schedule).
      every_minutes: wall-clock interval of safety saves (0 = none).
      clock_check_every: the clock is consulted at steps divisible by this (all processes call :meth:`due` at
        every step, so all reach the same clock checks).
      clock: seconds, monotonic (injectable for tests).
    """

    def __init__(self, workdir: str, *, keep: int, every_steps: int = 0, num_steps: int = 0,
                 every_minutes: float = 0.0, clock_check_every: int = 1, async_save: bool = True,
                 clock: Callable[[], float] = time.monotonic):
        self.directory = os.path.abspath(os.path.join(workdir, CHECKPOINT_DIR))
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                enable_async_checkpointing=async_save, create=True,
                preservation_policy=_KeepSchedule(int(keep), int(every_steps), int(num_steps))))
        self.every_steps, self.num_steps, self.every_minutes = int(every_steps), int(num_steps), every_minutes
        self.clock_check_every = max(1, int(clock_check_every))
        self._clock = clock
        self._last_save_time = clock()

    @classmethod
    def for_run(cls, workdir: str, train_config, **kwargs) -> "Checkpointer":
        """The checkpointer of a run with ``config.train`` = ``train_config`` (schedule, keep, safety interval)."""
        t = train_config
        return cls(workdir, keep=int(t.keep_checkpoints), every_steps=int(t.checkpoint_every_steps),
                   num_steps=int(t.num_steps), every_minutes=float(t.checkpoint_every_minutes),
                   clock_check_every=int(t.log_every_steps), **kwargs)

    def due(self, step: int) -> bool:
        """Whether ``step`` (number of completed steps) should be saved now; the same answer on every process."""
        if on_schedule(step, self.every_steps, self.num_steps):
            return True
        if not self.every_minutes or step % self.clock_check_every:
            return False
        return _process_zero_decides(self._clock() - self._last_save_time >= 60 * self.every_minutes)

    def save(self, step: int, state, data_state: dict) -> None:
        """Saves (asynchronously) the train state and the iterator position after ``step`` steps."""
        if step in self.manager.all_steps():
            return
        kind = "scheduled" if on_schedule(step, self.every_steps, self.num_steps) else "safety"
        logger.info("Saving the checkpoint of step %d (%s) in %s", step, kind, self.directory)
        self.manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                        data=ocp.args.JsonSave(data_state)))
        self._last_save_time = self._clock()

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def all_steps(self) -> list[int]:
        return sorted(self.manager.all_steps())

    def scheduled_steps(self) -> list[int]:
        """The checkpoints on the step schedule (what averaging draws from)."""
        return schedule_steps(self.all_steps(), self.every_steps, self.num_steps)

    def restore(self, step: int, abstract_state) -> tuple:
        """Restores (state, data_state) of ``step`` onto the shardings given in ``abstract_state``."""
        restored = self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_state), data=ocp.args.JsonRestore()))
        return restored["state"], restored["data"]

    def restore_params(self, step: int, abstract_params) -> dict:
        """Restores only the parameters of ``step`` (for decoding) with the shapes they were saved with.

        The caller checks them against its model (decode/restore.py) and places them on its mesh: orbax's
        partial restore neither checks shapes nor reports a mismatch cleanly.
        """
        with warnings.catch_warnings():  # "Sharding info not provided": intended, the caller places the arrays
            warnings.simplefilter("ignore", UserWarning)
            restored = self.manager.restore(step, args=ocp.args.Composite(
                state=ocp.args.PyTreeRestore(item={"params": abstract_params}, partial_restore=True)))
        return restored["state"]["params"]

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()


def average_params(trees: list) -> dict:
    """Elementwise mean of parameter trees (§6.1 checkpoint averaging), accumulated in float64 on host."""
    if not trees:
        raise ValueError("Nothing to average.")
    return jax.tree.map(lambda *xs: (sum(np.asarray(x, np.float64) for x in xs) / len(xs)).astype(np.float32),
                        *trees)
