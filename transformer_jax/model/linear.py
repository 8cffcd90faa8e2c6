"""The position-wise linear maps of §3.2.2 (W^Q, W^K, W^V, W^O) and §3.3 (W_1, W_2) as one 2-D matmul each.

``linear(x, w)`` contracts the last ``axes`` axes of ``x`` with the first ``axes`` axes of ``w`` by flattening
both into one [tokens, in] · [in, out] product (free reshapes of row-major arrays) and unflattening the result.
Written as ``jnp.einsum`` the same products let XLA's CPU backend pick the operand order and layouts itself; at
the base shape it then transposed every projection's input, weight and output (an einsum of [B, L, D] with
[D, H, K] into [B, L, H, K] ran as Wᵀ · Xᵀ), work this form does not do.
"""

import math

import jax
import jax.numpy as jnp


def linear(x: jax.Array, w: jax.Array, b: jax.Array | None = None, *, axes: int = 1,
           dtype: jnp.dtype | None = None) -> jax.Array:
    """x [..., *in] · w [*in, *out] (+ b [*out]) → [..., *out], with len(in) = ``axes``; computed in ``dtype``.

    ``b`` is added in ``dtype`` too; parameters are cast from their float32 storage (§ mixed precision).
    """
    dtype = dtype or x.dtype
    lead, inner = x.shape[: x.ndim - axes], x.shape[x.ndim - axes:]
    if w.shape[:axes] != inner:
        raise ValueError(f"linear: x [..., {inner}] does not match w {w.shape} on its first {axes} axes.")
    out = w.shape[axes:]
    k = math.prod(inner)
    y = jnp.dot(x.reshape(-1, k).astype(dtype), w.reshape(k, -1).astype(dtype))
    if b is not None:
        y = y + b.reshape(-1).astype(dtype)
    return y.reshape(*lead, *out)
