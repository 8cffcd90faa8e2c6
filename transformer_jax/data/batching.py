"""Token-budget batches with a bounded set of static shapes (§5.1).

§5.1: "Sentence pairs were batched together by approximate sequence length. Each training batch contained a set of
sentence pairs containing approximately 25000 source tokens and 25000 target tokens." Here a training batch is
``rows × L`` tokens per side with ``L`` from a few length buckets (``max_length / 2**i``) and ``rows`` chosen by
data/batch_plan.py so that a step holds ~``tokens_per_batch`` REAL tokens (the fill rate of packed rows is measured)
with ``rows`` a multiple of ``row_multiple``, so ``jax.jit`` compiles at most ``num_length_buckets`` train-step
shapes. Several pairs are packed per row; ``*_segmentation`` numbers them
1, 2, … per row (0 = padding) and ``*_position`` restarts at 0 for each of them, so attention must stay within a
segment (mask ``segmentation_q == segmentation_k``, plus causality on the target side).

Packing (per window of ``window`` shuffled pairs): the longest remaining pair opens a row in the smallest bucket
that holds both its sides; the row's gap is then filled best-fit with the longest remaining pairs that still fit,
until none does. A pair of bucket ``L`` is longer than ``L/2``, so two of them rarely share a row: without this
gap filling, packing within a bucket would not raise the fill rate. Rows of a bucket form batches; the rows that
do not complete a batch carry their pairs over to the next window (nothing is dropped but over-long pairs).

Determinism and resume: epoch ``e`` visits the pairs in ``default_rng([seed, e]).permutation``; the batches of
window ``k`` are a pure function of ``(seed, e, k, carried pairs)``, so :meth:`TrainBatches.get_state` is
``{epoch, window, batch, carry}`` and :meth:`TrainBatches.set_state` recomputes the window and skips ahead. The
state also records a fingerprint of the data (a mismatch is an error) and the batch layout. Another number of hosts,
devices or accumulation steps (or tokens per batch) changes only how many rows a step takes, not how the window is
packed into rows: the window's batches so far are recomputed under the checkpoint's layout and their rows left out,
and the rest of the window is cut into steps of the new layout — no pair skipped, none repeated (the state keeps
these earlier layouts, ``resumed``, until the window ends). Another packing (row lengths, ``pack``, window size) is
refused in one line.

Multi-host contract (the trainer builds global arrays): every host computes the same global plan from the token
lengths (cheap) and materializes only its slice of each global batch, the contiguous rows
``[process_index * rows / process_count, (process_index + 1) * rows / process_count)``; the trainer passes that
local batch to ``jax.make_array_from_process_local_data(sharding, local_batch)`` with the batch axis sharded
over ("data", …). All hosts therefore agree on every step's shape, and the data order does not depend on the
number of hosts. The state is identical on every host.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import logging
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from transformer_jax.data.batch_plan import measured_fill_rates, plan_steps, plan_warnings
from transformer_jax.data.corpus import DataError
from transformer_jax.data.tokenizer import EOS_ID

logger = logging.getLogger(__name__)

Batch = dict[str, np.ndarray]
BATCH_KEYS = (
    "inputs",
    "targets",
    "inputs_segmentation",
    "targets_segmentation",
    "inputs_position",
    "targets_position",
)


@dataclasses.dataclass
class TokenizedPairs:
    """Token ids of aligned pairs, stored flat (EOS included): pair ``i`` is ``src[src_offsets[i]:src_offsets[i+1]]``.

    Attributes:
        src, tgt: flat int32 token arrays.
        src_offsets, tgt_offsets: int64 arrays of length ``len + 1``.
        num_skipped_empty: training pairs the source skipped (an empty side), for reporting.
    """

    src: np.ndarray
    src_offsets: np.ndarray
    tgt: np.ndarray
    tgt_offsets: np.ndarray
    num_skipped_empty: int = 0

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def src_lengths(self) -> np.ndarray:
        """int32 [n]: source lengths in tokens, EOS included."""
        return np.diff(self.src_offsets).astype(np.int32)

    @property
    def tgt_lengths(self) -> np.ndarray:
        """int32 [n]: target lengths in tokens, EOS included."""
        return np.diff(self.tgt_offsets).astype(np.int32)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """The (source ids, target ids) of pair ``i``."""
        return (
            self.src[self.src_offsets[i] : self.src_offsets[i + 1]],
            self.tgt[self.tgt_offsets[i] : self.tgt_offsets[i + 1]],
        )

    @classmethod
    def from_lists(cls, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> TokenizedPairs:
        """Builds from ``[(src_ids, tgt_ids), …]`` (ids already end with EOS)."""
        src = [np.asarray(s, np.int32) for s, _ in pairs]
        tgt = [np.asarray(t, np.int32) for _, t in pairs]
        return cls.from_chunks([_flat(src)], [_flat(tgt)])

    @classmethod
    def from_chunks(cls, src_chunks: Sequence[tuple], tgt_chunks: Sequence[tuple], num_skipped_empty: int = 0):
        """Concatenates ``(flat ids, lengths)`` chunks (as returned by ``Tokenizer.encode_flat``)."""

        def join(chunks: Sequence[tuple]) -> tuple[np.ndarray, np.ndarray]:
            flat = np.concatenate([np.zeros(0, np.int32)] + [c[0] for c in chunks]).astype(np.int32)
            lengths = np.concatenate([np.zeros(0, np.int64)] + [c[1] for c in chunks]).astype(np.int64)
            return flat, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)

        (src, src_off), (tgt, tgt_off) = join(src_chunks), join(tgt_chunks)
        return cls(src, src_off, tgt, tgt_off, num_skipped_empty)

    def save(self, path: str) -> None:
        """Writes an ``.npz`` (the caller renames it into place)."""
        with open(path, "wb") as f:
            np.savez(f, **{k: v for k, v in dataclasses.asdict(self).items()})

    @classmethod
    def load(cls, path: str) -> TokenizedPairs:
        """Reads an ``.npz`` written by :meth:`save`."""
        with np.load(path) as z:
            return cls(*(z[k] for k in ("src", "src_offsets", "tgt", "tgt_offsets")), int(z["num_skipped_empty"]))


def _flat(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.array([len(a) for a in arrays], np.int64)
    return (np.concatenate(arrays) if arrays else np.zeros(0, np.int32)), lengths


def bucket_lengths(max_length: int, num_length_buckets: int) -> list[int]:
    """Row lengths, ascending: ``max_length // 2**i`` for ``i < num_length_buckets`` (distinct, ≥ 1)."""
    if max_length < 1 or num_length_buckets < 1:
        raise DataError(f"Need max_length ≥ 1 and num_length_buckets ≥ 1; got {max_length}, {num_length_buckets}.")
    return sorted({max_length >> i for i in range(num_length_buckets) if max_length >> i >= 1})


