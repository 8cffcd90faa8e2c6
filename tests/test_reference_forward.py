"""The model's logits equal a plain-numpy Transformer written from the paper (tests/reference_transformer.py).

A 1+1-layer model (configs/tiny.py, fp32) with every parameter randomised (biases and LayerNorm gains too, so that
none is a no-op at its initial value) is run by ``Transformer.__call__`` and by the reference on the same
parameters, on a batch with padding; the logits must agree to 1e-5. This pins, in absolute terms: embeddings
× √d_model (§3.4), the interleaved sinusoids with base 10000 (§3.5), 1/√d_k attention with padding and causal
masks (§3.2), LayerNorm(x + Sublayer(x)) with the config's epsilon (§3.1), the ReLU FFN (§3.3) and the tied
pre-softmax projection (§3.4) — and the variants pre-LN, learned positions (Table 3 row E) and unshared
embeddings, and packed rows.
"""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from reference_transformer import forward
from transformer_jax.configs import tiny
from transformer_jax.model.transformer import Transformer

ATOL = RTOL = 1e-5

# Three sentence pairs with different amounts of padding (id 0) on both sides; one target fills its row.
INPUTS = np.array([[5, 6, 7, 8, 9, 10, 11],
                   [12, 13, 14, 0, 0, 0, 0],
                   [15, 16, 17, 18, 19, 0, 0]], np.int32)
TARGETS = np.array([[20, 21, 22, 23, 0, 0],
                    [24, 25, 26, 27, 28, 29],
                    [30, 31, 0, 0, 0, 0]], np.int32)

# Packed rows (the batch shapes above): two sentences in rows 0 and 2 (segments 1, 2, positions restarting at 0),
# one in row 1, then padding.
PACKED = {
    "inputs": np.array([[5, 6, 7, 8, 9, 10, 0], [11, 12, 13, 14, 0, 0, 0], [15, 16, 17, 18, 19, 20, 21]], np.int32),
    "inputs_segmentation": np.array([[1, 1, 1, 2, 2, 2, 0], [1, 1, 1, 1, 0, 0, 0], [1, 1, 2, 2, 2, 2, 2]], np.int32),
    "inputs_position": np.array([[0, 1, 2, 0, 1, 2, 0], [0, 1, 2, 3, 0, 0, 0], [0, 1, 0, 1, 2, 3, 4]], np.int32),
    "targets": np.array([[20, 21, 22, 23, 24, 0], [25, 26, 27, 0, 0, 0], [28, 29, 30, 31, 32, 33]], np.int32),
    "targets_segmentation": np.array([[1, 1, 2, 2, 2, 0], [1, 1, 1, 0, 0, 0], [1, 1, 1, 2, 2, 2]], np.int32),
    "targets_position": np.array([[0, 1, 0, 1, 2, 0], [0, 1, 2, 0, 0, 0], [0, 1, 2, 0, 1, 2]], np.int32),
}

VARIANTS = {
    "paper": {},
    "pre_ln": {"norm_position": "pre"},
    "learned_positions": {"positional": "learned"},
    "unshared_embeddings": {"share_embeddings": False},
    "fused_attention": {"attention_implementation": "xla"},  # jax.nn.dot_product_attention
}


def model_config(**overrides) -> ml_collections.ConfigDict:
    m = tiny.get_config().model
    m.dtype = "float32"
    m.layer_norm_epsilon = 1e-3  # the config's epsilon is used, not a constant: a large one shows in the logits
    m.update(overrides)
    return m


def randomised_model(m: ml_collections.ConfigDict, seed: int = 0) -> tuple[Transformer, dict]:
    """The model with biases ~ N(0, 0.1²) and LayerNorm gains ~ 1 + N(0, 0.2²); returns it and its parameters."""
    model = Transformer(m, rngs=nnx.Rngs(seed))
    state = nnx.state(model, nnx.Param)
    pure = nnx.to_pure_dict(state)
    rng = np.random.default_rng(seed + 1)

    def perturb(path, leaf):
        name = str(path[-1].key)
        if name == "scale":
            return leaf + jnp.asarray(0.2 * rng.standard_normal(leaf.shape), leaf.dtype)
        if name == "bias" or name.startswith("b_"):
            return leaf + jnp.asarray(0.1 * rng.standard_normal(leaf.shape), leaf.dtype)
        return leaf

    pure = jax.tree_util.tree_map_with_path(perturb, pure)
    nnx.replace_by_pure_dict(state, pure)
    nnx.update(model, state)
    return model, nnx.to_pure_dict(nnx.state(model, nnx.Param))


def model_logits(model: Transformer, batch: dict) -> np.ndarray:
    with jax.default_matmul_precision("highest"):
        return np.asarray(model(**{k: jnp.asarray(v) for k, v in batch.items()}))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_logits_equal_the_numpy_reference(variant):
    m = model_config(**VARIANTS[variant])
    model, params = randomised_model(m)
    batch = {"inputs": INPUTS, "targets": TARGETS}
    ours = model_logits(model, batch)
    reference, _ = forward(params, m, INPUTS, TARGETS)
    assert ours.shape == reference.shape == (*TARGETS.shape, m.vocab_size)
    assert np.abs(reference).max() > 1.0  # logits of a useful size: the tolerance is small against them
    np.testing.assert_allclose(ours, reference, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_packed_rows_equal_the_numpy_reference(norm_position):
    m = model_config(norm_position=norm_position)
    model, params = randomised_model(m, seed=3)
    ours = model_logits(model, PACKED)
    reference, _ = forward(params, m, **PACKED)
    np.testing.assert_allclose(ours, reference, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("ablation", [
    {"embed_scale": False},  # §3.4 without × √d_model
    {"pe_base": 1000.0},  # §3.5 with another base
    {"key_scale": "dk"},  # §3.2.1 with 1/d_k for 1/√d_k
    {"key_scale": "none"},
    {"residual": False},  # §3.1 LayerNorm(Sublayer(x)) without the residual
    {"causal_offset": 1},  # §3.2.3 letting position i see i + 1
    {"causal_offset": -1},  # … or only < i
])
def test_the_comparison_notices_each_paper_ingredient(ablation):
    """Each ingredient changes the reference's logits by far more than the tolerance (at real target positions)."""
    m = model_config()
    model, params = randomised_model(m)
    ours = model_logits(model, {"inputs": INPUTS, "targets": TARGETS})
    ablated, _ = forward(params, m, INPUTS, TARGETS, **ablation)
    real = TARGETS != 0
    assert np.abs(ablated - ours)[real].max() > 100 * ATOL


def test_layer_norm_epsilon_comes_from_the_config():
    m = model_config()
    model, params = randomised_model(m)
    other = model_config(layer_norm_epsilon=1e-6)
    ours = model_logits(model, {"inputs": INPUTS, "targets": TARGETS})
    reference, _ = forward(params, other, INPUTS, TARGETS)
    assert np.abs(ours - reference).max() > 100 * ATOL
