"""Run observability: ``<workdir>/metrics.jsonl`` (the source of truth for `compare`) and TensorBoard events.

One JSON object per record: ``{"step": …, "train_loss": …, "learning_rate": …, …}``. Only process 0 writes.

Each start of training (fresh, or resumed from the checkpoint of step S) calls :meth:`MetricsWriter.start`, which
drops the records of steps after S that an interrupted attempt left behind (the file is rewritten atomically),
so the file holds one history with each step once, and appends ``{"step": S, "event": "start"}``: where a training
segment begins, for the train-time accounting of `compare` (evaluate/report.py).
"""

import contextlib
import errno
import json
import os
import time

import jax

from transformer_jax.run.disk_errors import DiskFullError
from transformer_jax.run.folder import METRICS_FILE, TENSORBOARD_DIR

START_EVENT = "start"  # the value of "event" in the record that opens a training segment


class MetricsWriter:
    """Appends records to metrics.jsonl and mirrors scalars to TensorBoard (tensorboardX)."""

    def __init__(self, workdir: str):
        self.enabled = jax.process_index() == 0
        self.path = os.path.join(workdir, METRICS_FILE)
        self._tb = None
        if self.enabled:
            from tensorboardX import SummaryWriter  # imported lazily: only the writing process needs it

            self._tb = SummaryWriter(os.path.join(workdir, TENSORBOARD_DIR))

    def start(self, step: int) -> None:
        """Opens a training segment at ``step``: drops later records (an interrupted attempt's), marks the start.

        Raises:
          DiskFullError: the disk of the run folder is full.
        """
        if not self.enabled:
            return
        with _disk_full_as_one_line(self.path):
            kept, dropped = _history_until(self.path, step)
            if dropped:
                tmp = f"{self.path}.tmp{os.getpid()}"
                try:
                    with open(tmp, "w") as f:
                        f.writelines(kept)
                    os.replace(tmp, self.path)  # atomic: a kill leaves the old file or the new one, never half
                finally:
                    if os.path.exists(tmp):
                        os.remove(tmp)
            self._append({"step": int(step), "time": time.time(), "event": START_EVENT})

    def write(self, step: int, **values: float) -> None:
        """Appends one record (and mirrors its numbers to TensorBoard). Raises DiskFullError on a full disk."""
        if not self.enabled:
            return
        record = {"step": int(step), "time": time.time(), **{k: _plain(v) for k, v in values.items()}}
        with _disk_full_as_one_line(self.path):
            self._append(record)
        for key, value in record.items():
            if key not in ("step", "time") and isinstance(value, (int, float)):
                self._tb.add_scalar(key, value, step)

    def _append(self, record: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


@contextlib.contextmanager
def _disk_full_as_one_line(path: str):
    """Turns ENOSPC/EDQUOT while writing ``path`` into one DiskFullError line."""
    try:
        yield
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT) or isinstance(error, DiskFullError):
            raise
        raise DiskFullError(f"No space left on the disk of {os.path.dirname(os.path.abspath(path))}: cannot write "
                            f"{os.path.basename(path)}. Free space there and run the same command again: training "
                            "resumes from the last checkpoint.") from None


def _history_until(path: str, step: int) -> tuple[list[str], bool]:
    """The lines of ``path`` with a step ≤ ``step``, and whether any line was left out (later or half-written)."""
    if not os.path.exists(path):
        return [], False
    kept, dropped = [], False
    with open(path) as f:
        for line in f:
            try:
                record = json.loads(line)
                keep = int(record["step"]) <= step and line.endswith("\n")
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                keep = False
            if keep:
                kept.append(line)
            else:
                dropped = True
    return kept, dropped


def _plain(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def read_metrics(workdir: str) -> list[dict]:
    """All records of a run's metrics.jsonl (empty if none yet); a half-written last line is ignored."""
    path = os.path.join(workdir, METRICS_FILE)
    if not os.path.exists(path):
        return []
    records = []
    with open(path) as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records
