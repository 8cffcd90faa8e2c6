"""Shared pieces of the benchmarks: the peer shapes, the fp32 matmul ceiling, and a timing loop.

Shapes are those of ../shared/bench/peers (PEERS.md), so our numbers sit beside HF Marian, torch.nn.Transformer
and CTranslate2 measured on the same machine.
"""

import statistics
import time

import jax
import jax.numpy as jnp
import ml_collections

from transformer_jax.configs import base

SHAPES = {
    "tiny": dict(d_model=128, layers=2, num_heads=4, d_ff=512, vocab_size=8000),
    "small": dict(d_model=256, layers=3, num_heads=4, d_ff=1024, vocab_size=8000),
    "base": dict(d_model=512, layers=6, num_heads=8, d_ff=2048, vocab_size=37000),
}


def shape_config(name: str, dtype: str = "float32") -> ml_collections.ConfigDict:
    """configs/base.py with the model resized to one of the peer shapes (d_k = d_v = d_model / h)."""
    s = SHAPES[name]
    c = base.get_config()
    m = c.model
    m.d_model, m.d_ff, m.num_heads, m.vocab_size = s["d_model"], s["d_ff"], s["num_heads"], s["vocab_size"]
    m.d_k = m.d_v = s["d_model"] // s["num_heads"]
    m.num_encoder_layers = m.num_decoder_layers = s["layers"]
    m.dtype = dtype
    return c


def matmul_peak_gflops(n: int = 2048, iters: int = 20) -> float:
    """Best-iteration fp32 GFLOP/s of an n³ matmul with XLA on this machine (the MFU denominator)."""
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
    b = jax.random.normal(jax.random.PRNGKey(1), (n, n), jnp.float32)
    f = jax.jit(jnp.dot)
    f(a, b).block_until_ready()
    best = float("inf")
    for _ in range(iters):
        t = time.perf_counter()
        f(a, b).block_until_ready()
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


def timed(fn, min_iters: int = 5, budget_s: float = 20.0, warmup: int = 2) -> list[float]:
    """Seconds per call of ``fn`` (which must block), after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times, start = [], time.perf_counter()
    while len(times) < min_iters or time.perf_counter() - start < budget_s:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        if len(times) >= 200:
            break
    return times


def summary(times: list[float]) -> dict:
    return {"median_s": statistics.median(times), "best_s": min(times), "iters": len(times),
            "cv": statistics.pstdev(times) / statistics.mean(times)}
