"""Checkpoints with orbax: saves on a step schedule (§6.1), time-based safety saves, keep K, averaging.

§6.1 averages the last 5 (base) / 20 (big) checkpoints "written at 10-minute intervals". At the paper's step times
(base 0.4 s, big 1.0 s on 8 P100) that is every 1,500 / 600 steps, and the configs save on that STEP schedule
(``checkpoint_every_steps``): on faster hardware a 10-minute clock would average weights from far-apart (or too
few) steps. The schedule is every multiple of ``every_steps`` plus the run's final step; :func:`schedule_steps`
picks those out of a run's checkpoints, and averaging takes its last N from them only. A checkpoint is scheduled if
it was when written (``<workdir>/checkpoint_schedule.json`` records it), so resuming with another ``num_steps``,
``checkpoint_every_steps`` or a lower ``keep_checkpoints`` prunes none of them and ``avgN`` still draws on them.
Saves every ``every_minutes`` of wall-clock time (and the one a SIGTERM triggers) are *safety* saves for
preemption: they are resumed from, but never averaged, and only the newest one is kept (when it is newer than the schedule's).

Multi-host: orbax's save is a collective, so every process must save at the same step. The schedule is pure step
arithmetic; the clock is read only at clock-check steps (every ``clock_check_every`` steps, where the trainer
already waits for the devices) and only process 0's reading counts: it is broadcast to all processes, so a skewed
or jumping clock on one host cannot make the hosts disagree.

A checkpoint holds the train state (parameters, optimizer state, step, RNG) and the data-iterator position,
so a run restarted from it continues exactly as if it had not stopped. Saves are asynchronous; orbax writes
into a temporary folder and renames it when complete, so a run killed mid-save leaves the previous checkpoint
intact. Restoring takes the shardings of the *current* mesh, so a run may resume on a different mesh shape.

No work is lost to a bad disk. A checkpoint that cannot be read back (a truncated or missing file) is moved aside
to ``checkpoints/<step>.corrupt-<time>`` (orbax no longer lists it; nothing is deleted) with one warning, and
:meth:`Checkpointer.restore_latest` continues from the newest one that restores. Corruption is judged at the restore
boundary only: a failed restore is followed by a read of the whole checkpoint as saved (on host, independent of
the current model and mesh); only if that fails too is the checkpoint corrupt, otherwise the original error (a
shape mismatch, a mesh that does not fit) is raised unchanged. A full disk, which orbax and tensorstore report in
many forms and with many tracebacks, becomes one :class:`DiskFullError` line; the unfinished save is removed (as
are any left by a run that died mid-save, before the first save of the next one), and the same command resumes
once space is back.
"""

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import threading
import time
import warnings
from collections.abc import Callable, Sequence

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

from transformer_jax.run.disk_errors import (
    CorruptCheckpointError,
    DiskFullError,
    failed_restore,
    first_cause,
    is_disk_full,
    is_environmental,
    quiet_orbax,
)
from transformer_jax.run.folder import CHECKPOINT_DIR, SCHEDULE_FILE, checkpoint_steps

UNFINISHED_MARK = ".orbax-checkpoint-tmp"  # orbax writes <step>.orbax-checkpoint-tmp[-<time>] and renames it when done
CORRUPT_MARK = ".corrupt-"  # <step>.corrupt-<time>: a checkpoint that could not be read, set aside

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
    """orbax preservation policy: the last ``keep`` scheduled checkpoints, plus the newest one of any kind.

    Scheduled are the checkpoints on the current step schedule and those ``recorded`` as scheduled when they were
    written (a resume with another ``num_steps`` or ``checkpoint_every_steps`` must not turn them into safety saves).
    """

    keep: int
    every_steps: int
    num_steps: int
    recorded: set[int] = dataclasses.field(default_factory=set)

    def scheduled(self, steps: Sequence[int]) -> list[int]:
        return sorted(set(schedule_steps(steps, self.every_steps, self.num_steps)) | (self.recorded & set(steps)))

    def should_preserve(self, checkpoints, *, context) -> list[bool]:
        del context
        steps = [c.step for c in checkpoints]
        kept = set(self.scheduled(steps)[-self.keep:])
        newest = max(steps, default=None)
        return [s in kept or s == newest for s in steps]


def _read_schedule(path: str) -> tuple[set[int], int]:
    """The steps a run recorded as scheduled when it wrote them, and the keep it had (empty, 0: none recorded)."""
    try:
        with open(path) as f:
            record = json.load(f)
        return {int(s) for s in record["scheduled"]}, int(record["keep"])
    except (OSError, ValueError, KeyError, TypeError):
        return set(), 0


def copy_schedule(source: str, workdir: str, up_to: int) -> None:
    """Copies ``source``'s record of scheduled steps, those ≤ ``up_to``, into ``workdir`` (a branch, run/branch.py)."""
    recorded, keep = _read_schedule(os.path.join(source, SCHEDULE_FILE))
    if recorded:
        with open(os.path.join(workdir, SCHEDULE_FILE), "w") as f:
            json.dump({"scheduled": sorted(s for s in recorded if s <= up_to), "keep": keep}, f)


