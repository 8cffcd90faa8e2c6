"""Scaled dot-product and multi-head attention (§3.2), with padding/causal masks and a KV cache.

Shapes use B = batch, L = query length, S = key length, H = heads (h), K = d_k, V = d_v, D = d_model.
Queries, keys and values are tokens-major ([B, L, H, K]): the projection's matmul writes them that way, and the
per-head einsums read them as they are. (Heads-major [B, H, L, K] costs a transpose of every projection's input
and output in training on CPU.) The decoding caches are heads-major, keys transposed
([B, H, K, S]): a few queries per step read those fastest.

Two implementations of §3.2.1, chosen by ``model.attention_implementation`` when a function is traced
(`attention_implementation`): the einsums of `scaled_dot_product_attention` ("cpu", tuned for XLA:CPU, the
default there) and `jax.nn.dot_product_attention` ("xla", or "cudnn" for cuDNN's fused flash-attention kernel;
the default on GPU/TPU), see `fused_attention`. Cached decoding always takes the einsum path, on every backend:
a step has only K (beam) queries against a cache stored in the layout above, and its mask (each hypothesis's
ancestry, `beam_cache_mask`) is no mask type a fused kernel knows, so a fused call would gain nothing and cost a
copy of the whole cache into [B, S, H, K] every step. Attention-weight dropout in training (off in the paper)
takes the einsum path too: a fused kernel never forms the weights it would drop.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
from flax import nnx

from transformer_jax.model.dropout import dropout
from transformer_jax.model.linear import linear
from transformer_jax.model.params import dense_param, zeros_param
from transformer_jax.model.precision import platform

Mask = jax.Array  # bool [B, 1, L, S]: True where a query may attend to a key.

IMPLEMENTATIONS = ("auto", "cpu", "xla", "cudnn")  # model.attention_implementation (configs/base.py)


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


def window_mask(q_positions: jax.Array, k_positions: jax.Array, window: int) -> Mask:
    """Restricted self-attention (§4, Table 1 row 4): a query attends only to keys within distance ``window``.

    Distances are between POSITIONS within a sentence (``*_position``, restarting at 0 per packed sentence), not
    column indices; keys of other packed sentences are excluded by `padding_mask`, with which this is combined.
    In the decoder the causal mask (§3.2.3) then leaves j ∈ [i - window, i].

    Args:
      q_positions: int [B, L]; k_positions: int [B, S]; window: r > 0 (0 = full attention: use no window mask).
    Returns:
      bool [B, 1, L, S]: |position_q - position_k| ≤ r.
    """
    distance = jnp.abs(q_positions[:, :, None] - k_positions[:, None, :])
    return (distance <= window)[:, None]


BAND_BLOCK_MIN = 16  # smallest key block of `banded_attention` (smaller blocks cost more in overhead than they save)


@functools.partial(jax.tree_util.register_dataclass, data_fields=("segmentation", "position"),
                   meta_fields=("window", "block"))
@dataclasses.dataclass(frozen=True)
class BandMask:
    """Self-attention mask of restricted self-attention computed in blocks (`banded_attention`): O(n·r) work.

    With window r, query i only reaches keys j with |i - j| ≤ r (same sentence; within a packed sentence,
    positions and columns advance together). Cut the row into blocks of ``block`` ≥ r columns: the keys of a
    query in block n lie in blocks n-1, n, n+1. So each query block is scored against 3·block keys, not the
    whole row — Table 1's O(r·n·d) per layer instead of O(n²·d), for a constant block of a few times r.

    Attributes:
      segmentation, position: int [B, L] (segment ids, 0 = padding; positions within the sentence).
      window: r > 0; block: the block size (≥ r), static.
    """

    segmentation: jax.Array
    position: jax.Array
    window: int
    block: int

    @property
    def num_blocks(self) -> int:
        return -(-self.segmentation.shape[1] // self.block)

    def _blocked(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """x [B, L] → per query block (x [B, N, b], the keys' x of blocks n-1, n, n+1 [B, N, 3b]); padded 0."""
        b, n = self.block, self.num_blocks
        x = jnp.pad(x, ((0, 0), (0, n * b - x.shape[1])))
        return x.reshape(-1, n, b), neighbour_blocks(x.reshape(-1, n, b), axis=1)

    def band(self) -> jax.Array:
        """bool [B, 1, N, b, 3b]: query q of block n may attend to key s of blocks n-1..n+1 (padding, segments,
        window; the causal part is `banded_attention`'s)."""
        q_seg, k_seg = self._blocked(self.segmentation)
        q_pos, k_pos = self._blocked(self.position)
        allowed = (q_seg[..., :, None] == k_seg[..., None, :]) & (k_seg[..., None, :] != 0)
        return (allowed & (jnp.abs(q_pos[..., :, None] - k_pos[..., None, :]) <= self.window))[:, None]

    def dense(self) -> Mask:
        """The same mask as [B, 1, L, L] (`padding_mask` & `window_mask`)."""
        return padding_mask(self.segmentation, self.segmentation) & window_mask(self.position, self.position,
                                                                                self.window)


def neighbour_blocks(x: jax.Array, axis: int) -> jax.Array:
    """[..., N, b, ...] (blocks on ``axis``) → [..., N, 3b, ...]: block n's neighbours n-1, n, n+1 side by side
    (zeros beyond the ends)."""
    pad = [(0, 0)] * x.ndim
    pad[axis] = (1, 1)
    x = jnp.pad(x, pad)
    n = x.shape[axis] - 2
    parts = [jax.lax.slice_in_dim(x, i, i + n, axis=axis) for i in range(3)]
    return jnp.concatenate(parts, axis=axis + 1)


def band_or_dense_mask(segmentation: jax.Array, position: jax.Array, window: int) -> "Mask | BandMask":
    """Self-attention mask of a stack with restricted attention (window r > 0): blocked (`BandMask`) when the
    row is longer than three blocks of max(r, BAND_BLOCK_MIN), where blocks save work; else dense."""
    block = max(window, BAND_BLOCK_MIN)
    band = BandMask(segmentation, position, window, block)
    return band if segmentation.shape[1] > 3 * block else band.dense()


def banded_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: BandMask, causal: bool = False,
                     dropout_rate: float = 0.0, dropout_key: jax.Array | None = None) -> jax.Array:
    """Restricted self-attention (§4, Table 1 row 4) in blocks: the same result as `scaled_dot_product_attention`
    with ``mask.dense()``, in O(L·block) work and memory (`BandMask`).

    Args:
      q: [B, L, H, K]; k: [B, L, H, K]; v: [B, L, H, V]; causal: also keep key column ≤ query column.
    Returns:
      [B, L, H, V] in v's dtype.
    """
    length, b, n = q.shape[1], mask.block, mask.num_blocks

    def blocks(x: jax.Array) -> jax.Array:  # [B, L, H, X] → [B, N, b, H, X]
        x = jnp.pad(x, ((0, 0), (0, n * b - length), (0, 0), (0, 0)))
        return x.reshape(x.shape[0], n, b, *x.shape[2:])

    k_near, v_near = neighbour_blocks(blocks(k), axis=1), neighbour_blocks(blocks(v), axis=1)  # [B, N, 3b, H, X]
    logits = jnp.einsum("bnqhk,bnshk->bhnqs", blocks(q), k_near, preferred_element_type=jnp.float32)
    logits = logits / jnp.sqrt(q.shape[-1]).astype(jnp.float32)
    allowed = mask.band()  # [B, 1, N, b, 3b]
    if causal:  # key s of the 3b sits at column (n-1)·b + s, query q at n·b + q
        allowed = allowed & (jnp.arange(3 * b)[None, :] <= jnp.arange(b)[:, None] + b)
    logits = jnp.where(allowed, logits, jnp.finfo(jnp.float32).min)
    weights = jnp.where(allowed, jax.nn.softmax(logits, axis=-1), 0.0)
    weights = dropout(weights, dropout_rate, dropout_key)
    out = jnp.einsum("bhnqs,bnshv->bnqhv", weights.astype(v.dtype), v_near)
    return out.reshape(out.shape[0], n * b, *out.shape[3:])[:, :length]


