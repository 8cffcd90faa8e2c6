"""The fused projection + label-smoothed loss (train/loss.py) equals the plain composition, value and gradient."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax.train.loss import cross_entropy_sums, projected_cross_entropy_sums, projected_rdrop_sums


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1, 0.3])
def test_fused_projection_loss_matches_reference(label_smoothing):
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    hidden = jax.random.normal(k[0], (2, 6, 8))
    table = jax.random.normal(k[1], (13, 8))
    targets = jax.random.randint(k[2], (2, 6), 1, 13).at[1, 4:].set(0)  # padding is ignored

    def reference(h, t):
        s = cross_entropy_sums(jnp.einsum("bld,vd->blv", h, t), targets, label_smoothing)
        return s["loss"] + 0.3 * s["nll"], s

    def fused(h, t):
        s = projected_cross_entropy_sums(h, t, targets, label_smoothing)
        return s["loss"] + 0.3 * s["nll"], s

    (_, s1), g1 = jax.value_and_grad(reference, argnums=(0, 1), has_aux=True)(hidden, table)
    (_, s2), g2 = jax.value_and_grad(fused, argnums=(0, 1), has_aux=True)(hidden, table)
    for key in ("loss", "nll", "tokens"):
        np.testing.assert_allclose(s2[key], s1[key], rtol=1e-6)
    assert float(s2["tokens"]) == 10.0
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(b, a, atol=2e-6)


@pytest.mark.parametrize("rdrop", [False, True])
def test_fused_backward_never_transposes_the_logits_gradient(rdrop):
    """The backward pass contracts d logits [tokens, V] where it lies: a [V, tokens] copy of it (what XLA's CPU
    backend emitted for R-Drop's ``d_logitsᵀ · hidden`` einsum, ~10% of a Multi30k step) must not appear."""
    vocab, tokens, d = 96, 48, 16
    table = jnp.ones((vocab, d))
    if rdrop:
        hidden, targets = jnp.ones((4, 2, 6, d)), jnp.ones((4, 6), jnp.int32)
        sums = lambda h, w: projected_rdrop_sums(h, w, targets, 0.1, 5.0)
    else:
        hidden, targets = jnp.ones((8, 6, d)), jnp.ones((8, 6), jnp.int32)
        sums = lambda h, w: projected_cross_entropy_sums(h, w, targets, 0.1)
    grad = jax.jit(jax.grad(lambda h, w: sums(h, w)["loss"], argnums=(0, 1)))
    hlo = grad.lower(hidden, table).compile().as_text()
    assert re.search(rf"= f32\[{tokens},{vocab}\]", hlo)  # the gradient itself is there, in its own layout
    assert not re.search(rf"= f32\[{vocab},{tokens}\]", hlo)