def _process_zero_decides(flag: bool) -> bool:
    """``flag`` as process 0 sees it, on every process (a collective: all processes call it at the same step)."""
    if jax.process_count() == 1:
        return flag
    return bool(multihost_utils.broadcast_one_to_all(np.asarray(flag, np.int32)))


def _wait_for_orbax_threads(timeout_s: float = 60.0) -> None:
    """Joins orbax's writer threads after a failed save: orbax reports the first error while the other writers of the
    same checkpoint may still be finishing (and creating files in its folder)."""
    deadline = time.monotonic() + timeout_s
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and type(thread).__module__.startswith("orbax."):
            thread.join(max(0.0, deadline - time.monotonic()))


def _on_all_processes(flag: bool) -> bool:
    """Whether ``flag`` holds on every process (a collective: all processes call it at the same point)."""
    if jax.process_count() == 1:
        return flag
    return bool(np.all(multihost_utils.process_allgather(np.asarray(flag, np.int32))))


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
        self.workdir = workdir
        self.directory = os.path.abspath(os.path.join(workdir, CHECKPOINT_DIR))
        self._schedule_file = os.path.join(os.path.abspath(workdir), SCHEDULE_FILE)
        recorded, recorded_keep = _read_schedule(self._schedule_file)
        if recorded_keep > int(keep):
            logger.warning("keep_checkpoints=%d is lower than the %d this run kept so far: the checkpoints already on "
                           "its schedule are kept (%d); lower it in a new run.", int(keep), recorded_keep, recorded_keep)
        self._policy = _KeepSchedule(max(int(keep), recorded_keep), int(every_steps), int(num_steps), recorded)
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                enable_async_checkpointing=async_save, create=True, preservation_policy=self._policy))
        self.every_steps, self.num_steps, self.every_minutes = int(every_steps), int(num_steps), every_minutes
        self.clock_check_every = max(1, int(clock_check_every))
        self._clock = clock
        self._last_save_time = clock()
        self._swept = False  # unfinished saves of an earlier process are removed before this one's first save
        self._failure: DiskFullError | None = None
        quiet_orbax()

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
        """Saves (asynchronously) the train state and the iterator position after ``step`` steps.

        Raises:
          DiskFullError: this save, or the one before it still in flight, found the disk full.
        """
        if step in self.manager.all_steps():
            return
        if not self._swept:  # a run that died mid-save left its unfinished folder: it only holds disk space
            self._remove_unfinished()
            self._swept = True
        scheduled = on_schedule(step, self.every_steps, self.num_steps)
        if scheduled and step not in self._policy.recorded:  # recorded before orbax prunes with it in mind
            self._policy.recorded.add(step)
            self._write_schedule()
        kind = "scheduled" if scheduled else "safety"
        logger.info("Saving the checkpoint of step %d (%s) in %s", step, kind, self.directory)
        with self._writing():
            self.manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                            data=ocp.args.JsonSave(data_state)))
        self._last_save_time = self._clock()

    @contextlib.contextmanager
    def _writing(self):
        """Turns a full disk, however orbax reports it, into one :class:`DiskFullError` and removes the partial save."""
        if self._failure is not None:  # already reported; orbax would raise (and log) the same error again
            raise self._failure
        try:
            yield
        except Exception as error:
            if not is_disk_full(error):
                raise
            _wait_for_orbax_threads()  # no writer may recreate what is removed next
            self._remove_unfinished()
            complete = checkpoint_steps(self.workdir)
            resume = f"resumes from step {complete[-1]}" if complete else "starts again from step 0"
            self._failure = DiskFullError(
                f"No space left on the disk of {self.directory}: a checkpoint could not be written (its unfinished "
                f"folder was removed; the last complete checkpoint is "
                f"{f'step {complete[-1]}' if complete else 'none'}). Free space there and run the same command "
                f"again: training {resume}.")
            raise self._failure from None

    def _remove_unfinished(self) -> None:
        """Deletes orbax's unfinished checkpoint folders (``<step>.orbax-checkpoint-tmp*``); process 0 only."""
        if jax.process_index() != 0:
            return
        with contextlib.suppress(OSError):
            for name in os.listdir(self.directory):
                if UNFINISHED_MARK in name:
                    logger.info("Removing the unfinished checkpoint %s", os.path.join(self.directory, name))
                    shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def all_steps(self) -> list[int]:
        return sorted(self.manager.all_steps())

    def scheduled_steps(self) -> list[int]:
        """The checkpoints on the step schedule, now or when they were written (what averaging draws from)."""
        return self._policy.scheduled(self.all_steps())

    def _write_schedule(self) -> None:
        """Records the steps saved as scheduled (and keep) in ``<workdir>/checkpoint_schedule.json``; process 0
        writes."""
        if jax.process_index() != 0:
            return
        path = self._schedule_file
        with open(path + ".tmp", "w") as f:
            json.dump({"scheduled": sorted(self._policy.recorded), "keep": self._policy.keep}, f)
        os.replace(path + ".tmp", path)

    def restore(self, step: int, abstract_state) -> tuple:
        """Restores (state, data_state) of ``step`` onto the shardings given in ``abstract_state``.

        Raises:
          CorruptCheckpointError: the checkpoint cannot be read; it has been moved aside.
        """
        restored = self._restoring(step, lambda: self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_state), data=ocp.args.JsonRestore())))
        return restored["state"], restored["data"]

    def restore_latest(self, abstract_state) -> tuple[int, object, dict] | None:
        """(step, state, data_state) of the newest checkpoint that restores, None if there is none.

        Newer checkpoints that cannot be read are moved aside, with one warning each naming where they went.
        """
        steps = self.all_steps()
        for step in reversed(steps):
            try:
                return (step, *self.restore(step, abstract_state))
            except CorruptCheckpointError as error:
                logger.warning("%s Trying the checkpoint before it.", error)
        if steps:
            logger.warning("No checkpoint in %s can be read: starting from step 0.", self.directory)
        return None

    def restore_params(self, step: int, abstract_params) -> dict:
        """Restores only the parameters of ``step`` (for decoding), on host, with the shapes they were saved with.

        The caller checks them against its model (decode/restore.py) and places them on its mesh: orbax's
        partial restore neither checks shapes nor reports a mismatch cleanly. Host arrays need neither the saved
        sharding file nor the topology the run was saved on.

        Raises:
          CorruptCheckpointError: the parameters cannot be read; the checkpoint has been moved aside.
        """
        on_host = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), abstract_params)
        restored = self._restoring(step, lambda: self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.PyTreeRestore(item={"params": abstract_params}, restore_args={"params": on_host},
                                         partial_restore=True))))
        return restored["state"]["params"]

    def _restoring(self, step: int, restore: Callable[[], dict]) -> dict:
        """Runs ``restore``; if it fails because the checkpoint's files are unreadable, moves the checkpoint aside and
        raises :class:`CorruptCheckpointError`; any other failure (the target, not the files) is raised unchanged."""
        try:
            result, error = restore(), None
        except Exception as e:  # noqa: BLE001 -- orbax/tensorstore report unreadable files with many types: judged below
            result, error = None, e
        if _on_all_processes(error is None):
            return result
        failed_restore(os.path.join(self.directory, str(step)))
        unreadable = self._read_error(step)
        corrupt = unreadable is not None and not is_environmental(unreadable) and not is_environmental(error)
        if _on_all_processes(not corrupt):  # the files are whole (the target did not fit), or the machine failed
            if error is None:
                raise RuntimeError(f"Another process could not restore checkpoint step {step} of {self.directory}.")
            raise error
        moved_to = self._move_aside(step)
        raise CorruptCheckpointError(step, self.directory, moved_to, first_cause(error)) from None

    def _read_error(self, step: int) -> Exception | None:
        """Why the arrays and the data position of ``step`` do not read back as saved (on host: no model, no mesh);
        None if they do."""
        path = self.manager.directory / str(step)  # an epath.Path, as orbax's handlers take
        reader = ocp.PyTreeCheckpointHandler()  # the item's own handler: no step-level files needed
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                on_host = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray),
                                       reader.metadata(path / "state").tree)
                reader.restore(path / "state", args=ocp.args.PyTreeRestore(restore_args=on_host))
            json.loads((path / "data" / "metadata").read_text())
        except Exception as error:  # noqa: BLE001 -- any failure to read is the answer (see _restoring)
            return error
        finally:
            reader.close()
        return None

    def _move_aside(self, step: int) -> str:
        """Renames ``<step>`` to ``<step>.corrupt-<UTC time>`` (process 0; the others wait for it)."""
        stamp = int(time.time())
        if jax.process_count() > 1:
            stamp = int(multihost_utils.broadcast_one_to_all(np.asarray(stamp, np.int64)))
        source = os.path.join(self.directory, str(step))
        target = f"{source}{CORRUPT_MARK}{time.strftime('%Y%m%d-%H%M%S', time.gmtime(stamp))}"
        if jax.process_index() == 0 and os.path.isdir(source):
            suffix = 1
            while os.path.exists(target + (f"-{suffix}" if suffix > 1 else "")):
                suffix += 1
            target += f"-{suffix}" if suffix > 1 else ""
            os.rename(source, target)
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices(f"transformer_jax: checkpoint {step} moved aside")
        self.manager.reload()
        return target

    def wait(self) -> None:
        """Waits for the save in flight. Raises DiskFullError if it found the disk full."""
        with self._writing():
            self.manager.wait_until_finished()

    def close(self) -> None:
        """Completes the save in flight and closes. Raises DiskFullError if it found the disk full (once)."""
        if self._failure is not None:  # reported already; orbax would only raise it again
            return
        with self._writing():
            self.manager.close()


def average_params(trees: list) -> dict:
    """Elementwise mean of parameter trees (§6.1 checkpoint averaging), accumulated in float64 on host."""
    if not trees:
        raise ValueError("Nothing to average.")
    return jax.tree.map(lambda *xs: (sum(np.asarray(x, np.float64) for x in xs) / len(xs)).astype(np.float32),
                        *trees)