def beam_cache_mask(slots: jax.Array, index: jax.Array, window: int = 0) -> Mask:
    """Self-attention mask of one decoding step over the beams' shared cache (`MultiHeadAttention.step`).

    Hypothesis j of sentence b may attend to cache row τ·K + s iff slot s holds its key/value for position τ
    (``slots[b, j, τ] == s``, its ancestry) and τ ≤ ``index`` (§3.2.3: no leftward information flow). Cache
    position τ is the target position τ (every sentence decodes in lockstep from position 0), so a ``window``
    r > 0 (restricted self-attention, `window_mask`) also requires τ ≥ ``index`` - r.

    Args:
      slots: int32 [B, K, T], each hypothesis's slot per position; index: int32 scalar, the current position;
      window: ``model.attention_window`` (0 = full attention).
    Returns:
      bool [B, 1, K, T·K].
    """
    batch, beams, length = slots.shape
    own = slots[:, :, :, None] == jnp.arange(beams, dtype=slots.dtype)  # [B, Kq, T, Ks]
    positions = jnp.arange(length)
    allowed = positions <= index
    if window > 0:
        allowed = allowed & (positions >= index - window)
    mask = own & allowed[:, None]
    return mask.reshape(batch, 1, beams, length * beams)


def scaled_dot_product_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, mask: Mask | None, dropout_rate: float = 0.0,
    dropout_key: jax.Array | None = None, cached: bool = False, causal: bool = False, return_weights: bool = False,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """§3.2.1: softmax(Q Kᵀ / √d_k) V, per head.

    Illegal connections are set to -inf-like values *before* the softmax and their weights are then exactly 0
    (also for fully masked query rows, e.g. padding queries). Logits and softmax are computed in float32.

    Args:
      q: [B, L, H, K]; k: [B, S, H, K] and v: [B, S, H, V], or with ``cached`` the decoding caches' layout
        k: [B, H, K, S] and v: [B, H, S, V] (`MultiHeadAttention.cache_layout`); mask: bool broadcastable to
        [B, H, L, S]; causal: also apply `causal_mask` (self-attention, L = S); return_weights: also return the
        attention weights softmax(QKᵀ/√d_k) (float32 [B, H, L, S], before dropout).
    Returns:
      [B, L, H, V] in v's dtype (and the weights with ``return_weights``).
    """
    d_k = q.shape[-1]
    if causal:
        mask = causal_mask(q.shape[1]) if mask is None else mask & causal_mask(q.shape[1])
    if cached:  # a few queries against long caches: move the queries, never the cache
        q = jnp.swapaxes(q, 1, 2)
    spec = "bhlk,bhks->bhls" if cached else "blhk,bshk->bhls"
    logits = jnp.einsum(spec, q, k, preferred_element_type=jnp.float32) / jnp.sqrt(d_k).astype(jnp.float32)
    if mask is not None:
        logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(logits, axis=-1)
    if mask is not None:
        weights = jnp.where(mask, weights, 0.0)  # exactly 0, even where a whole row is masked
    dropped = dropout(weights, dropout_rate, dropout_key)
    if cached:
        out = jnp.swapaxes(jnp.einsum("bhls,bhsv->bhlv", dropped.astype(v.dtype), v), 1, 2)
    else:
        out = jnp.einsum("bhls,bshv->blhv", dropped.astype(v.dtype), v)
    return (out, weights) if return_weights else out


