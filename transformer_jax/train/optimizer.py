"""§5.3 Optimizer: Adam(β1 = 0.9, β2 = 0.98, ε = 1e-9) with the paper's learning-rate schedule.

    lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)

i.e. linear warm-up for ``warmup_steps`` then decay ∝ 1/√step (peak ≈ 7.0e-4 for base at step 4000).
``learning_rate_scale`` multiplies it (small batches and short CPU runs take a larger factor); gradient
clipping and weight decay are optional and off in the paper's configs.
"""

import jax.numpy as jnp
import ml_collections
import optax


def learning_rate_schedule(d_model: int, warmup_steps: int, scale: float = 1.0) -> optax.Schedule:
    """The §5.3 schedule as a function of optax's update count (0-based; the paper's step = count + 1)."""

    def schedule(count):
        step = jnp.asarray(count, jnp.float32) + 1.0
        return scale * d_model**-0.5 * jnp.minimum(step**-0.5, step * warmup_steps**-1.5)

    return schedule


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
    """Adam with the §5.3 schedule from ``config.train`` and ``config.model.d_model``."""
    t = config.train
    schedule = learning_rate_schedule(config.model.d_model, t.warmup_steps, t.learning_rate_scale)
    parts = []
    if t.grad_clip_norm > 0:
        parts.append(optax.clip_by_global_norm(t.grad_clip_norm))
    parts.append(optax.scale_by_adam(b1=t.adam_b1, b2=t.adam_b2, eps=t.adam_eps))
    if t.weight_decay > 0:
        parts.append(optax.add_decayed_weights(t.weight_decay))
    parts.append(optax.scale_by_learning_rate(schedule))
    return optax.chain(*parts)
