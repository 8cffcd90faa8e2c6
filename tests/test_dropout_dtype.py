"""§5.4 dropout in a bfloat16 model: kept elements scaled by 1/P(keep) to float32 precision (model/precision.py).

1/P(keep) is not a bfloat16 number (1/0.9 would round to 1.109375: E[dropout(x)] = 0.9985·x), so dropout of a
bfloat16 tensor returns float32, and the residual sum and LayerNorm that consume it run in float32.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.configs import tiny
from transformer_jax.model.dropout import dropout, keep_threshold
from transformer_jax.model.layers import LayerNorm, Residual
from transformer_jax.model.transformer import Transformer

RATES = (0.1, 0.3)


@pytest.mark.parametrize("rate", RATES)
def test_bfloat16_kept_elements_are_scaled_exactly(rate):
    x = jax.random.normal(jax.random.key(0), (64, 257)).astype(jnp.bfloat16)
    y = dropout(x, rate, jax.random.key(1))
    kept = np.asarray(y) != 0
    assert 0.5 < kept.mean() < 1
    scale = np.float32(65536 / keep_threshold(rate))
    np.testing.assert_array_equal(np.asarray(y, np.float32)[kept], scale * np.asarray(x, np.float32)[kept])
    assert y.dtype == jnp.float32  # (the exact product is no bfloat16 number)


@pytest.mark.parametrize("rate", RATES)
def test_bfloat16_dropout_of_ones_has_mean_one(rate):
    """E[dropout(1)] = P(keep) · kept value = 1 exactly (to float32 precision), and so is a 4M-element mean:
    its standard error is ≤ 3e-4, while the bfloat16-rounded scale's 0.9985 (rate 0.1) is 1.5e-3 away."""
    n = 1 << 22
    y = np.asarray(dropout(jnp.ones((1024, n // 1024), jnp.bfloat16), rate, jax.random.key(2)), np.float64)
    kept_values = np.unique(y[y != 0])
    assert kept_values.size == 1
    p_keep = keep_threshold(rate) / 65536
    assert abs(p_keep * kept_values[0] - 1.0) < 1e-7
    sigma = math.sqrt(p_keep * (1 - p_keep) / n) / p_keep
    assert abs(y.mean() - 1.0) < 4 * sigma


def test_the_residual_sum_sees_the_exact_value():
    """Pre-LN: x + Dropout(Sublayer(·)) is float32 and exact; post-LN: LayerNorm of that exact float32 sum,
    returned in the compute dtype (the next matmul's input)."""
    d, rate, key = 64, 0.1, jax.random.key(3)
    x = jax.random.normal(jax.random.key(4), (4, 8, d)).astype(jnp.bfloat16)
    s = jax.random.normal(jax.random.key(5), (4, 8, d)).astype(jnp.bfloat16)
    scale = np.float32(65536 / keep_threshold(rate))
    kept = np.asarray(dropout(jnp.ones_like(s), rate, key)) != 0
    exact = np.asarray(x, np.float32) + np.where(kept, scale * np.asarray(s, np.float32), 0)

    pre = Residual(d, norm_position="pre", dropout_rate=rate, epsilon=1e-6, dtype=jnp.bfloat16)
    out = pre(x, lambda y: s, key)
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(out), exact, rtol=2e-7, atol=0)

    post = Residual(d, norm_position="post", dropout_rate=rate, epsilon=1e-6, dtype=jnp.bfloat16)
    out = post(x, lambda y: s, key)
    assert out.dtype == jnp.bfloat16
    reference = LayerNorm(d, 1e-6, jnp.bfloat16)(jnp.asarray(exact))
    np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(reference, np.float32))


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_bfloat16_model_keeps_its_stream_in_the_compute_dtype(norm_position):
    """With dropout on, the encoder memory and the decoder output (the loss's input) stay bfloat16; logits fp32."""
    m = tiny.get_config().model
    m.update({"vocab_size": 50, "max_len": 16, "dtype": "bfloat16", "norm_position": norm_position})
    model = Transformer(m, rngs=nnx.Rngs(0))
    src = jnp.array([[5, 6, 7, 0]], jnp.int32)
    tgt = jnp.array([[8, 9, 10, 11]], jnp.int32)
    key = jax.random.key(6)
    memory = model.encode(src, dropout_key=key)
    hidden = model.decode_hidden(tgt, memory, src, dropout_key=key)
    assert memory.dtype == hidden.dtype == jnp.bfloat16
    assert model(src, tgt, dropout_key=key).dtype == jnp.float32
