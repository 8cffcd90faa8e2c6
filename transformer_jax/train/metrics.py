"""Run observability: ``<workdir>/metrics.jsonl`` (the source of truth for `compare`) and TensorBoard events.

One JSON object per record: ``{"step": …, "train_loss": …, "learning_rate": …, …}``. Only process 0 writes.
"""

import json
import os
import time

import jax


class MetricsWriter:
    """Appends records to metrics.jsonl and mirrors scalars to TensorBoard (tensorboardX)."""

    def __init__(self, workdir: str):
        self.enabled = jax.process_index() == 0
        self.path = os.path.join(workdir, "metrics.jsonl")
        self._tb = None
        if self.enabled:
            from tensorboardX import SummaryWriter  # imported lazily: only the writing process needs it

            self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"))

    def write(self, step: int, **values: float) -> None:
        if not self.enabled:
            return
        record = {"step": int(step), "time": time.time(), **{k: _plain(v) for k, v in values.items()}}
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        for key, value in record.items():
            if key not in ("step", "time") and isinstance(value, (int, float)):
                self._tb.add_scalar(key, value, step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def _plain(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def read_metrics(workdir: str) -> list[dict]:
    """All records of a run's metrics.jsonl (empty if none yet); a half-written last line is ignored."""
    path = os.path.join(workdir, "metrics.jsonl")
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
