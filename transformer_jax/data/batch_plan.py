"""How many rows each length bucket's training step gets: §5.1's "approximately 25000 source tokens and 25000
target tokens" per step as REAL (non-pad) tokens, for any number of hosts × devices × accumulation steps.

A step of bucket ``L`` is a ``[rows, L]`` array per side. Packed rows are not full (``fill_rate`` ≈ 0.9–0.96 of
their tokens are real), so aiming ``rows × L`` at the budget would give ~22–24K real tokens. The rows that hold
the budget's real tokens are ``ideal = tokens_per_batch / (L · fill_rate)``. The array's rows must be a multiple of
``row_multiple`` (the data-parallel device count × gradient-accumulation steps, so that every device gets whole
rows of every micro-batch):

- If a multiple of ``row_multiple`` lies within ``TOLERANCE`` (±3%) of ``ideal`` in real tokens, the step is that
  many rows, all of them filled (the usual case: 8 hosts × 4 chips → multiples of 32 rows).
- Otherwise (the budget is smaller than a few rows per device, e.g. 64 hosts × 8 chips at 25K tokens:
  fewer than one 256-token row per device), ``round(ideal)`` rows are filled and the array is padded with empty rows
  up to the next multiple. The step then still holds the budget's real tokens — the recipe is unchanged — and the
  padding is wasted compute, which :func:`plan_warnings` reports.

The fill rate of each bucket is measured on the data (``TrainBatches`` packs the first window of epoch 0, which is
deterministic: every host and every restart gets the same plan); ``describe`` plans with
``config.data.planning_fill_rate`` when it has no data.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

TOLERANCE = 0.03  # a bucket's real tokens per step may differ from tokens_per_batch by at most 3%
WASTE_WARNING = 0.10  # warn when empty padding rows are at least this share of a bucket's step


@dataclasses.dataclass(frozen=True)
class BucketPlan:
    """The global step shape of one length bucket.

    Attributes:
        length: row length L (tokens per row and side).
        rows: global rows of the step's arrays (a multiple of ``row_multiple``).
        filled_rows: rows that carry sentence pairs; ``rows - filled_rows`` rows are all padding.
        fill_rate: expected share of real tokens in a filled row (mean of both sides).
    """

    length: int
    rows: int
    filled_rows: int
    fill_rate: float

    @property
    def real_tokens(self) -> float:
        """Expected real tokens per side in one step of this bucket."""
        return self.filled_rows * self.length * self.fill_rate

    @property
    def padding_rows(self) -> int:
        return self.rows - self.filled_rows


def plan_bucket(tokens_per_batch: int, length: int, row_multiple: int, fill_rate: float) -> BucketPlan:
    """The step shape of bucket ``length`` whose real tokens are closest to ``tokens_per_batch`` (see module doc)."""
    if tokens_per_batch < 1 or length < 1 or row_multiple < 1 or not 0.0 < fill_rate <= 1.0:
        raise ValueError(f"Bad batch plan arguments: tokens_per_batch={tokens_per_batch}, length={length}, "
                         f"row_multiple={row_multiple}, fill_rate={fill_rate}.")
    ideal = tokens_per_batch / (length * fill_rate)  # filled rows that hold the budget in real tokens
    below = max(row_multiple, math.floor(ideal / row_multiple) * row_multiple)
    candidates = (below, below + row_multiple)
    best = min(candidates, key=lambda r: abs(r - ideal))
    if abs(best - ideal) <= TOLERANCE * ideal:
        return BucketPlan(length, best, best, fill_rate)
    filled = max(1, round(ideal))
    return BucketPlan(length, -(-filled // row_multiple) * row_multiple, filled, fill_rate)


def plan_steps(tokens_per_batch: int, lengths: Sequence[int], row_multiple: int,
               fill_rates: Sequence[float]) -> list[BucketPlan]:
    """:func:`plan_bucket` for every bucket."""
    return [plan_bucket(tokens_per_batch, length, row_multiple, fill)
            for length, fill in zip(lengths, fill_rates, strict=True)]


def plan_warnings(plans: Sequence[BucketPlan], tokens_per_batch: int, row_multiple: int) -> list[str]:
    """One line per bucket whose step misses the budget by more than ``TOLERANCE``, or whose empty padding rows are
    ``WASTE_WARNING`` or more of its compute."""
    lines = []
    for p in plans:
        error = p.real_tokens / tokens_per_batch - 1.0
        if abs(error) > TOLERANCE:
            lines.append(f"bucket {p.length}: a step holds ~{p.real_tokens:,.0f} real tokens, {error:+.1%} off "
                         f"tokens_per_batch={tokens_per_batch:,} (one row is {p.length} tokens): lower "
                         f"data.max_length or raise data.tokens_per_batch.")
        if p.padding_rows >= WASTE_WARNING * p.rows:
            lines.append(f"bucket {p.length}: {p.padding_rows} of {p.rows} rows per step are empty padding "
                         f"({p.padding_rows / p.rows:.0%} of the step's compute): {tokens_per_batch:,} tokens do not "
                         f"fill whole rows on {row_multiple} data-parallel devices × accumulation steps; raise "
                         f"data.tokens_per_batch, use fewer devices, or fewer data.num_length_buckets.")
    return lines


def measured_fill_rates(rows_per_bucket: Sequence[Sequence[Sequence[int]]], lengths: Sequence[int],
                        src_len, tgt_len) -> list[float]:
    """Mean real-token share (both sides) of each bucket's packed rows; buckets without rows get the overall mean."""
    fills, real_all, cap_all = [], 0, 0
    for rows, length in zip(rows_per_bucket, lengths):
        ids = [i for row in rows for i in row]
        real = int(src_len[ids].sum() + tgt_len[ids].sum()) if ids else 0
        cap = 2 * len(rows) * length
        fills.append(real / cap if cap else None)
        real_all, cap_all = real_all + real, cap_all + cap
    overall = real_all / cap_all if cap_all else 1.0
    return [overall if f is None else f for f in fills]
