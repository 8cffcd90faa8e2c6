"""Tests for token-budget batching (§5.1): packing invariants, determinism, exact resume, host slices, eval."""

import json
import logging
from collections import Counter

import numpy as np
import pytest

from transformer_jax.data.batching import (
    BATCH_KEYS,
    TokenizedPairs,
    TrainBatches,
    bucket_lengths,
    eval_batches,
    pack_window,
)
from transformer_jax.data.sources import DataError
from transformer_jax.data.tokenizer import EOS_ID

OFFSET = 10  # token id of pair i is OFFSET + i (EOS last), so every token says which pair it came from


def make_data(n=600, seed=0, longest=70):
    rng = np.random.default_rng(seed)
    ls = np.clip(rng.geometric(1 / 14, n), 2, longest)  # ≥ 2 tokens: every segment names its pair
    lt = np.clip(ls + rng.integers(-3, 4, n), 2, longest)
    pairs = [
        ([OFFSET + i] * (a - 1) + [EOS_ID], [OFFSET + i] * (b - 1) + [EOS_ID]) for i, (a, b) in enumerate(zip(ls, lt))
    ]
    return TokenizedPairs.from_lists(pairs)


def make_iter(data, **kw):
    args = {"tokens_per_batch": 512, "max_length": 64, "num_length_buckets": 3, "seed": 0, "window": 200}
    return TrainBatches(data, **{**args, **kw})


def pairs_in(batch, data):
    """Checks the packed layout of every row and returns the pair ids of the batch, row by row."""
    rows = []
    for r in range(batch["inputs"].shape[0]):
        sides = []
        for side in ("inputs", "targets"):
            tok, seg, pos = (batch[k][r] for k in (side, f"{side}_segmentation", f"{side}_position"))
            n_real = int((seg > 0).sum())
            assert (seg[n_real:] == 0).all() and (tok[n_real:] == 0).all() and (pos[n_real:] == 0).all()
            assert (tok[:n_real] > 0).all()  # padding only at the end of the row
            ids = []
            for s in range(1, int(seg.max(initial=0)) + 1):
                where = np.flatnonzero(seg == s)
                assert len(where) >= 2 and (np.diff(where) == 1).all()  # contiguous, numbered in order
                assert pos[where].tolist() == list(range(len(where)))  # positions restart at 0
                assert tok[where[-1]] == EOS_ID and (tok[where[:-1]] == tok[where[0]]).all()
                ids.append(int(tok[where[0]]) - OFFSET)
            sides.append(ids)
        assert sides[0] == sides[1]  # segment s is the same pair on both sides
        rows.append(sides[0])
    return rows


def test_buckets_and_rows():
    assert bucket_lengths(256, 4) == [32, 64, 128, 256]
    assert bucket_lengths(100, 3) == [25, 50, 100]


def test_pack_window_uses_every_pair_once_and_fits():
    data = make_data()
    ids = np.random.default_rng(1).permutation(len(data))
    buckets = [16, 32, 64]
    ids = ids[np.maximum(data.src_lengths[ids], data.tgt_lengths[ids]) <= 64]
    rows = pack_window(ids, data.src_lengths, data.tgt_lengths, buckets)
    flat = [i for bucket_rows in rows for row in bucket_rows for i in row]
    assert sorted(flat) == sorted(ids.tolist())
    for length, bucket_rows in zip(buckets, rows):
        for row in bucket_rows:
            assert data.src_lengths[row].sum() <= length and data.tgt_lengths[row].sum() <= length
            first = max(data.src_lengths[row[0]], data.tgt_lengths[row[0]])
            assert length == min(b for b in buckets if b >= first)  # the row's first pair picks the bucket
    unpacked = pack_window(ids, data.src_lengths, data.tgt_lengths, buckets, pack=False)
    assert all(len(row) == 1 for bucket_rows in unpacked for row in bucket_rows)


