"""Preemption: a SIGTERM (the notice Slurm, Kubernetes and Cloud TPU send before they stop a job) saves a
checkpoint at the next step and stops the run, so a preempted or timed-out run loses at most one step instead of
everything since the last periodic save (§6.1 saves every 10 minutes).

One process: a Python SIGTERM handler sets a flag. Several (``jax.distributed``): JAX's preemption service
already catches the signal on whichever host receives it and agrees on one step at which every host saves
(``multihost_utils.reached_preemption_sync_point``), so that all hosts write the same checkpoint.
"""

import signal
import threading
from typing import Self

import jax
from jax.experimental import multihost_utils


class Preempted(Exception):
    """Raised by training once the checkpoint of step ``step`` is complete after a SIGTERM."""

    def __init__(self, step: int):
        super().__init__(f"stopped by SIGTERM after step {step}; its checkpoint is saved — run the same command "
                         f"again to resume")
        self.step = step


class PreemptionWatch:
    """``with PreemptionWatch() as watch: ... if watch.reached(step): save and stop``."""

    def __init__(self):
        self._signalled = False
        self._previous = None

    def __enter__(self) -> Self:
        # Several processes: JAX's service owns SIGTERM. Python handlers can only be set from the main thread.
        if jax.process_count() == 1 and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None

    def _on_sigterm(self, signum, frame) -> None:
        self._signalled = True

    def reached(self, step: int) -> bool:
        """Whether to save after ``step`` steps and stop (called by every process at every step)."""
        if jax.process_count() > 1:
            return multihost_utils.reached_preemption_sync_point(step)
        return self._signalled