def pack_window(
    ids: np.ndarray,
    src_len: np.ndarray,
    tgt_len: np.ndarray,
    buckets: Sequence[int],
    pack: bool = True,
) -> list[list[list[int]]]:
    """Packs pairs into rows; returns, per bucket, its rows (each a list of pair ids), in creation order.

    Args:
        ids: pair ids of the window (shuffled; every pair fits the largest bucket).
        src_len, tgt_len: lengths of ALL pairs (indexed by id).
        buckets: ascending row lengths.
        pack: False = one pair per row (plain padding per length bucket).
    """
    ids = np.asarray(ids, np.int64)
    ls_all, lt_all = src_len[ids], tgt_len[ids]
    longest = np.maximum(ls_all, lt_all)
    bucket_of = np.searchsorted(np.asarray(buckets), longest, side="left")
    rows: list[list[list[int]]] = [[] for _ in buckets]
    if not pack:
        for i, b in zip(ids.tolist(), bucket_of.tolist()):
            rows[b].append([i])
        return rows
    # Pools of pairs keyed by their longer side, each in window (shuffled) order; `keys` = non-empty keys, sorted.
    pools: dict[int, deque] = {}
    for i, m, ls, lt in zip(ids.tolist(), longest.tolist(), ls_all.tolist(), lt_all.tolist()):
        pools.setdefault(m, deque()).append((i, ls, lt))
    keys = sorted(pools)
    while keys:
        m = keys[-1]  # the longest remaining pair opens a row in the smallest bucket that holds it
        b = bisect.bisect_left(buckets, m)
        row, free_s, free_t = [], buckets[b], buckets[b]
        while True:
            # best fit: the longest remaining pair whose longer side fits the smaller free space
            k = bisect.bisect_right(keys, min(free_s, free_t)) - 1
            if k < 0:
                break
            pool = pools[keys[k]]
            i, ls, lt = pool.popleft()
            if not pool:
                del pools[keys[k]]
                keys.pop(k)
            row.append(i)
            free_s, free_t = free_s - ls, free_t - lt
        rows[b].append(row)
    return rows


