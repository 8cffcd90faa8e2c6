"""Batch arithmetic at paper scale (data/batch_plan.py): §5.1's ~25000 tokens per step are real tokens, for any
hosts × devices × accumulation, and the trainer's row multiple counts each device once."""

import logging

import numpy as np
import pytest

from transformer_jax.configs import base
from transformer_jax.data.batch_plan import TOLERANCE, plan_bucket, plan_steps, plan_warnings
from transformer_jax.data.batching import TokenizedPairs, TrainBatches, bucket_lengths
from transformer_jax.data.tokenizer import EOS_ID
from transformer_jax.train.plan import layout_plan

PAPER_BUCKETS = bucket_lengths(256, 4)  # configs/base.py: max_length 256, 4 buckets → 32, 64, 128, 256
LAYOUTS = [(1, 1, 1), (1, 8, 1), (2, 4, 1), (8, 4, 1), (8, 4, 4), (64, 8, 1)]  # (processes, devices each, accum)


@pytest.mark.parametrize("fill_rate", [1.0, 0.93, 0.9])
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: "x".join(map(str, x)))
def test_every_bucket_within_3_percent_of_the_budget(layout, fill_rate):
    processes, devices, accum = layout
    config = base.get_config()
    config.train.grad_accum_steps = accum
    # the trainer's own arithmetic (train/plan.py): data-parallel devices of all hosts × accumulation, once each
    plan = layout_plan(config, processes, devices, [fill_rate] * len(PAPER_BUCKETS))
    assert plan.row_multiple == processes * devices * accum
    assert [b.length for b in plan.buckets] == PAPER_BUCKETS
    for bucket in plan.buckets:
        assert bucket.rows % plan.row_multiple == 0 and bucket.rows % processes == 0  # whole rows per device, host
        assert bucket.filled_rows <= bucket.rows
        assert abs(bucket.real_tokens / 25_000 - 1) <= TOLERANCE, (layout, bucket)


def test_full_rows_when_the_layout_allows_and_padding_rows_when_it_cannot():
    # 1 × 8 devices at fill 1.0: every bucket has a multiple of 8 within 3%, so no row is wasted.
    for plan in plan_steps(25_000, PAPER_BUCKETS, 8, [1.0] * 4):
        assert plan.padding_rows == 0
    assert plan_warnings(plan_steps(25_000, PAPER_BUCKETS, 8, [1.0] * 4), 25_000, 8) == []
    # 64 hosts × 8 chips: 25,000 tokens are fewer than one 64-token row per device; the step keeps the budget's real
    # tokens in round(ideal) rows and pads to 512, and says how much compute that wastes.
    plans = plan_steps(25_000, PAPER_BUCKETS, 512, [1.0] * 4)
    assert [p.rows for p in plans] == [1024, 512, 512, 512]
    assert [p.filled_rows for p in plans] == [781, 391, 195, 98]
    warnings = plan_warnings(plans, 25_000, 512)
    assert len(warnings) == 4 and all("empty padding" in w for w in warnings)
    assert "414 of 512 rows" in warnings[-1]


def test_aims_at_real_tokens_not_capacity():
    # at fill 0.9 a step needs more rows than tokens // length: 25000 / (256 · 0.9) = 108.5 rows
    plan = plan_bucket(25_000, 256, 1, 0.9)
    assert plan.rows == plan.filled_rows == 109
    assert plan.rows * 256 > 25_000  # capacity above the budget, real tokens on it
    assert plan_bucket(25_000, 256, 1, 1.0).rows == 98


def test_a_budget_below_a_few_rows_warns():
    plans = plan_steps(300, [256], 1, [1.0])  # 1.17 rows: one row is 15% short
    assert plans[0].filled_rows == 1
    (line,) = plan_warnings(plans, 300, 1)
    assert "-14.7% off" in line
    with pytest.raises(ValueError):
        plan_bucket(25_000, 256, 4, 0.0)


def make_pairs(n=3000, seed=0) -> TokenizedPairs:
    rng = np.random.default_rng(seed)
    ls = np.clip(rng.geometric(1 / 14, n), 2, 64)
    lt = np.clip(ls + rng.integers(-3, 4, n), 2, 64)
    return TokenizedPairs.from_lists([([5] * (a - 1) + [EOS_ID], [6] * (b - 1) + [EOS_ID]) for a, b in zip(ls, lt)])


@pytest.mark.parametrize("multiple, processes", [(1, 1), (4, 2), (16, 4)])
def test_real_tokens_per_step_match_the_budget_on_data(multiple, processes, caplog):
    """The iterator measures each bucket's fill rate and its steps then hold the budget in real tokens (on average
    over many steps), whatever the row multiple; before, ``rows × L ≤ budget`` gave only fill_rate × budget."""
    data = make_pairs()
    with caplog.at_level(logging.WARNING):
        it = TrainBatches(data, tokens_per_batch=2048, max_length=64, num_length_buckets=3, seed=0, window=1000,
                          row_multiple=multiple, process_count=processes)
    real = []
    for _ in range(60):
        batch = next(it)
        assert batch["inputs"].shape[0] * processes in it.rows
        real.append(it.stats["tgt_tokens_per_batch"])
    src, tgt = it.stats["src_tokens_per_batch"], it.stats["tgt_tokens_per_batch"]
    assert abs((src + tgt) / 2 / 2048 - 1) < 0.05, (src, tgt)
    assert 0.8 < it.stats["fill_rate"] < 1.0  # packed rows are not full: aiming at capacity would miss the budget
