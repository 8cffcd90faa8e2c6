"""Scaled dot-product and multi-head attention (§3.2), with padding/causal masks and a KV cache.

Shapes use B = batch, L = query length, S = key length, H = heads (h), K = d_k, V = d_v, D = d_model.
Queries, keys and values are tokens-major ([B, L, H, K]): the projection's matmul writes them that way, and the
per-head einsums read them as they are. (Heads-major [B, H, L, K] cost a transpose of every projection's input
and output in training on CPU — a 9% slower base step.) The decoding caches are heads-major, keys transposed
([B, H, K, S]): a few queries per step read those fastest.
"""

import jax
import jax.numpy as jnp
from flax import nnx

from transformer_jax.model.dropout import dropout
from transformer_jax.model.linear import linear
from transformer_jax.model.params import dense_param, zeros_param

Mask = jax.Array  # bool [B, 1, L, S]: True where a query may attend to a key.


def padding_mask(q_segments: jax.Array, k_segments: jax.Array) -> Mask:
    """Allows attention only within the same segment and never to padding (segment 0), §3.2.3.

    Args:
      q_segments: int [B, L] segment ids of the queries (1, 2, … for packed sentences; 0 = padding).
      k_segments: int [B, S] segment ids of the keys.
    Returns:
      bool [B, 1, L, S].
    """
    same = q_segments[:, :, None] == k_segments[:, None, :]
    return (same & (k_segments[:, None, :] != 0))[:, None]


def causal_mask(length: int) -> Mask:
    """§3.2.3: position i may attend to positions ≤ i ("preventing leftward information flow"). [1, 1, L, L]."""
    return jnp.tril(jnp.ones((length, length), dtype=bool))[None, None]


def beam_cache_mask(slots: jax.Array, index: jax.Array) -> Mask:
    """Self-attention mask of one decoding step over the beams' shared cache (`MultiHeadAttention.step`).

    Hypothesis j of sentence b may attend to cache row τ·K + s iff slot s holds its key/value for position τ
    (``slots[b, j, τ] == s``, its ancestry) and τ ≤ ``index`` (§3.2.3: no leftward information flow).

    Args:
      slots: int32 [B, K, T], each hypothesis's slot per position; index: int32 scalar, the current position.
    Returns:
      bool [B, 1, K, T·K].
    """
    batch, beams, length = slots.shape
    own = slots[:, :, :, None] == jnp.arange(beams, dtype=slots.dtype)  # [B, Kq, T, Ks]
    mask = own & (jnp.arange(length) <= index)[:, None]
    return mask.reshape(batch, 1, beams, length * beams)


def scaled_dot_product_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, mask: Mask | None, dropout_rate: float = 0.0,
    dropout_key: jax.Array | None = None, cached: bool = False,
) -> jax.Array:
    """§3.2.1: softmax(Q Kᵀ / √d_k) V, per head.

    Illegal connections are set to -inf-like values *before* the softmax and their weights are then exactly 0
    (also for fully masked query rows, e.g. padding queries). Logits and softmax are computed in float32.

    Args:
      q: [B, L, H, K]; k: [B, S, H, K] and v: [B, S, H, V], or with ``cached`` the decoding caches' layout
        k: [B, H, K, S] and v: [B, H, S, V] (`MultiHeadAttention.cache_layout`); mask: bool broadcastable to
        [B, H, L, S].
    Returns:
      [B, L, H, V] in v's dtype.
    """
    d_k = q.shape[-1]
    if cached:  # a few queries against long caches: move the queries, never the cache
        q = jnp.swapaxes(q, 1, 2)
    spec = "bhlk,bhks->bhls" if cached else "blhk,bshk->bhls"
    logits = jnp.einsum(spec, q, k, preferred_element_type=jnp.float32) / jnp.sqrt(d_k).astype(jnp.float32)
    if mask is not None:
        logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(logits, axis=-1)
    if mask is not None:
        weights = jnp.where(mask, weights, 0.0)  # exactly 0, even where a whole row is masked
    weights = dropout(weights, dropout_rate, dropout_key)
    if cached:
        return jnp.swapaxes(jnp.einsum("bhls,bhsv->bhlv", weights.astype(v.dtype), v), 1, 2)
    return jnp.einsum("bhls,bshv->blhv", weights.astype(v.dtype), v)


