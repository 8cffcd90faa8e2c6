"""R-Drop (train/loss.py, train/step.py; Liang et al. 2021, not the paper's): the fused loss equals the plain
composition in value and gradient, and the train step pairs each row with its own second dropout sample."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tiny_setup as tiny
from transformer_jax import sharding
from transformer_jax.train.loss import cross_entropy_sums, projected_cross_entropy_sums, projected_rdrop_sums
from transformer_jax.train.step import init_state, make_setup, make_train_step, passes_per_row, rdrop_alpha_from_config

K = jax.random.split(jax.random.PRNGKey(0), 3)
HIDDEN = jax.random.normal(K[0], (3, 2, 5, 8))  # [B, copies, T, D]
TABLE = jax.random.normal(K[1], (11, 8))
TARGETS = jax.random.randint(K[2], (3, 5), 1, 11).at[0, 3:].set(0)  # 13 real tokens


def reference(hidden, table, label_smoothing, alpha):
    """Liang et al.'s CE₁ + CE₂ + α·½(KL(p₁‖p₂) + KL(p₂‖p₁)), halved, from log_softmax and autodiff."""
    logits = jnp.einsum("bctd,vd->bctv", hidden, table)
    ce = [cross_entropy_sums(logits[:, c], TARGETS, label_smoothing) for c in (0, 1)]
    log_p1, log_p2 = jax.nn.log_softmax(logits[:, 0]), jax.nn.log_softmax(logits[:, 1])
    kl_12 = (jnp.exp(log_p1) * (log_p1 - log_p2)).sum(-1)
    kl_21 = (jnp.exp(log_p2) * (log_p2 - log_p1)).sum(-1)
    kl = (0.5 * (kl_12 + kl_21) * (TARGETS != 0)).sum()
    return {"loss": 0.5 * (ce[0]["loss"] + ce[1]["loss"]) + 0.5 * alpha * kl,
            "nll": 0.5 * (ce[0]["nll"] + ce[1]["nll"]), "kl": kl}


@pytest.mark.parametrize("label_smoothing,alpha", [(0.0, 1.0), (0.2, 5.0), (0.1, 0.0)])
def test_fused_rdrop_matches_reference(label_smoothing, alpha):
    fused = lambda h, t: projected_rdrop_sums(h, t, TARGETS, label_smoothing, alpha)
    want, got = reference(HIDDEN, TABLE, label_smoothing, alpha), fused(HIDDEN, TABLE)
    assert float(got["tokens"]) == 13.0
    assert float(got["kl"]) > 1.0  # the two copies differ, so the KL term is exercised
    for key in ("loss", "nll", "kl"):
        np.testing.assert_allclose(got[key], want[key], rtol=1e-6)
    # every output's gradient, with unequal cotangents so that each one's share of d_logits is checked
    objective = lambda sums: sums["loss"] + 0.3 * sums["nll"] + 0.7 * sums["kl"]
    g_want = jax.grad(lambda h, t: objective(reference(h, t, label_smoothing, alpha)), argnums=(0, 1))(HIDDEN, TABLE)
    g_got = jax.grad(lambda h, t: objective(fused(h, t)), argnums=(0, 1))(HIDDEN, TABLE)
    for a, b in zip(g_want, g_got):  # fp32 rounding, amplified by α up to 5
        np.testing.assert_allclose(b, a, atol=1e-5, rtol=1e-5)


def test_identical_copies_give_the_plain_loss_and_gradient():
    """Two equal samples: no divergence, and the loss is §5.4's label-smoothed loss of one (with its gradient)."""
    one = HIDDEN[:, 0]
    both = jnp.stack([one, one], axis=1)
    plain = lambda h, t: projected_cross_entropy_sums(h, t, TARGETS, 0.1)["loss"]
    rdrop = lambda h, t: projected_rdrop_sums(jnp.stack([h, h], axis=1), t, TARGETS, 0.1, 5.0)["loss"]
    sums = projected_rdrop_sums(both, TABLE, TARGETS, 0.1, 5.0)
    assert abs(float(sums["kl"])) < 1e-5
    np.testing.assert_allclose(sums["loss"], plain(one, TABLE), rtol=1e-6)
    for a, b in zip(jax.grad(plain, argnums=(0, 1))(one, TABLE), jax.grad(rdrop, argnums=(0, 1))(one, TABLE)):
        np.testing.assert_allclose(b, a, atol=3e-6)


def step_metrics(dropout_rate: float, **train) -> list[dict]:
    config = tiny.tiny_config(label_smoothing=0.0, **train)
    config.model.dropout_rate = dropout_rate
    mesh = sharding.make_mesh(config.train.mesh, devices=jax.devices()[:1])
    setup = make_setup(config, mesh)
    with jax.set_mesh(mesh):
        step_fn, state = make_train_step(setup), init_state(setup)
        out = []
        for batch in tiny.packed_batches(2, rows=8, length=16, vocab_size=config.model.vocab_size, seed=3):
            state, m = step_fn(state, sharding.global_batch(batch, mesh))
            out.append({k: float(v) for k, v in m.items()})
    return out


def test_train_step_pairs_each_row_with_its_own_second_sample():
    # ε_ls 0 makes the smoothed loss the NLL, so train_loss = train_nll + α/2 · KL exactly (per target token).
    alpha = 4.0
    for accum in (1, 2):  # accumulation sums the KL over micro-batches like the loss
        for m in step_metrics(0.3, rdrop_alpha=alpha, grad_accum_steps=accum):
            assert m["train_rdrop_kl"] > 1e-4  # the copies' dropout masks differ
            np.testing.assert_allclose(m["train_loss"], m["train_nll"] + 0.5 * alpha * m["train_rdrop_kl"], rtol=1e-5)
    # A nearly-off dropout leaves the two copies of each row nearly equal: a step that compared a row with
    # another row (a pairing bug) would show a divergence of the same order as at rate 0.3.
    wide = np.mean([m["train_rdrop_kl"] for m in step_metrics(0.3, rdrop_alpha=alpha)])
    narrow = np.mean([m["train_rdrop_kl"] for m in step_metrics(0.002, rdrop_alpha=alpha)])
    assert narrow < 0.05 * wide
    assert "train_rdrop_kl" not in step_metrics(0.3)[0]  # off by default


def test_rdrop_settings_are_checked():
    config = tiny.tiny_config(rdrop_alpha=-1.0)
    with pytest.raises(ValueError, match="rdrop_alpha must be >= 0"):
        rdrop_alpha_from_config(config)
    config = tiny.tiny_config(rdrop_alpha=1.0)  # tiny_config has every dropout off
    config.model.attention_dropout_rate = config.model.relu_dropout_rate = 0.0
    with pytest.raises(ValueError, match="every model dropout rate is 0"):
        rdrop_alpha_from_config(config)
    config.model.relu_dropout_rate = 0.1
    assert rdrop_alpha_from_config(config) == 1.0
    assert passes_per_row(config) == 2  # the benchmarks' FLOPs per real token double
    del config.train["rdrop_alpha"]  # a config saved before the field existed
    assert rdrop_alpha_from_config(config) == 0.0
    assert passes_per_row(config) == 1
