"""Checkpoints with orbax: periodic and time-based saves (§6.1: every 10 minutes), keep the last K, averaging.

A checkpoint holds the train state (parameters, optimizer state, step, RNG) and the data-iterator position,
so a run restarted from it continues exactly as if it had not stopped. Saves are asynchronous; orbax writes
into a temporary folder and renames it when complete, so a run killed mid-save leaves the previous checkpoint
intact. Restoring takes the shardings of the *current* mesh, so a run may resume on a different mesh shape.
"""

import os
import time
import warnings

import jax
import numpy as np
import orbax.checkpoint as ocp

CHECKPOINT_DIR = "checkpoints"


class Checkpointer:
    """Saves every ``every_steps`` steps and every ``every_minutes`` minutes, keeping the last ``keep``."""

    def __init__(self, workdir: str, *, keep: int, every_steps: int = 0, every_minutes: float = 0.0,
                 async_save: bool = True):
        self.directory = os.path.abspath(os.path.join(workdir, CHECKPOINT_DIR))
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=async_save,
                                                 create=True))
        self.every_steps, self.every_minutes = every_steps, every_minutes
        self._last_save_time = time.monotonic()

    def due(self, step: int) -> bool:
        """Whether ``step`` (number of completed steps) should be saved now."""
        if self.every_steps and step % self.every_steps == 0:
            return True
        return bool(self.every_minutes) and time.monotonic() - self._last_save_time >= 60 * self.every_minutes

    def save(self, step: int, state, data_state: dict) -> None:
        """Saves (asynchronously) the train state and the iterator position after ``step`` steps."""
        if step in self.manager.all_steps():
            return
        self.manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                        data=ocp.args.JsonSave(data_state)))
        self._last_save_time = time.monotonic()

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def all_steps(self) -> list[int]:
        return sorted(self.manager.all_steps())

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