def attention_implementation(name: str, q: jax.Array, v: jax.Array, mask: Mask | None) -> str:
    """Resolves ``model.attention_implementation`` when the caller is traced: "cpu", "xla" or "cudnn" (see
    `resolve_implementation`; the platform is the one traced for, precision.platform())."""
    lengths_even = mask is None or (q.shape[1] % 2 == 0 and v.shape[1] % 2 == 0)
    return resolve_implementation(name, platform(), q.dtype, max(q.shape[-1], v.shape[-1]), lengths_even)


def resolve_implementation(name: str, on: str, dtype: jnp.dtype, head_width: int, lengths_even: bool = True) -> str:
    """``model.attention_implementation`` on platform ``on`` for operands of ``dtype`` and ``head_width``.

    "auto" is "cpu" (the einsum path) on the CPU, else `fused_attention`: "cudnn" on GPU where its fused kernel
    takes these operands — bfloat16/float16, head size ≤ 128 and a multiple of 8, even lengths when a mask is
    given (it becomes the kernel's bias) — and "xla" otherwise (TPU, float32, …).
    """
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"Unknown model.attention_implementation {name!r}; valid: {', '.join(IMPLEMENTATIONS)}.")
    if name != "auto":
        return name
    if on == "cpu":
        return "cpu"
    fits_cudnn = (jnp.dtype(dtype) in (jnp.bfloat16, jnp.float16) and head_width % 8 == 0 and head_width <= 128
                  and lengths_even)
    return "cudnn" if on == "gpu" and fits_cudnn else "xla"


def fused_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: Mask | None, causal: bool = False,
                    implementation: str = "xla") -> jax.Array:
    """§3.2.1 through ``jax.nn.dot_product_attention``: the same results as `scaled_dot_product_attention`.

    Its layout is ours (tokens-major [B, L, H, K]). The masks map to its arguments as: the padding / packed-segment
    mask (bool [B, 1, L, S], True = may attend) → ``mask`` (cuDNN turns it into an additive bias); causal →
    ``is_causal`` (cuDNN then skips the blocks above the diagonal). It needs one head size for Q, K and V, so
    when d_k ≠ d_v (Table 3 rows B) the narrower of Q/K and V is zero-padded — q·k and the weighted sums do not
    change, the scale stays 1/√d_k — and the output sliced back to d_v. Fully masked query rows (padding) are
    set to exactly 0, as in the einsum path (the kernel averages V there).

    Args:
      q: [B, L, H, K]; k: [B, S, H, K]; v: [B, S, H, V], one dtype; mask: bool broadcastable to [B, H, L, S];
      causal: self-attention with `causal_mask` (L = S); implementation: "xla" or "cudnn".
    Returns:
      [B, L, H, V] in v's dtype.
    """
    d_k, d_v = q.shape[-1], v.shape[-1]
    width = max(d_k, d_v)

    def widen(x: jax.Array) -> jax.Array:
        return jnp.pad(x, ((0, 0),) * 3 + ((0, width - x.shape[-1]),)) if x.shape[-1] < width else x

    out = jax.nn.dot_product_attention(widen(q), widen(k), widen(v), mask=mask, scale=d_k**-0.5, is_causal=causal,
                                       implementation=implementation)[..., :d_v]
    if mask is None:  # (is_causal alone leaves every query its own key)
        return out
    if causal:
        mask = mask & causal_mask(q.shape[1])
    live = jnp.transpose(jnp.any(mask, axis=-1), (0, 2, 1))[..., None]  # [B, L, H or 1, 1]: any key allowed
    return jnp.where(live, out, jnp.zeros((), out.dtype))


