"""model.dropout_rng="hash": dropout masks from a keyed integer hash of each element's index (model/dropout.py).

What must hold for it to stand in for threefry: the keep rate and the expectation are exact as in §5.4, a mask is a
function of its key, masks of different keys (sites, steps) and neighbouring elements are independent, the bits
are uniform, and the model routes the configured generator to every site (which dropout.py's docstring claims).
The mesh-independence of the masks is checked with the 8-device training in tests/test_train_sharding.py.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.configs import tiny
from transformer_jax.model.dropout import DropoutKey, dropout, fold, hash_bits, with_generator
from transformer_jax.model.transformer import Transformer

HASH = "hash"


def hashed(key: int) -> DropoutKey:
    return DropoutKey(jax.random.key(key), HASH)


@pytest.mark.parametrize("rate,shape", [(0.1, (512, 512)), (0.3, (8, 33, 65)), (0.5, (4001,))])
def test_keep_rate_and_expectation_are_exact(rate, shape):
    x = jnp.ones(shape, jnp.float32)
    y = np.asarray(dropout(x, rate, hashed(0)))
    p_keep = round((1 - rate) * 2**32) / 2**32
    kept = y != 0
    np.testing.assert_allclose(y[kept], 1 / p_keep, rtol=1e-6)
    sigma = math.sqrt(p_keep * (1 - p_keep) / y.size)
    assert abs(kept.mean() - p_keep) < 5 * sigma
    assert abs(y.mean() - 1.0) < 5 * sigma / p_keep


def test_a_mask_is_a_function_of_its_key_and_keys_give_independent_masks():
    x = jnp.ones((256, 1024), jnp.float32)
    rate = 0.5
    one = np.asarray(dropout(x, rate, hashed(1))) != 0
    np.testing.assert_array_equal(np.asarray(dropout(x, rate, hashed(1))) != 0, one)
    # another seed, and two sites folded from one key (fold keeps the generator): agreement ½ as for independent
    # masks at rate ½ (σ = 1/1024 on 2^18 elements)
    others = [hashed(2), fold(hashed(1), 0), fold(hashed(1), 1), fold(fold(hashed(1), 0), 1)]
    assert all(k.generator == HASH for k in others)
    masks = [one] + [np.asarray(dropout(x, rate, k)) != 0 for k in others]
    for i in range(len(masks)):
        for j in range(i):
            assert abs((masks[i] == masks[j]).mean() - 0.5) < 5 / 1024, (i, j)


def test_neighbouring_elements_are_independent_and_bits_are_uniform():
    bits = np.asarray(hash_bits(jax.random.key(3), (1024, 1024)))
    assert len(np.unique(bits)) == bits.size  # a bijection of the index: no repeated word within an array
    for b in (0, 15, 16, 31):  # single bits: fair, and uncorrelated with the next element along each axis
        bit = ((bits >> b) & 1).astype(np.float64)
        assert abs(bit.mean() - 0.5) < 5 * 0.5 / 1024
        for axis in (0, 1):
            a, c = np.moveaxis(bit, axis, 0)[:-1], np.moveaxis(bit, axis, 0)[1:]
            assert abs(np.corrcoef(a.ravel(), c.ravel())[0, 1]) < 5 / 1024, (b, axis)
    counts = np.bincount((bits >> 28).ravel(), minlength=16)  # the top 4 bits: 16 equally likely values
    expected = bits.size / 16
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 45  # 15 degrees of freedom: P(χ² > 45) ≈ 1e-4


def test_bfloat16_input_is_upcast_with_an_exact_scale():
    y = dropout(jnp.ones((64, 512), jnp.bfloat16), 0.1, hashed(0))
    assert y.dtype == jnp.float32
    kept = np.asarray(y)[np.asarray(y) != 0]
    np.testing.assert_allclose(kept, 2**32 / round(0.9 * 2**32), rtol=1e-7)


def test_the_generator_is_checked_and_a_tagged_key_keeps_its_own():
    with pytest.raises(ValueError, match="dropout_rng must be one of threefry, hash; got 'philox'"):
        with_generator(jax.random.key(0), "philox")
    assert with_generator(None, HASH) is None
    assert with_generator(jax.random.key(0), HASH).generator == HASH
    assert with_generator(hashed(0), "threefry").generator == HASH
    m = tiny.get_config().model
    m.dropout_rng = "philox"
    with pytest.raises(ValueError, match="dropout_rng"):
        Transformer(m, rngs=nnx.Rngs(0))


def _model(generator: str | None, **rates) -> Transformer:
    m = tiny.get_config().model
    m.dtype = "float32"
    m.update(rates)
    if generator is None:
        del m["dropout_rng"]  # a run folder written before the field existed
    else:
        m.dropout_rng = generator
    return Transformer(m, rngs=nnx.Rngs(0))


SRC = jnp.asarray([[5, 6, 7, 8, 9, 10], [11, 12, 13, 0, 0, 0]], jnp.int32)
TGT = jnp.asarray([[14, 15, 16, 17, 0], [18, 19, 20, 21, 22]], jnp.int32)


@pytest.mark.parametrize("knob", ["dropout_rate", "attention_dropout_rate", "relu_dropout_rate"])
def test_the_model_draws_every_site_with_its_generator(knob):
    """Each kind of site alone: with "hash" the forward has no threefry draw (random_bits) at all, its output is
    random in the key and not threefry's; an old config without the field trains exactly as threefry."""
    rates = {"dropout_rate": 0.0, "attention_dropout_rate": 0.0, "relu_dropout_rate": 0.0, knob: 0.3}
    hashed_model, threefry_model, legacy = _model(HASH, **rates), _model("threefry", **rates), _model(None, **rates)
    key = jax.random.key(1)
    jaxpr = str(jax.make_jaxpr(lambda k: hashed_model(SRC, TGT, dropout_key=k))(key))
    assert "random_bits" not in jaxpr
    assert "random_bits" in str(jax.make_jaxpr(lambda k: threefry_model(SRC, TGT, dropout_key=k))(key))
    one, two = hashed_model(SRC, TGT, dropout_key=key), hashed_model(SRC, TGT, dropout_key=jax.random.key(2))
    plain, threefry = hashed_model(SRC, TGT), threefry_model(SRC, TGT, dropout_key=key)
    assert jnp.abs(one - two).max() > 1e-3 and jnp.abs(one - plain).max() > 1e-3
    assert jnp.abs(one - threefry).max() > 1e-3
    np.testing.assert_array_equal(np.asarray(hashed_model(SRC, TGT, dropout_key=key)), np.asarray(one))
    np.testing.assert_array_equal(np.asarray(legacy(SRC, TGT, dropout_key=key)), np.asarray(threefry))


def test_more_than_2_to_the_32_elements_is_refused():
    with pytest.raises(ValueError, match="more than 2\\^32 elements"):
        jax.eval_shape(lambda k: hash_bits(k, (1 << 17, 1 << 16)), jax.random.key(0))
