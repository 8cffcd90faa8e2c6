"""Failures of the disk under a run folder, recognised and said in one line (run/checkpoints.py, run/metrics.py).

orbax and tensorstore report a full disk or an unreadable checkpoint with many exception types, hundreds of lines of
tracebacks, and late errors from reads and writes still in flight. The trainer raises (or warns) once, with what to
do; the filters below drop only orbax's and asyncio's duplicates of what has been reported that way.
"""

import errno
import logging
import sys

# How a full disk (or quota) shows: OSError errno, or the text of tensorstore's RESOURCE_EXHAUSTED errors.
_DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_DISK_FULL_TEXTS = ("No space left on device", "Disk quota exceeded",
                    f"os_error_code='{errno.ENOSPC}'", f"os_error_code='{errno.EDQUOT}'")


class DiskFullError(OSError):
    """The disk of a run folder is full: one line (orbax and tensorstore report it with hundreds)."""

    def __init__(self, message: str):
        super().__init__(errno.ENOSPC, message)

    def __str__(self) -> str:
        return self.strerror


class CorruptCheckpointError(OSError):
    """A checkpoint could not be read back; it has been moved aside to ``moved_to`` (orbax no longer lists it)."""

    def __init__(self, step: int, directory: str, moved_to: str, reason: str):
        super().__init__(f"Checkpoint step {step} in {directory} cannot be read ({reason}); "
                         f"moved it aside to {moved_to}.")
        self.step, self.moved_to = step, moved_to


def _chain(error: BaseException | None) -> list[BaseException]:
    """``error`` and its causes, outermost first."""
    chain = []
    while error is not None and all(error is not e for e in chain):
        chain.append(error)
        error = error.__cause__ if error.__cause__ is not None or error.__suppress_context__ else error.__context__
    return chain


def is_disk_full(error: BaseException | None) -> bool:
    """Whether ``error`` (or one of its causes) says the disk or the quota is full."""
    return any(isinstance(e, OSError) and e.errno in _DISK_FULL_ERRNOS or any(t in str(e) for t in _DISK_FULL_TEXTS)
               for e in _chain(error))


def is_environmental(error: BaseException | None) -> bool:
    """Whether ``error`` is about the machine rather than a file's contents (memory, permissions, a full disk):
    a checkpoint that fails to restore for such a reason is not corrupt, and is left where it is."""
    return any(isinstance(e, (MemoryError, PermissionError)) or "PERMISSION_DENIED" in str(e)
               or "RESOURCE_EXHAUSTED" in str(e) for e in _chain(error)) or is_disk_full(error)


def first_cause(error: BaseException | None, limit: int = 160) -> str:
    """The innermost cause of ``error`` in one short line (tensorstore's own message, not orbax's wrapper)."""
    if error is None:
        return "unreadable on another process"
    inner = _chain(error)[-1]
    line = next((ln.strip() for ln in str(inner).splitlines() if ln.strip()), "")
    text = f"{type(inner).__name__}: {line}" if line else type(inner).__name__
    return text if len(text) <= limit else text[:limit - 1] + "…"


_failed_restores: list[str] = []  # "<checkpoint>/" of restores that failed here (and were reported)


def failed_restore(path: str) -> None:
    """Notes that restoring the checkpoint at ``path`` failed and is being reported: what its unfinished reads raise
    or log afterwards is dropped (see :func:`quiet_orbax`)."""
    _failed_restores.append(path.rstrip("/") + "/")


def _about_a_failed_restore(error: BaseException | None, message: str = "") -> bool:
    text = message + "".join(str(e) for e in _chain(error))
    return any(path in text for path in _failed_restores)


class _QuietOrbax(logging.Filter):
    """Drops ERROR records (each with a traceback) that repeat what has been reported in one line: orbax's own about a
    full disk, and those that the unfinished reads of a failed restore log after the fact (asyncio's "Task exception
    was never retrieved")."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        error, message = record.exc_info[1] if record.exc_info else None, record.getMessage()
        if "orbax" in record.pathname and (is_disk_full(error) or any(t in message for t in _DISK_FULL_TEXTS)):
            return False
        return not _about_a_failed_restore(error, message)


def _is_leftover(unraisable) -> bool:
    """Whether an exception Python could not raise anywhere is a leftover of orbax's asynchronous I/O: a tensorstore
    callback that fires after orbax closed its event loop ("Event loop is closed": a failed restore's unfinished
    reads), or a read coroutine of a failed restore closed half-way (its error names the checkpoint)."""
    error = unraisable.exc_value
    return (isinstance(error, RuntimeError) and str(error) == "Event loop is closed"
            or _about_a_failed_restore(error))


def quiet_orbax() -> None:
    """Installs (once per process) the filters above: on the loggers orbax and asyncio write to, and as a wrapper of
    ``sys.unraisablehook`` that passes every other exception on to the hook it replaces."""
    for name in ("absl", "asyncio"):  # orbax logs through absl
        logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietOrbax) for f in logger.filters):
            logger.addFilter(_QuietOrbax())
    previous = sys.unraisablehook
    if getattr(previous, "transformer_jax_quiet", False):
        return

    def hook(unraisable):
        if not _is_leftover(unraisable):
            previous(unraisable)

    hook.transformer_jax_quiet = True
    sys.unraisablehook = hook