def test_packed_batches_layout_and_token_accounting():
    data = make_data()
    it = make_iter(data, row_multiple=4)
    for _ in range(12):
        batch = next(it)
        rows, length = batch["inputs"].shape
        assert set(batch) == set(BATCH_KEYS) and all(
            v.dtype == np.int32 and v.shape == (rows, length) for v in batch.values()
        )
        plan = it.plans[[16, 32, 64].index(length)]
        assert rows == plan.rows and rows % 4 == 0
        assert not batch["inputs"][plan.filled_rows :].any()  # the plan's padding rows are empty
        ids = [i for row in pairs_in(batch, data) for i in row]
        assert len(ids) == len(set(ids))
        n_src = int((batch["inputs_segmentation"] > 0).sum())
        n_tgt = int((batch["targets_segmentation"] > 0).sum())
        assert n_src == data.src_lengths[ids].sum() and n_tgt == data.tgt_lengths[ids].sum()  # all tokens there
    assert it.stats["batches"] == 12 and 0.7 < it.stats["fill_rate"] <= 1.0


def test_every_pair_once_per_epoch_and_long_pairs_dropped():
    data = make_data(longest=90)
    it = make_iter(data)
    assert it.num_dropped_too_long == int(((data.src_lengths > 64) | (data.tgt_lengths > 64)).sum()) > 0
    seen = Counter()
    while True:
        batch = next(it)
        if it.get_state()["epoch"] > 0:
            seen.update(it.get_state()["carry"])  # epoch-0 pairs carried into epoch 1
            break
        seen.update(i for row in pairs_in(batch, data) for i in row)
    assert set(seen.values()) == {1} and sorted(seen) == it.valid_ids.tolist()


def test_same_seed_same_batches():
    data = make_data()
    a, b, c = make_iter(data), make_iter(data), make_iter(data, seed=1)
    batches = [(next(a), next(b), next(c)) for _ in range(5)]
    assert all(np.array_equal(x["inputs"], y["inputs"]) for x, y, _ in batches)
    assert not all(
        x["inputs"].shape == z["inputs"].shape and np.array_equal(x["inputs"], z["inputs"]) for x, _, z in batches
    )


@pytest.mark.parametrize("skip", [0, 37])  # 37 batches cross windows and an epoch boundary
def test_resume_gives_identical_next_batches(skip):
    data = make_data()
    it = make_iter(data, row_multiple=2)
    for _ in range(skip + 5):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    expected = [next(it) for _ in range(5)]
    resumed = make_iter(data, row_multiple=2)
    resumed.set_state(state)
    for want in expected:
        got = next(resumed)
        assert all(np.array_equal(got[k], want[k]) for k in BATCH_KEYS)
    assert resumed.get_state() == it.get_state()
    with pytest.raises(DataError, match="data or seed changed"):
        make_iter(make_data(seed=1), row_multiple=2).set_state(state)
    with pytest.raises(DataError, match="seed"):
        make_iter(data, row_multiple=2, seed=3).set_state(state)
    other_packing = make_iter(data, row_multiple=2, num_length_buckets=2)
    with pytest.raises(DataError, match="data packing .* differs"):
        other_packing.set_state(state)


def _global_pairs(hosts, data) -> list[int]:
    """The pair ids of one global step: every host's next batch, rows in host order."""
    return [i for h in hosts for row in pairs_in(next(h), data) for i in row]


def _epoch_pairs(hosts, data, seen: Counter) -> Counter:
    """Steps until epoch 1 begins; adds the pairs seen (and those carried into epoch 1) to ``seen``."""
    while True:
        pairs = _global_pairs(hosts, data)
        state = hosts[0].get_state()
        if state["epoch"] > 0:  # that step was epoch 1's first: count epoch 0's pairs carried into it instead
            seen.update(state["carry"])
            return seen
        seen.update(pairs)


