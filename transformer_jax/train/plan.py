"""A run's plan on a cluster layout, computed without the cluster: rows × length of each bucket's step (§5.1),
real tokens per step, the checkpoint schedule and the averaging window (§6.1), with a warning when the final avgN
(``config.decode.average_last``) needs more checkpoints than the schedule keeps.

``transformer-jax describe --config=base --num_processes=8 --devices_per_process=4`` prints it, the trainer uses
the same :func:`row_multiple`, and ``transformer-jax compile`` compiles its buckets for a target (aot.py), so what
``describe`` shows is what training does and what is compiled.
"""

import dataclasses

import ml_collections

from transformer_jax import sharding
from transformer_jax.data.batch_plan import BucketPlan, plan_steps, plan_warnings
from transformer_jax.data.batching import bucket_lengths
from transformer_jax.run.checkpoints import planned_schedule


def row_multiple(config: ml_collections.ConfigDict, num_devices: int) -> int:
    """Global rows of every step are a multiple of this: data-parallel devices (data × fsdp, over ALL hosts) ×
    gradient-accumulation steps, so every device gets whole rows of every micro-batch."""
    data, fsdp, _ = sharding.mesh_shape(config.train.mesh, num_devices)
    return data * fsdp * int(config.train.grad_accum_steps)


@dataclasses.dataclass
class LayoutPlan:
    """What a run of ``config`` does on ``num_processes × devices_per_process`` devices."""

    num_processes: int
    devices_per_process: int
    row_multiple: int
    buckets: list[BucketPlan]
    warnings: list[str]
    checkpoint_every_steps: int
    average_last: int
    average_steps: list[int]  # the scheduled checkpoints the final avgN averages
    average_available: int | None = None  # scheduled checkpoints kept at the end (None: time-based, not known ahead)

    @property
    def num_devices(self) -> int:
        return self.num_processes * self.devices_per_process

    @property
    def average_window_steps(self) -> int:
        """Steps from the first to the last averaged checkpoint."""
        return self.average_steps[-1] - self.average_steps[0] if self.average_steps else 0

    def as_dict(self, tokens_per_batch: int, accum: int) -> dict:
        data_parallel = self.row_multiple // accum
        return {
            "num_processes": self.num_processes,
            "devices_per_process": self.devices_per_process,
            "batch_shapes": [[b.rows, b.length] for b in self.buckets],
            "rows_per_device": [b.rows // data_parallel // accum for b in self.buckets],
            "filled_rows": [b.filled_rows for b in self.buckets],
            "fill_rates": [round(b.fill_rate, 4) for b in self.buckets],
            "tokens_per_step": [round(b.real_tokens) for b in self.buckets],
            "configured_tokens_per_step": tokens_per_batch,
            "grad_accum_steps": accum,
            "checkpoint_every_steps": self.checkpoint_every_steps,
            "average_last": self.average_last,
            "average_steps": self.average_steps,
            "average_window_steps": self.average_window_steps,
            "average_available": self.average_available,
            "warnings": self.warnings,
        }


def layout_plan(config: ml_collections.ConfigDict, num_processes: int, devices_per_process: int,
                fill_rates: list[float] | None = None) -> LayoutPlan:
    """The plan of ``config`` on a layout; ``fill_rates`` default to ``config.data.planning_fill_rate``."""
    d, t = config.data, config.train
    lengths = bucket_lengths(int(d.max_length), int(d.num_length_buckets))
    multiple = row_multiple(config, num_processes * devices_per_process)
    fills = fill_rates or [float(d.planning_fill_rate)] * len(lengths)
    buckets = plan_steps(int(d.tokens_per_batch), lengths, multiple, fills)
    every, keep, last = int(t.checkpoint_every_steps), int(t.keep_checkpoints), int(config.decode.average_last)
    kept = planned_schedule(every, int(t.num_steps))[-keep:]
    warnings = plan_warnings(buckets, int(d.tokens_per_batch), multiple) + average_warnings(config)
    return LayoutPlan(num_processes, devices_per_process, multiple, buckets, warnings, every, last, kept[-last:],
                      len(kept) if every else None)


def average_warnings(config: ml_collections.ConfigDict) -> list[str]:
    """A line when ``config.decode.average_last`` (the N of §6.1's final avgN) exceeds the checkpoints the run keeps on
    its step schedule (``checkpoint_every_steps`` up to ``num_steps``, the last ``keep_checkpoints``): `evaluate
    --checkpoint=avgN` would then fail after training (decode/restore.py averages scheduled checkpoints only)."""
    t = config.train
    every, num_steps, keep = int(t.checkpoint_every_steps), int(t.num_steps), int(t.keep_checkpoints)
    last = int(config.decode.average_last)
    if not every:  # time-based saves: how many there will be depends on the step time; keep bounds them
        if keep >= last:
            return []
        return [(f"decode.average_last={last} but train.keep_checkpoints={keep}: avg{last} will find at most {keep} "
                 f"checkpoints, so `evaluate --checkpoint=avg{last}` fails; raise config.train.keep_checkpoints to "
                 f"{last} or lower config.decode.average_last.")]
    schedule = planned_schedule(every, num_steps)
    kept = schedule[-keep:]
    if len(kept) >= last:
        return []
    if len(schedule) < last:
        why = (f"the step schedule saves {len(schedule)} (every {every:,} of {num_steps:,} steps: "
               f"{', '.join(f'{s:,}' for s in schedule)})")
        fix = (f"set config.train.checkpoint_every_steps to at most {num_steps // last:,}" if num_steps >= last else
               f"train at least {last} steps")
    else:
        why, fix = f"train.keep_checkpoints={keep} keeps {len(kept)}", f"raise config.train.keep_checkpoints to {last}"
    return [(f"decode.average_last={last} but {why}: avg{last} has {len(kept)} checkpoint{'s' * (len(kept) != 1)} "
             f"to average and `evaluate --checkpoint=avg{last}` fails; {fix}, or lower config.decode.average_last "
             f"to {len(kept)}.")]
