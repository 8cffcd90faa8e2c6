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


def smoothed_targets_entropy(vocab_size: int, label_smoothing: float) -> float:
    """Entropy of the smoothed target distribution (the constant subtracted so that the minimum loss is 0)."""
    confidence = 1.0 - label_smoothing
    low = label_smoothing / (vocab_size - 1)
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
    confidence = 1.0 - label_smoothing
    low = label_smoothing / (vocab_size - 1)
    # Σ_v q_v (-log p_v) = confidence·nll + low·(Σ_v -log p_v - nll)
    smoothed = confidence * nll + low * (-log_probs.sum(-1) - nll)
    smoothed = smoothed - smoothed_targets_entropy(vocab_size, label_smoothing)
    return {"loss": (smoothed * weights).sum(), "nll": (nll * weights).sum(), "tokens": weights.sum()}
