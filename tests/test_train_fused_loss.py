"""The fused projection + label-smoothed loss (train/loss.py) equals the plain composition, value and gradient."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax.train.loss import cross_entropy_sums, projected_cross_entropy_sums


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
