"""Encoder and decoder layers (§3.1) and the position-wise feed-forward network (§3.3).

Each sublayer is wrapped as in §3.1/§5.4: ``LayerNorm(x + Dropout(Sublayer(x)))`` (post-LN, the paper), or
``x + Dropout(Sublayer(LayerNorm(x)))`` with ``norm_position="pre"`` (tensor2tensor v2+, the Flax WMT example).
The residual sum and LayerNorm are float32; LayerNorm writes the compute dtype (precision.py).
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx

from transformer_jax.model.attention import BandMask, Mask, MultiHeadAttention
from transformer_jax.model.dropout import dropout, fold
from transformer_jax.model.linear import linear
from transformer_jax.model.params import dense_param, ones_param, zeros_param
from transformer_jax.model.precision import compute_dtype


class LayerNorm(nnx.Module):
    """Layer normalization (Ba et al., 2016), computed in float32, with gain and bias.

    Returns ``dtype`` (the compute dtype: the next matmul's input), or x's dtype when None.
    """

    def __init__(self, d_model: int, epsilon: float, dtype: jnp.dtype | None = None):
        self.scale = ones_param((d_model,), ("embed",))
        self.bias = zeros_param((d_model,), ("embed",))
        self.epsilon, self.dtype = epsilon, dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        y = x.astype(jnp.float32)
        mean = y.mean(-1, keepdims=True)
        var = jnp.square(y - mean).mean(-1, keepdims=True)
        y = (y - mean) * jax.lax.rsqrt(var + self.epsilon)
        return (y * self.scale[...] + self.bias[...]).astype(x.dtype if self.dtype is None else self.dtype)


class FeedForward(nnx.Module):
    """§3.3: FFN(x) = max(0, x W1 + b1) W2 + b2, inner size d_ff."""

    def __init__(self, d_model: int, d_ff: int, *, use_bias: bool, relu_dropout_rate: float, dtype: jnp.dtype,
                 rngs: nnx.Rngs):
        self.w_1 = dense_param(rngs, (d_model, d_ff), ("embed", "mlp"), fan_in=d_model)
        self.w_2 = dense_param(rngs, (d_ff, d_model), ("mlp", "embed"), fan_in=d_ff)
        self.use_bias, self.relu_dropout_rate, self.dtype = use_bias, relu_dropout_rate, dtype
        if use_bias:
            self.b_1 = zeros_param((d_ff,), ("mlp",))
            self.b_2 = zeros_param((d_model,), ("embed",))

    def __call__(self, x: jax.Array, dropout_key: jax.Array | None = None) -> jax.Array:
        h = jax.nn.relu(linear(x, self.w_1[...], self.b_1[...] if self.use_bias else None, dtype=self.dtype))
        h = dropout(h, self.relu_dropout_rate, dropout_key)
        return linear(h, self.w_2[...], self.b_2[...] if self.use_bias else None, dtype=self.dtype)


class Residual(nnx.Module):
    """§3.1 residual connection + LayerNorm around one sublayer, with dropout on its output (§5.4).

    The sum is float32 (dropout's float32 output in a bfloat16 model is added exactly); post-LN returns the compute
    ``dtype`` (LayerNorm's output), pre-LN the float32 sum (the residual stream stays float32).
    """

    def __init__(self, d_model: int, *, norm_position: str, dropout_rate: float, epsilon: float,
                 dtype: jnp.dtype | None = None):
        if norm_position not in ("post", "pre"):
            raise ValueError(f"norm_position must be 'post' (the paper) or 'pre', got {norm_position!r}.")
        self.norm = LayerNorm(d_model, epsilon, dtype)
        self.pre = norm_position == "pre"
        self.dropout_rate = dropout_rate

    def __call__(self, x: jax.Array, sublayer: Callable[[jax.Array], jax.Array],
                 dropout_key: jax.Array | None) -> jax.Array:
        f32 = jnp.float32  # (no-ops in a float32 model)
        if self.pre:
            return x.astype(f32) + dropout(sublayer(self.norm(x)), self.dropout_rate, dropout_key).astype(f32)
        return self.norm(x.astype(f32) + dropout(sublayer(x), self.dropout_rate, dropout_key).astype(f32))


def _attention(m, rngs: nnx.Rngs) -> MultiHeadAttention:
    # (run folders written before the field existed have no attention_implementation: "auto", base.py's default)
    return MultiHeadAttention(m.d_model, m.num_heads, m.d_k, m.d_v, use_bias=m.use_bias,
                              dropout_rate=m.attention_dropout_rate, dtype=compute_dtype(m.dtype), rngs=rngs,
                              implementation=m.get("attention_implementation", "auto"))


def _ffn(m, rngs: nnx.Rngs) -> FeedForward:
    return FeedForward(m.d_model, m.d_ff, use_bias=m.use_bias, relu_dropout_rate=m.relu_dropout_rate,
                       dtype=compute_dtype(m.dtype), rngs=rngs)


def _residual(m) -> Residual:
    return Residual(m.d_model, norm_position=m.norm_position, dropout_rate=m.dropout_rate,
                    epsilon=m.layer_norm_epsilon, dtype=compute_dtype(m.dtype))


class EncoderLayer(nnx.Module):
    """§3.1 encoder layer: multi-head self-attention, then the FFN, each in a residual + LayerNorm."""

    def __init__(self, m, *, rngs: nnx.Rngs):
        self.self_attention, self.self_attention_residual = _attention(m, rngs), _residual(m)
        self.ffn, self.ffn_residual = _ffn(m, rngs), _residual(m)

    def __call__(self, x: jax.Array, mask: Mask | BandMask, dropout_key: jax.Array | None = None) -> jax.Array:
        x = self.self_attention_residual(
            x, lambda y: self.self_attention(y, y, mask, fold(dropout_key, 0)), fold(dropout_key, 1))
        return self.ffn_residual(x, lambda y: self.ffn(y, fold(dropout_key, 2)), fold(dropout_key, 3))


class DecoderLayer(nnx.Module):
    """§3.1 decoder layer: masked self-attention, encoder-decoder attention, FFN (each residual + LayerNorm).

    The self-attention adds the causal mask (§3.2.3) to the given ``self_mask`` (padding / packed segments).
    """

    def __init__(self, m, *, rngs: nnx.Rngs):
        self.self_attention, self.self_attention_residual = _attention(m, rngs), _residual(m)
        self.cross_attention, self.cross_attention_residual = _attention(m, rngs), _residual(m)
        self.ffn, self.ffn_residual = _ffn(m, rngs), _residual(m)

    def __call__(self, y: jax.Array, memory: jax.Array, self_mask: Mask | BandMask, cross_mask: Mask,
                 dropout_key: jax.Array | None = None) -> jax.Array:
        y = self.self_attention_residual(
            y, lambda z: self.self_attention(z, z, self_mask, fold(dropout_key, 0), causal=True), fold(dropout_key, 1))
        y = self.cross_attention_residual(
            y, lambda z: self.cross_attention(z, memory, cross_mask, fold(dropout_key, 2)), fold(dropout_key, 3))
        return self.ffn_residual(y, lambda z: self.ffn(z, fold(dropout_key, 4)), fold(dropout_key, 5))

    def step(self, y: jax.Array, cross_kv: tuple[jax.Array, jax.Array], cross_mask: Mask,
             kv_cache: tuple[jax.Array, jax.Array], self_mask: Mask,
             index: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        """One cached decoding step for the K hypotheses of each sentence: y [B, K, D].

        Cross-attention K ([B, H, d_k, S]) and V were computed once per sentence and are shared by its K
        hypotheses (K queries each); ``self_mask`` is `beam_cache_mask` of their ancestries.
        """
        new_kv = []

        def self_attend(z):
            out, k, v = self.self_attention.step(z, *kv_cache, self_mask, index)
            new_kv.extend((k, v))
            return out

        y = self.self_attention_residual(y, self_attend, None)
        y = self.cross_attention_residual(
            y, lambda z: self.cross_attention.attend(self.cross_attention.query(z), *cross_kv, cross_mask,
                                                     cached=True), None)
        return self.ffn_residual(y, self.ffn, None), tuple(new_kv)
