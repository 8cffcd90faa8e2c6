"""The beam search's per-step work at base size, alone (speed/NOTES.md, 2026-12-08): log-softmax over [B·K, V] and
three ways to take the top 2K of each sentence's K·V candidates, checked to give identical results.

    python experiments/results/speed/decode_2026-12-08/topk_microbench.py
"""

import time

import jax
import jax.numpy as jnp
import numpy as np

B, K, V = 32, 4, 37000  # the peers' base decode: 32 sentences, beam 4, 37K vocabulary


def softmax_only(logits, live):
    return jax.nn.log_softmax(logits, -1)


def one(logits, live):
    """As transformer_jax/decode/beam_search.py: one top_k over the flattened K·V candidates."""
    lp = jax.nn.log_softmax(logits, -1).reshape(B, K, V) + live[:, :, None]
    return jax.lax.top_k(lp.reshape(B, K * V), 2 * K)


def two(logits, live):
    """Top 2K per beam, then the top 2K of the K·2K."""
    lp = jax.nn.log_softmax(logits, -1).reshape(B, K, V) + live[:, :, None]
    v, i = jax.lax.top_k(lp, 2 * K)
    v2, j = jax.lax.top_k(v.reshape(B, 2 * K * K), 2 * K)
    return v2, jnp.take_along_axis(i.reshape(B, -1), j, 1) + (j // (2 * K)) * V


def blocked(logits, live, block=128):
    """Per beam: the 2K best 128-wide blocks by their maximum, the top 2K inside them; then across beams."""
    rows, v = logits.shape
    lse = jax.nn.logsumexp(logits, -1)
    x = jnp.pad(logits, ((0, 0), (0, (-v) % block)), constant_values=-jnp.inf).reshape(rows, -1, block)
    _, bi = jax.lax.top_k(x.max(-1), 2 * K)
    cand = jnp.take_along_axis(x, bi[:, :, None], 1)
    cv, ci = jax.lax.top_k(cand.reshape(rows, -1), 2 * K)
    tok = jnp.take_along_axis(bi, ci // block, 1) * block + ci % block
    cv = (cv - lse[:, None]).reshape(B, K, 2 * K) + live[:, :, None]
    v2, j = jax.lax.top_k(cv.reshape(B, 2 * K * K), 2 * K)
    return v2, jnp.take_along_axis(tok.reshape(B, -1), j, 1) + (j // (2 * K)) * V


def main():
    x = jnp.asarray(np.random.RandomState(0).randn(B * K, V).astype(np.float32))
    live = jnp.zeros((B, K), jnp.float32)
    reference = jax.jit(one)(x, live)
    for f in (softmax_only, one, two, blocked):
        g = jax.jit(f)
        jax.block_until_ready(g(x, live))
        tic, n = time.perf_counter(), 30
        for _ in range(n):
            jax.block_until_ready(g(x, live))
        same = "" if f is softmax_only else f"  identical: {bool(jnp.allclose(g(x, live)[0], reference[0]) and (g(x, live)[1] == reference[1]).all())}"
        print(f"{f.__name__}: {(time.perf_counter() - tic) / n * 1e3:.2f} ms{same}")


if __name__ == "__main__":
    main()