class TrainBatches(Iterator[Batch]):
    """Infinite, deterministic, resumable iterator of packed training batches (§5.1) for one host.

    Args:
        data: the tokenized training pairs (all of them; every host holds the same).
        tokens_per_batch: global budget of real tokens per side per optimizer step (whole job; batch_plan.py).
        max_length: longest pair kept (either side, EOS included); longer ones are dropped and counted.
        num_length_buckets: row lengths ``max_length // 2**i`` for ``i < num_length_buckets``.
        seed: data seed (epochs reshuffle with ``[seed, epoch]``).
        row_multiple: global rows are a multiple of this (data-parallel size × gradient-accumulation steps).
        process_index, process_count: this host and the number of hosts (``jax.process_index()/count()``).
        pack: pack several pairs per row (else one pair per row, padded).
        window: pairs per packing window (the shuffle/packing locality).
        fill_rates: expected real-token share of each bucket's rows (default: measured on the first window).
        resample: ``epoch -> TokenizedPairs``, the same pairs segmented anew for that epoch (data/bpe_dropout.py);
            every sample must fit ``max_length``. None = ``data`` in every epoch. Which pairs are kept is decided
            on ``data``.
    """

    def __init__(
        self,
        data: TokenizedPairs,
        *,
        tokens_per_batch: int,
        max_length: int,
        num_length_buckets: int = 1,
        seed: int = 0,
        row_multiple: int = 1,
        process_index: int = 0,
        process_count: int = 1,
        pack: bool = True,
        window: int = 100_000,
        fill_rates: Sequence[float] | None = None,
        resample: Callable[[int], TokenizedPairs] | None = None,
    ):
        if not 0 <= process_index < process_count:
            raise DataError(f"process_index {process_index} is not in [0, {process_count}).")
        self.data, self.seed, self.pack = data, int(seed), bool(pack)
        self.window = max(1, int(window))
        self.process_index, self.process_count = process_index, process_count
        self.buckets = bucket_lengths(max_length, num_length_buckets)
        if row_multiple % process_count:
            raise DataError(
                f"row_multiple={row_multiple} (data-parallel devices × grad_accum_steps) is not a multiple of the "
                f"{process_count} hosts: every host must feed whole rows of every step."
            )
        self._src_len, self._tgt_len = data.src_lengths, data.tgt_lengths
        keep = (self._src_len <= max_length) & (self._tgt_len <= max_length)
        self.valid_ids = np.flatnonzero(keep)
        self.num_dropped_too_long = int(len(data) - len(self.valid_ids))
        if self.num_dropped_too_long:
            logger.warning(
                "Dropped %d of %d training pairs longer than max_length=%d tokens.",
                self.num_dropped_too_long,
                len(data),
                max_length,
            )
        if not len(self.valid_ids):
            raise DataError(f"No training pairs fit max_length={max_length} (of {len(data)} pairs).")
        self._data_fingerprint = f"{len(data)}:{len(self.valid_ids)}:{int(self._src_len.sum())}"
        self._resample, self._data_epoch = resample, None
        if resample is not None:
            self._data_fingerprint += f":{getattr(resample, 'fingerprint', 'resampled')}"
            self._use_epoch_data(0)
        if fill_rates is None:  # measured on the first window of epoch 0: the same on every host and restart
            first = self._permutation(0)[: self.window]
            packed = pack_window(first, self._src_len, self._tgt_len, self.buckets, self.pack)
            fill_rates = measured_fill_rates(packed, self.buckets, self._src_len, self._tgt_len)
        self.plans = plan_steps(tokens_per_batch, self.buckets, row_multiple, fill_rates)
        self.rows = [p.rows for p in self.plans]
        for line in plan_warnings(self.plans, tokens_per_batch, row_multiple):
            logger.warning("Batch plan: %s", line)
        self._filled = [p.filled_rows for p in self.plans]
        self._layout = f"{self.buckets}:{[(p.rows, p.filled_rows) for p in self.plans]}:{self.pack}:{self.window}"
        self._perm, self._perm_epoch = self.valid_ids, -1
        self.set_state({"epoch": 0, "window": 0, "batch": 0, "carry": []})
        self._tokens = np.zeros(2, np.int64)  # running real (src, tgt) tokens in emitted global batches
        self._capacity = 0
        self.num_batches = 0

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The per-host ``(rows, length)`` batch shapes this iterator can yield (for ahead-of-time compilation)."""
        return [(rows // self.process_count, length) for rows, length in zip(self.rows, self.buckets)]

    # -- state -------------------------------------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """JSON-serialisable position: epoch, window, batches consumed in the window and the window's carry-in."""
        return {
            "seed": self.seed,
            "epoch": self._epoch,
            "window": self._window,
            "batch": self._batch,
            "carry": [int(i) for i in self._carry],
            "data": self._data_fingerprint,
            "layout": self._layout,
            "filled_rows": list(self._filled),
            "resumed": [dict(stage) for stage in self._stages],  # this window's batches under earlier layouts
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a position from :meth:`get_state`; the next batches are those an uninterrupted run would see."""
        for field, mine in (("seed", self.seed), ("data", self._data_fingerprint)):
            if field in state and state[field] != mine:
                raise DataError(
                    f"Data state has {field}={state[field]!r} but this iterator has {mine!r}: the training data or "
                    "seed changed since the checkpoint; use the original ones (or a new workdir)."
                )
        self._epoch, self._window, self._batch = int(state["epoch"]), int(state["window"]), int(state["batch"])
        self._stages: list[dict[str, Any]] = [dict(stage) for stage in state.get("resumed", [])]
        layout = state.get("layout", self._layout)
        if layout != self._layout:
            buckets, filled, pack, window = _parse_layout(layout)
            if (buckets, pack, window) != (self.buckets, self.pack, self.window):
                raise DataError(
                    f"The checkpoint's data packing ({layout}) differs from this run's ({self._layout}): rows of "
                    "other lengths or windows cannot continue its data order; resume with the checkpoint's "
                    "data.max_length, num_length_buckets, pack and shuffle_buffer.")
            # another number of devices, hosts or accumulation steps: the rest of the window in the new steps
            logger.info("Batch layout changed since the checkpoint (%s → %s): the rest of window %s is cut into "
                        "steps of the new layout; no pair is skipped or repeated.", layout, self._layout, self._window)
            self._stages.append({"filled_rows": state.get("filled_rows", filled), "batch": self._batch})
            self._batch = 0
        self._carry = np.asarray(state["carry"], np.int64)
        self._plan: tuple[list[tuple[int, list[list[int]]]], np.ndarray] | None = None

    # -- iteration ---------------------------------------------------------------------------------------------

    def _use_epoch_data(self, epoch: int) -> None:
        """Switches to ``resample(epoch)`` (once per epoch; plans and batches then use its lengths and ids)."""
        if self._resample is None or self._data_epoch == epoch:
            return
        data = self._resample(epoch)
        if len(data) != len(self._src_len):
            raise DataError(f"Resampled epoch {epoch} has {len(data)} pairs, not {len(self._src_len)}.")
        src_len, tgt_len = data.src_lengths, data.tgt_lengths
        longest = max(int(src_len[self.valid_ids].max()), int(tgt_len[self.valid_ids].max()))
        if longest > self.buckets[-1]:
            raise DataError(f"Resampled epoch {epoch} has a pair of {longest} tokens, over max_length.")
        self.data, self._src_len, self._tgt_len, self._data_epoch = data, src_len, tgt_len, epoch

    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.valid_ids)

    def _plan_window(self) -> tuple[list[tuple[int, list[list[int]]]], np.ndarray]:
        """Batches ``[(bucket, global rows)]`` of the current window, and the pairs carried to the next one."""
        if self._perm_epoch != self._epoch:
            self._perm, self._perm_epoch = self._permutation(self._epoch), self._epoch
        self._use_epoch_data(self._epoch)
        chunk = self._perm[self._window * self.window : (self._window + 1) * self.window]
        ids = np.concatenate([self._carry, chunk])
        per_bucket = pack_window(ids, self._src_len, self._tgt_len, self.buckets, self.pack)
        for k, stage in enumerate(self._stages):  # the rows the window's batches took under earlier layouts
            batches = self._cut(per_bucket, stage["filled_rows"], k)[0]
            taken = {id(row) for _, rows in batches[: stage["batch"]] for row in rows}
            per_bucket = [[row for row in rows if id(row) not in taken] for rows in per_bucket]
        return self._cut(per_bucket, self._filled, len(self._stages))

    def _cut(self, per_bucket: list[list[list[int]]], filled: Sequence[int], stage: int):
        """The window's rows as steps of ``filled`` rows per bucket, in a seeded order; the rest is carried."""
        batches, carry = [], []
        for b, (rows, n) in enumerate(zip(per_bucket, filled)):
            full = len(rows) // n * n
            batches += [(b, rows[j : j + n]) for j in range(0, full, n)]
            carry += [i for row in rows[full:] for i in row]
        key = [self.seed, self._epoch, self._window, 1] + ([stage] if stage else [])
        order = np.random.default_rng(key).permutation(len(batches))
        return [batches[j] for j in order.tolist()], np.asarray(carry, np.int64)

    def __iter__(self) -> TrainBatches:
        return self

    def __next__(self) -> Batch:
        while True:
            if self._plan is None:
                self._plan = self._plan_window()
            batches, carry_out = self._plan
            if self._batch < len(batches):
                b, rows = batches[self._batch]
                self._batch += 1
                return self._materialize(b, rows)
            num_windows = -(-len(self.valid_ids) // self.window)
            self._carry, self._batch, self._plan, self._stages = carry_out, 0, None, []
            self._window += 1
            if self._window >= num_windows:
                self._epoch, self._window = self._epoch + 1, 0
                logger.info("Data epoch %d begins; running statistics: %s", self._epoch, self.stats)

    def _materialize(self, b: int, rows: list[list[int]]) -> Batch:
        length = self.buckets[b]
        flat = np.asarray([i for row in rows for i in row], np.int64)
        self._tokens += (int(self._src_len[flat].sum()), int(self._tgt_len[flat].sum()))
        self._capacity += len(rows) * length
        self.num_batches += 1
        rows = rows + [[]] * self.plans[b].padding_rows  # empty rows complete the step's shape (batch_plan.py)
        per_host = len(rows) // self.process_count
        mine = rows[self.process_index * per_host : (self.process_index + 1) * per_host]
        return make_rows(self.data, mine, length)

    @property
    def stats(self) -> dict[str, float]:
        """Running statistics over the global batches yielded so far (the trainer can log them)."""
        cap = max(self._capacity, 1)
        return {
            "batches": self.num_batches,
            "epoch": self._epoch,
            "fill_rate": float(self._tokens.sum() / (2 * cap)),
            "src_fill_rate": float(self._tokens[0] / cap),
            "tgt_fill_rate": float(self._tokens[1] / cap),
            "src_tokens_per_batch": float(self._tokens[0] / max(self.num_batches, 1)),
            "tgt_tokens_per_batch": float(self._tokens[1] / max(self.num_batches, 1)),
            "dropped_too_long": self.num_dropped_too_long,
            "skipped_empty": self.data.num_skipped_empty,
        }


def _parse_layout(layout: str) -> tuple[list[int], list[int], bool, int]:
    """(buckets, filled rows per bucket, pack, window) of a state's ``layout`` string (TrainBatches._layout)."""
    m = re.fullmatch(r"(\[[\d, ]*\]):(\[.*\]):(True|False):(\d+)", layout)
    if m is None:
        raise DataError(f"Cannot read the checkpoint's batch layout {layout!r}.")
    plans = ast.literal_eval(m.group(2))
    return ast.literal_eval(m.group(1)), [filled for _, filled in plans], m.group(3) == "True", int(m.group(4))


def make_rows(data: TokenizedPairs, rows: Sequence[Sequence[int]], length: int) -> Batch:
    """Materializes rows of pair ids as a batch dict of int32 ``[len(rows), length]`` arrays (pad id 0)."""
    batch = {k: np.zeros((len(rows), length), np.int32) for k in BATCH_KEYS}  # zeros = PAD_ID
    ids = np.asarray([i for row in rows for i in row], np.int64)  # [pairs]
    row_of = np.repeat(np.arange(len(rows)), [len(row) for row in rows])  # [pairs]
    first = np.flatnonzero(np.r_[True, row_of[1:] != row_of[:-1]]) if len(ids) else ids
    seg = np.arange(len(ids)) - np.repeat(first, np.diff(np.r_[first, len(ids)])) + 1  # 1, 2, ... per row
    for key, flat, offsets in (("inputs", data.src, data.src_offsets), ("targets", data.tgt, data.tgt_offsets)):
        n = offsets[ids + 1] - offsets[ids]  # [pairs] tokens per pair
        ends = np.cumsum(n)
        pos = np.arange(int(ends[-1]) if len(ids) else 0) - np.repeat(ends - n, n)  # [tokens] position in its pair
        # column of each pair's first token: tokens of the earlier pairs of the same row
        row_start = np.repeat((ends - n)[first], np.diff(np.r_[first, len(ids)])) if len(ids) else n
        cols = np.repeat(ends - n - row_start, n) + pos
        r = np.repeat(row_of, n)
        batch[key][r, cols] = flat[np.repeat(offsets[ids], n) + pos]
        batch[f"{key}_segmentation"][r, cols] = np.repeat(seg, n)
        batch[f"{key}_position"][r, cols] = pos
    return batch


def eval_batches(
    pairs_ids: Sequence[tuple[Sequence[int], Sequence[int]]],
    batch_size: int,
    max_len: int,
    min_length: int = 8,
) -> list[Batch]:
    """Evaluation batches: every pair exactly once, one per row (never filtered or packed), grouped by length.

    Pairs are sorted by their longest side (stable) before they are cut into batches, so each batch is only as
    long as its own sentences need: a batch of short sentences is encoded over a short source and its beam search
    stops after a few steps, instead of every batch paying for the split's longest sentence. Each batch has
    ``batch_size`` rows and length ``min(max_len, next power of 2 ≥ its longest side)`` (a small set of shapes);
    the last batch is filled with all-padding rows. ``batch["index"]`` (int32 [batch_size]) is each row's
    position in the split, -1 for filler rows: outputs are put back in the split's order with it. Pairs longer
    than ``max_len`` (the model's position table) are truncated to ``max_len`` tokens, keeping the final EOS, with
    a warning.
    """
    if batch_size < 1:
        raise DataError(f"Evaluation batch size must be ≥ 1, got {batch_size}.")
    truncated: list[int] = []

    def clip(ids: Sequence[int], index: int) -> np.ndarray:
        ids = np.asarray(ids, np.int32)
        if len(ids) > max_len:
            truncated.append(index)
            ids = np.concatenate([ids[: max_len - 1], [EOS_ID]]).astype(np.int32)
        return ids

    pairs = [(clip(s, i), clip(t, i)) for i, (s, t) in enumerate(pairs_ids)]
    if truncated:
        logger.warning(
            "Truncated %d evaluation pairs longer than max_len=%d tokens (first: #%d).",
            len(set(truncated)),
            max_len,
            truncated[0],
        )
    order = sorted(range(len(pairs)), key=lambda i: max(len(pairs[i][0]), len(pairs[i][1])))
    batches = []
    for start in range(0, len(pairs), batch_size):
        chunk_index = order[start : start + batch_size]
        chunk = [pairs[i] for i in chunk_index]
        longest = max(max(len(s), len(t)) for s, t in chunk)
        length = min(max_len, max(min_length, 1 << (longest - 1).bit_length()))
        data = TokenizedPairs.from_lists(chunk)
        batch = make_rows(data, [[i] for i in range(len(chunk))] + [[]] * (batch_size - len(chunk)), length)
        batch["index"] = np.full(batch_size, -1, np.int32)
        batch["index"][: len(chunk)] = chunk_index
        batches.append(batch)
    return batches
