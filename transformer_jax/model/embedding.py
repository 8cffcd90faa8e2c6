"""Embeddings and the pre-softmax projection (§3.4) and positional encodings (§3.5)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.model.params import normal_param


class Embedding(nnx.Module):
    """§3.4: learned embeddings × √d_model; ``logits`` reuses the same matrix as the pre-softmax projection."""

    def __init__(self, vocab_size: int, d_model: int, *, scale: bool, dtype: jnp.dtype, rngs: nnx.Rngs):
        # N(0, d_model^-1): after the ×√d_model scale the embeddings have unit variance (tensor2tensor).
        self.table = normal_param(rngs, (vocab_size, d_model), ("vocab", "embed"), stddev=d_model**-0.5)
        self.scale = float(np.sqrt(d_model)) if scale else 1.0
        self.dtype = dtype

    def __call__(self, ids: jax.Array) -> jax.Array:
        """int [B, L] → [B, L, D] (compute dtype)."""
        return (jnp.take(self.table[...], ids, axis=0) * self.scale).astype(self.dtype)

    def logits(self, x: jax.Array) -> jax.Array:
        """[B, L, D] → float32 logits [B, L, vocab] (x Eᵀ, the shared pre-softmax linear transformation)."""
        return jnp.einsum("bld,vd->blv", x.astype(self.dtype), self.table[...].astype(self.dtype),
                          preferred_element_type=jnp.float32)


@functools.lru_cache(maxsize=8)
def sinusoidal_table(max_len: int, d_model: int) -> np.ndarray:
    """§3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    Sines and cosines are interleaved exactly as written in the paper (even columns sin, odd columns cos).
    Returns float32 [max_len, d_model].
    """
    pos = np.arange(max_len, dtype=np.float64)[:, None]
    two_i = np.arange(0, d_model, 2, dtype=np.float64)[None, :]
    angles = pos / np.power(10000.0, two_i / d_model)
    table = np.zeros((max_len, d_model), dtype=np.float64)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : d_model // 2])
    return table.astype(np.float32)


class PositionalEncoding(nnx.Module):
    """§3.5 positions added to the embeddings: "sinusoidal", "learned" (Table 3 row E) or "none".

    Positions are given explicitly so packed rows restart at 0 for every sentence.
    """

    KINDS = ("sinusoidal", "learned", "none")

    def __init__(self, kind: str, max_len: int, d_model: int, *, rngs: nnx.Rngs):
        if kind not in self.KINDS:
            raise ValueError(f"Unknown positional encoding {kind!r}; valid: {', '.join(self.KINDS)}.")
        self.kind = kind
        if kind == "learned":
            self.table = normal_param(rngs, (max_len, d_model), ("length", "embed"), stddev=d_model**-0.5)
        self.max_len, self.d_model = max_len, d_model

    def __call__(self, x: jax.Array, positions: jax.Array) -> jax.Array:
        """x [B, L, D] + PE[positions] (positions int [B, L] or [1, L])."""
        if self.kind == "none":
            return x
        # The sinusoid table is a compile-time constant (not a parameter, not checkpointed).
        table = self.table[...] if self.kind == "learned" else sinusoidal_table(self.max_len, self.d_model)
        return x + jnp.take(table, positions, axis=0).astype(x.dtype)