@pytest.mark.parametrize("before, after", [((2, 4), (1, 2)), ((1, 2), (2, 8)), ((2, 8), (2, 4))])
def test_resume_on_another_layout_skips_and_repeats_no_pair(before, after):
    """2 hosts → 1, 1 → 2 and 16 → 8 devices, resumed mid-window (and again mid-window with a third layout): the
    pairs of epoch 0 are each seen exactly once, as in an uninterrupted run — the window's rows already taken are
    recomputed under the checkpoint's layout and left out."""
    data = make_data(n=900)

    def hosts(layout):
        count, multiple = layout
        return [make_iter(data, row_multiple=multiple, process_index=i, process_count=count, window=600)
                for i in range(count)]

    uninterrupted = _epoch_pairs(hosts(before), data, Counter())
    assert set(uninterrupted.values()) == {1}
    first = hosts(before)
    seen = Counter()
    for _ in range(7):  # mid-window (each window has more steps than this)
        seen.update(_global_pairs(first, data))
    state = json.loads(json.dumps(first[0].get_state()))
    assert state["batch"] == 7 and state["window"] == 0
    second = hosts(after)
    for h in second:
        h.set_state(state)
    for _ in range(3):
        seen.update(_global_pairs(second, data))
    state = json.loads(json.dumps(second[0].get_state()))
    assert state["resumed"] == [{"filled_rows": first[0].get_state()["filled_rows"], "batch": 7}]
    third = hosts((1, 1))  # and once more, still in the same window
    for h in third:
        h.set_state(state)
    assert _epoch_pairs(third, data, seen) == uninterrupted
    assert third[0].get_state()["resumed"] == []  # the next window is cut under one layout again


def test_host_slices_are_disjoint_and_cover_the_global_batch():
    data = make_data()
    whole = make_iter(data, row_multiple=4)
    hosts = [make_iter(data, row_multiple=4, process_index=i, process_count=2) for i in range(2)]
    assert hosts[0].shapes == [(rows // 2, length) for rows, length in whole.shapes]
    for _ in range(6):
        full, parts = next(whole), [next(h) for h in hosts]
        assert parts[0]["inputs"].shape == parts[1]["inputs"].shape
        ids = [[i for row in pairs_in(p, data) for i in row] for p in parts]
        assert not set(ids[0]) & set(ids[1])
        for k in BATCH_KEYS:
            assert np.array_equal(np.concatenate([parts[0][k], parts[1][k]]), full[k])
    with pytest.raises(DataError, match="hosts"):
        make_iter(data, row_multiple=1, process_count=2, tokens_per_batch=3 * 64)


def test_unpacked_batches_one_pair_per_row():
    data = make_data()
    it = make_iter(data, pack=False)
    for _ in range(5):
        batch = next(it)
        assert batch["inputs_segmentation"].max(axis=1).tolist() == [1] * batch["inputs"].shape[0]
    assert it.stats["fill_rate"] < make_filled(data)


def make_filled(data):
    it = make_iter(data)
    for _ in range(20):
        next(it)
    return it.stats["fill_rate"]


def test_eval_batches_keep_every_sentence_once_grouped_by_length(caplog):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, 23).tolist() + [100]
    pairs = [([OFFSET + i] * (n - 1) + [EOS_ID], [EOS_ID]) for i, n in enumerate(lengths)]
    with caplog.at_level(logging.WARNING):
        batches = eval_batches(pairs, batch_size=5, max_len=64)
    assert "Truncated 1" in caplog.text
    assert len(batches) == 5
    index = np.concatenate([b["index"] for b in batches])
    assert sorted(index.tolist()) == [-1] + list(range(24)) and index[-1] == -1  # filler rows at the end
    longest = [max(min(lengths[i], 64), 1) for i in index if i >= 0]
    assert longest == sorted(longest)  # grouped by length: each batch is as short as its sentences allow
    assert [b["inputs"].shape[1] for b in batches] == sorted(b["inputs"].shape[1] for b in batches)
    for b in batches:
        length = b["inputs"].shape[1]
        assert b["inputs"].shape == (5, length) and (length in (8, 16, 32, 64))
        for row, i in enumerate(b["index"]):
            src = b["inputs"][row][b["inputs_segmentation"][row] > 0]
            if i < 0:
                assert not b["inputs"][row].any() and not b["targets"][row].any()
                continue
            want = pairs[i][0] if lengths[i] <= 64 else pairs[i][0][:63] + [EOS_ID]
            assert src.tolist() == want
    assert eval_batches([], batch_size=4, max_len=8) == []