class MultiHeadAttention(nnx.Module):
    """§3.2.2: MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    ``num_heads``, ``d_k`` and ``d_v`` are independent (Table 3 rows A and B): W^Q, W^K map d_model → h·d_k,
    W^V maps d_model → h·d_v and W^O maps h·d_v → d_model.
    """

    def __init__(self, d_model: int, num_heads: int, d_k: int, d_v: int, *, use_bias: bool,
                 dropout_rate: float, dtype: jnp.dtype, rngs: nnx.Rngs):
        self.num_heads, self.d_k, self.d_v, self.dtype = num_heads, d_k, d_v, dtype
        self.dropout_rate = dropout_rate
        self.use_bias = use_bias
        self.w_q = dense_param(rngs, (d_model, num_heads, d_k), ("embed", "heads", "kv"), fan_in=d_model)
        self.w_k = dense_param(rngs, (d_model, num_heads, d_k), ("embed", "heads", "kv"), fan_in=d_model)
        self.w_v = dense_param(rngs, (d_model, num_heads, d_v), ("embed", "heads", "kv"), fan_in=d_model)
        self.w_o = dense_param(rngs, (num_heads, d_v, d_model), ("heads", "kv", "embed"), fan_in=num_heads * d_v)
        if use_bias:
            self.b_q = zeros_param((num_heads, d_k), ("heads", "kv"))
            self.b_k = zeros_param((num_heads, d_k), ("heads", "kv"))
            self.b_v = zeros_param((num_heads, d_v), ("heads", "kv"))
            self.b_o = zeros_param((d_model,), ("embed",))

    def _project(self, x: jax.Array, w: nnx.Param, b: nnx.Param | None) -> jax.Array:
        return linear(x, w[...], b[...] if b is not None else None, dtype=self.dtype)

    def query(self, x: jax.Array) -> jax.Array:
        """[B, L, D] → Q [B, L, H, K]."""
        return self._project(x, self.w_q, self.b_q if self.use_bias else None)

    def key_value(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """[B, S, D] → K [B, S, H, K], V [B, S, H, V]."""
        k = self._project(x, self.w_k, self.b_k if self.use_bias else None)
        v = self._project(x, self.w_v, self.b_v if self.use_bias else None)
        return k, v

    @staticmethod
    def cache_layout(k: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
        """K [B, S, H, K], V [B, S, H, V] → the decoding caches' K [B, H, K, S] (transposed), V [B, H, S, V]."""
        return jnp.transpose(k, (0, 2, 3, 1)), jnp.swapaxes(v, 1, 2)

    def cached_key_value(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Cross-attention K/V of a sentence in the caches' layout (computed once per sentence when decoding)."""
        return self.cache_layout(*self.key_value(x))

    def attend(self, q: jax.Array, k: jax.Array, v: jax.Array, mask: Mask | None,
               dropout_key: jax.Array | None = None, cached: bool = False) -> jax.Array:
        """Attention over given K/V (in the caches' layout with ``cached``), then W^O: returns [B, L, D]."""
        heads = scaled_dot_product_attention(q, k, v, mask, self.dropout_rate, dropout_key, cached)  # [B, L, H, V]
        return linear(heads, self.w_o[...], self.b_o[...] if self.use_bias else None, axes=2, dtype=self.dtype)

    def __call__(self, x_q: jax.Array, x_kv: jax.Array, mask: Mask | None,
                 dropout_key: jax.Array | None = None) -> jax.Array:
        """Queries from ``x_q`` [B, L, D], keys and values from ``x_kv`` [B, S, D]; returns [B, L, D]."""
        k, v = self.key_value(x_kv)
        return self.attend(self.query(x_q), k, v, mask, dropout_key)

    def step(self, x: jax.Array, k_cache: jax.Array, v_cache: jax.Array, mask: Mask,
             index: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """One decoding step of masked self-attention for the K hypotheses (beams) of each sentence.

        The cache is never reordered when beams are re-ranked. Beam slot j writes its key/value for position τ
        at row τ·K + j (in place). So the K queries of a sentence attend over all T·K rows of the sentence at
        once (one [K, T·K] matmul per head instead of K [1, T] ones), masked (`beam_cache_mask`) to their own
        ancestry, kept by the beam search, and to positions ≤ ``index``.

        Args:
          x: [B, K, D], the current position's input of each hypothesis.
          k_cache: [B, H, K_dim, T*K] (keys transposed, see `cache_layout`);
          v_cache: [B, H, T*K, V_dim] (T = max decode length).
          mask: bool [B, 1, K, T*K] from `beam_cache_mask`.
          index: int32 scalar, the current position.
        Returns:
          ([B, K, D], k_cache, v_cache) with each slot's key/value written at its row ``index``.
        """
        beams = x.shape[1]
        k, v = self.cached_key_value(x)  # the K hypotheses are this step's "length" axis
        # Position-major rows (τ·K + j): this step's K entries are one contiguous block, written in place.
        k_cache = jax.lax.dynamic_update_slice_in_dim(k_cache, k.astype(k_cache.dtype), index * beams, axis=3)
        v_cache = jax.lax.dynamic_update_slice_in_dim(v_cache, v.astype(v_cache.dtype), index * beams, axis=2)
        return self.attend(self.query(x), k_cache, v_cache, mask, cached=True), k_cache, v_cache