class MultiHeadAttention(nnx.Module):
    """§3.2.2: MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    ``num_heads``, ``d_k`` and ``d_v`` are independent (Table 3 rows A and B): W^Q, W^K map d_model → h·d_k,
    W^V maps d_model → h·d_v and W^O maps h·d_v → d_model. ``implementation``: see `attention_implementation`.

    With ``capture_weights`` set (`Transformer.attention_weights` sets it for one forward pass), each call also
    records its weights — float32 [B, H, L, S], computed by the einsum path — as ``nnx.Intermediate``
    "attention_weights", for figures (Figures 3–5); training and decoding never set it.
    """

    capture_weights: bool = False

    def __init__(self, d_model: int, num_heads: int, d_k: int, d_v: int, *, use_bias: bool,
                 dropout_rate: float, dtype: jnp.dtype, rngs: nnx.Rngs, implementation: str = "auto"):
        if implementation not in IMPLEMENTATIONS:
            raise ValueError(f"Unknown model.attention_implementation {implementation!r}; "
                             f"valid: {', '.join(IMPLEMENTATIONS)}.")
        if implementation in ("xla", "cudnn") and dropout_rate > 0:
            raise ValueError(f"attention_dropout_rate > 0 drops attention weights, which "
                             f"attention_implementation={implementation!r} (jax.nn.dot_product_attention) never "
                             f"forms; use 'auto' (the einsum path where weights are dropped) or 'cpu'.")
        self.num_heads, self.d_k, self.d_v, self.dtype = num_heads, d_k, d_v, dtype
        self.dropout_rate, self.implementation = dropout_rate, implementation
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

    def attend(self, q: jax.Array, k: jax.Array, v: jax.Array, mask: "Mask | BandMask | None",
               dropout_key: jax.Array | None = None, cached: bool = False, causal: bool = False) -> jax.Array:
        """Attention over given K/V (in the caches' layout with ``cached``), then W^O: returns [B, L, D].

        ``causal`` adds `causal_mask` to ``mask`` (masked self-attention, §3.2.3). A `BandMask` (restricted
        self-attention on long rows) takes `banded_attention`, on every backend.
        """
        if isinstance(mask, BandMask):
            if not self.capture_weights:
                heads = banded_attention(q, k, v, mask, causal, self.dropout_rate, dropout_key)
                return linear(heads, self.w_o[...], self.b_o[...] if self.use_bias else None, axes=2,
                              dtype=self.dtype)
            mask = mask.dense()  # figures want the weights as [B, H, L, L]: the same mask, dense
        dropping = dropout_key is not None and self.dropout_rate > 0
        implementation = "cpu" if cached or dropping else attention_implementation(self.implementation, q, v, mask)
        if self.capture_weights:
            heads, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout_rate, dropout_key, cached,
                                                          causal, return_weights=True)
            self.sow(nnx.Intermediate, "attention_weights", weights)
        elif implementation == "cpu":
            heads = scaled_dot_product_attention(q, k, v, mask, self.dropout_rate, dropout_key, cached, causal)
        else:
            heads = fused_attention(q, k, v, mask, causal, implementation)  # [B, L, H, V]
        return linear(heads, self.w_o[...], self.b_o[...] if self.use_bias else None, axes=2, dtype=self.dtype)

    def __call__(self, x_q: jax.Array, x_kv: jax.Array, mask: "Mask | BandMask | None",
                 dropout_key: jax.Array | None = None, causal: bool = False) -> jax.Array:
        """Queries from ``x_q`` [B, L, D], keys and values from ``x_kv`` [B, S, D]; returns [B, L, D]."""
        k, v = self.key_value(x_kv)
        return self.attend(self.query(x_q), k, v, mask, dropout_key, causal=causal)

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
