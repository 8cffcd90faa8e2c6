"""§5.4 Label-smoothed cross-entropy, summed over real target tokens.

With ε_ls the target distribution puts 1 - ε_ls on the reference token and ε_ls / (V - 1) on every other token
(tensor2tensor / the Flax WMT example). The loss reported is the cross-entropy minus the entropy of that target
distribution (its minimum is then 0); the true negative log-likelihood (for perplexity, as in Table 3) is
returned beside it. Normalisation by the *global* number of target tokens of the whole step (all devices, all
accumulation micro-batches) is done by the caller, which knows that count.
"""

import jax
import jax.numpy as jnp
import numpy as np


def smoothing_weights(vocab_size: int, label_smoothing: float) -> tuple[float, float]:
    """(probability of the reference token, probability of each other token) in the smoothed targets."""
    return 1.0 - label_smoothing, label_smoothing / (vocab_size - 1)


def smoothed_targets_entropy(vocab_size: int, label_smoothing: float) -> float:
    """Entropy of the smoothed target distribution (the constant subtracted so that the minimum loss is 0)."""
    confidence, low = smoothing_weights(vocab_size, label_smoothing)
    return -(confidence * np.log(confidence) + (vocab_size - 1) * low * np.log(low + 1e-20))


def cross_entropy_sums(logits: jax.Array, targets: jax.Array, label_smoothing: float) -> dict[str, jax.Array]:
    """Sums over non-pad tokens of the smoothed loss and of the NLL, and the token count.

    Args:
      logits: float32 [B, T, V]; targets: int [B, T] (0 = padding).
    Returns:
      {"loss": Σ smoothed CE - entropy, "nll": Σ -log p(y), "tokens": number of non-pad targets} (float32 scalars).
    """
    vocab_size = logits.shape[-1]
    weights = (targets != 0).astype(jnp.float32)
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    nll = -jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    confidence, low = smoothing_weights(vocab_size, label_smoothing)
    # Σ_v q_v (-log p_v) = confidence·nll + low·(Σ_v -log p_v - nll)
    smoothed = confidence * nll + low * (-log_probs.sum(-1) - nll)
    smoothed = smoothed - smoothed_targets_entropy(vocab_size, label_smoothing)
    return {"loss": (smoothed * weights).sum(), "nll": (nll * weights).sum(), "tokens": weights.sum()}


def projected_cross_entropy_sums(hidden: jax.Array, table: jax.Array, targets: jax.Array,
                                 label_smoothing: float) -> dict[str, jax.Array]:
    """:func:`cross_entropy_sums` of ``logits = hidden · tableᵀ`` (§3.4's shared pre-softmax projection), fused.

    Same values as ``cross_entropy_sums(hidden @ table.T, targets, label_smoothing)``, but the backward pass
    forms d loss / d logits = softmax - q (q the smoothed targets) in one elementwise pass and contracts it
    without materialising a transposed [tokens, vocab] array — on CPU that transpose and the generic
    log-softmax backward were most of a small model's step.

    Args:
      hidden: [..., D] decoder outputs (compute dtype); table: [V, D] (float32 parameters);
      targets: int [...] (0 = padding).
    """
    d = hidden.shape[-1]
    flat_targets = targets.reshape(-1)
    weights = (flat_targets != 0).astype(jnp.float32)
    loss, nll = _fused_ce(hidden.reshape(-1, d), table, flat_targets, weights, float(label_smoothing))
    return {"loss": loss, "nll": nll, "tokens": weights.sum()}


def _smoothed_ce_terms(logits: jax.Array, targets: jax.Array,
                       label_smoothing: float) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(log-sum-exp, smoothed CE minus the targets' entropy, NLL) of float32 logits [..., V], each [...]; targets
    int, broadcastable to [...]."""
    vocab_size = logits.shape[-1]
    confidence, low = smoothing_weights(vocab_size, label_smoothing)
    lse = jax.nn.logsumexp(logits, axis=-1)
    nll = lse - jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    # Σ_v -log p_v = V·lse - Σ_v logits_v
    smoothed = (confidence * nll + low * (vocab_size * lse - logits.sum(-1) - nll)
                - smoothed_targets_entropy(vocab_size, label_smoothing))
    return lse, smoothed, nll


def _smoothed_ce_logits_grad(probs: jax.Array, targets: jax.Array, a: jax.Array, b: jax.Array,
                             label_smoothing: float) -> jax.Array:
    """d (a·smoothed + b·nll) / d logits in one elementwise pass, for probs [..., V] and targets broadcastable to
    [...]: d smoothed / d logits = p - q with q = low + (confidence - low)·onehot; d nll / d logits = p - onehot."""
    confidence, low = smoothing_weights(probs.shape[-1], label_smoothing)
    is_target = jax.lax.broadcasted_iota(jnp.int32, probs.shape, probs.ndim - 1) == targets[..., None]
    return probs * (a + b) - a * low - jnp.where(is_target, a * (confidence - low) + b, 0.0)


def _fused_ce_fwd(hidden, table, targets, weights, label_smoothing):
    logits = jnp.einsum("nd,vd->nv", hidden, table.astype(hidden.dtype), preferred_element_type=jnp.float32)
    lse, smoothed, nll = _smoothed_ce_terms(logits, targets, label_smoothing)  # [N] each
    sums = ((smoothed * weights).sum(), (nll * weights).sum())
    return sums, (hidden, table, targets, weights, logits, lse)


def _fused_ce_bwd(label_smoothing, residuals, cotangents):
    hidden, table, targets, weights, logits, lse = residuals
    g_loss, g_nll = cotangents
    probs = jnp.exp(logits - lse[:, None])
    a, b = (weights * g_loss)[:, None], (weights * g_nll)[:, None]
    d_logits = _smoothed_ce_logits_grad(probs, targets, a, b, label_smoothing)
    d_hidden, d_table = _projection_grads(d_logits, hidden, table)
    return d_hidden, d_table, np.zeros(targets.shape, jax.dtypes.float0), jnp.zeros_like(weights)


def _projection_grads(d_logits: jax.Array, hidden: jax.Array, table: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(d hidden, d table) of ``logits = hidden · tableᵀ`` from d logits [..., V], hidden [..., D].

    d table is formed as ``(hiddenᵀ · d_logits)ᵀ``: XLA's CPU backend then transposes the small [D, V] result,
    where ``d_logitsᵀ · hidden`` makes it copy the [tokens, V] gradient into a transposed layout first.
    """
    d = hidden.shape[-1]
    flat_hidden = hidden.reshape(-1, d)
    flat_d_logits = d_logits.astype(hidden.dtype).reshape(flat_hidden.shape[0], -1)
    d_hidden = jnp.dot(flat_d_logits, table.astype(hidden.dtype), preferred_element_type=jnp.float32)
    d_table = jnp.dot(flat_hidden.T, flat_d_logits, preferred_element_type=jnp.float32).T
    return d_hidden.reshape(hidden.shape).astype(hidden.dtype), d_table.astype(table.dtype)


_fused_ce = jax.custom_vjp(lambda h, t, y, w, ls: _fused_ce_fwd(h, t, y, w, ls)[0], nondiff_argnums=(4,))
_fused_ce.defvjp(_fused_ce_fwd, _fused_ce_bwd)


def projected_rdrop_sums(hidden: jax.Array, table: jax.Array, targets: jax.Array, label_smoothing: float,
                         alpha: float) -> dict[str, jax.Array]:
    """R-Drop (Liang et al., NeurIPS 2021; not the paper's): two dropout samples of each sentence, and the
    symmetric KL divergence between their predictions added to the §5.4 loss, fused like
    :func:`projected_cross_entropy_sums`.

    For one target token with predictions p₁, p₂ (two passes through the model with independent dropout masks)
    Liang et al. minimise ``CE₁ + CE₂ + α·½(KL(p₁‖p₂) + KL(p₂‖p₁))``. The sums returned are half of that over
    the real tokens, so that ``loss / tokens`` is on the scale of the plain loss (the mean of the two label-smoothed
    cross-entropies) plus ``α/2`` times the mean symmetric KL; ``nll`` is the mean of the two NLLs and ``kl`` the
    sum of the symmetric KL (a metric). The backward pass forms d loss / d logits in one elementwise pass:
    d KL(p₁‖p₂) / d z₁ = p₁ ⊙ (log p₁ - log p₂ - KL(p₁‖p₂)) and d KL(p₂‖p₁) / d z₁ = p₁ - p₂.

    Args:
      hidden: [B, 2, T, D] decoder outputs, [:, 0] and [:, 1] the two dropout samples of the same rows;
      table: [V, D] (float32 parameters); targets: int [B, T] (0 = padding); alpha: the KL weight α.
    """
    weights = (targets != 0).astype(jnp.float32)
    loss, nll, kl = _fused_rdrop(hidden, table, targets, weights, float(label_smoothing), float(alpha))
    return {"loss": loss, "nll": nll, "tokens": weights.sum(), "kl": kl}


def _fused_rdrop_fwd(hidden, table, targets, weights, label_smoothing, alpha):
    logits = jnp.einsum("bctd,vd->bctv", hidden, table.astype(hidden.dtype), preferred_element_type=jnp.float32)
    lse, smoothed, nll = _smoothed_ce_terms(logits, targets[:, None], label_smoothing)  # [B, 2, T] each
    log_p = logits - lse[..., None]
    kl = 0.5 * ((jnp.exp(log_p[:, 0]) - jnp.exp(log_p[:, 1])) * (log_p[:, 0] - log_p[:, 1])).sum(-1)  # [B, T]
    w = weights[:, None, :]
    kl_sum = (kl * weights).sum()
    sums = (0.5 * (smoothed * w).sum() + 0.5 * alpha * kl_sum, 0.5 * (nll * w).sum(), kl_sum)
    return sums, (hidden, table, targets, weights, logits, lse)


def _fused_rdrop_bwd(label_smoothing, alpha, residuals, cotangents):
    hidden, table, targets, weights, logits, lse = residuals
    g_loss, g_nll, g_kl = cotangents
    log_p = logits - lse[..., None]
    probs = jnp.exp(log_p)
    diff = log_p[:, 0] - log_p[:, 1]  # log p₁ - log p₂, [B, T, V]
    kl12 = (probs[:, 0] * diff).sum(-1, keepdims=True)
    kl21 = -(probs[:, 1] * diff).sum(-1, keepdims=True)
    gap = probs[:, 0] - probs[:, 1]
    # d ½(KL₁₂ + KL₂₁) / d z₁ and / d z₂
    d_kl = 0.5 * jnp.stack([probs[:, 0] * (diff - kl12) + gap, probs[:, 1] * (-diff - kl21) - gap], axis=1)
    w = weights[:, None, :, None]
    a, b, c = 0.5 * w * g_loss, 0.5 * w * g_nll, w * (0.5 * alpha * g_loss + g_kl)
    d_logits = _smoothed_ce_logits_grad(probs, targets[:, None], a, b, label_smoothing) + c * d_kl
    d_hidden, d_table = _projection_grads(d_logits, hidden, table)
    return d_hidden, d_table, np.zeros(targets.shape, jax.dtypes.float0), jnp.zeros_like(weights)


_fused_rdrop = jax.custom_vjp(lambda h, t, y, w, ls, a: _fused_rdrop_fwd(h, t, y, w, ls, a)[0], nondiff_argnums=(4, 5))
_fused_rdrop.defvjp(_fused_rdrop_fwd, _fused_rdrop_bwd)
