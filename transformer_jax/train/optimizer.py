"""§5.3 Optimizer: Adam(β1 = 0.9, β2 = 0.98, ε = 1e-9) with the paper's learning-rate schedule.

    lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)

i.e. linear warm-up for ``warmup_steps`` then decay ∝ 1/√step (peak ≈ 7.0e-4 for base at step 4000).
``learning_rate_scale`` multiplies it (small batches and short CPU runs take a larger factor); gradient
clipping and weight decay are optional and off in the paper's configs. Weight decay is decoupled (AdamW, Loshchilov &
Hutter 2019: added after Adam's scaling, so each step shrinks a weight by lr · weight_decay); ``weight_decay_params``
says which parameters it shrinks: "all"; "matrices", the weight matrices W and the embedding tables, sparing the
biases and the LayerNorm gains and biases (as BERT and most AdamW recipes do); or "vectors", only those biases,
gains and LayerNorm biases (the complement).

``cooldown_steps`` (0 in the paper's configs) is not the paper's: the rate is multiplied by a linear ramp from 1
to 0 over the run's last ``cooldown_steps`` steps ("rsqrt with a linear cooldown", Zhai et al. 2022, §3.5;
Hägele et al. 2024), so a fixed-budget run ends at a low rate, as a cosine schedule would, while every step
before the cooldown keeps the §5.3 rate (a run may branch from another's checkpoint before its cooldown).
"""

import functools

import jax
import jax.numpy as jnp
import ml_collections
import optax


def learning_rate_schedule(d_model: int, warmup_steps: int, scale: float = 1.0, *, num_steps: int = 0,
                           cooldown_steps: int = 0) -> optax.Schedule:
    """The §5.3 schedule as a function of optax's update count (0-based; the paper's step = count + 1).

    With ``cooldown_steps`` > 0 the update of step s (count s - 1) is further multiplied by
    ``min(1, (num_steps - count) / cooldown_steps)``: 1 up to step num_steps - cooldown_steps + 1 (the ramp's
    first value, N/N), then falling linearly to 1/cooldown_steps for the last update (none is wasted at rate 0).
    """
    if not 0 <= cooldown_steps <= num_steps or (cooldown_steps and num_steps <= 0):
        raise ValueError(f"train.cooldown_steps must be in [0, train.num_steps={num_steps}], got {cooldown_steps}.")

    def schedule(count):
        step = jnp.asarray(count, jnp.float32) + 1.0
        rate = scale * d_model**-0.5 * jnp.minimum(step**-0.5, step * warmup_steps**-1.5)
        if cooldown_steps:
            rate = rate * jnp.clip((num_steps - jnp.asarray(count, jnp.float32)) / cooldown_steps, 0.0, 1.0)
        return rate

    return schedule


def schedule_from_config(config: ml_collections.ConfigDict) -> optax.Schedule:
    """The learning-rate schedule of ``config.train`` for ``config.model.d_model``."""
    t = config.train
    return learning_rate_schedule(config.model.d_model, t.warmup_steps, t.learning_rate_scale,
                                  num_steps=t.num_steps, cooldown_steps=t.get("cooldown_steps", 0))


WEIGHT_DECAY_PARAMS = ("all", "matrices", "vectors")


def _check_weight_decay_params(which: str) -> None:
    if which not in WEIGHT_DECAY_PARAMS:
        raise ValueError(f"train.weight_decay_params must be one of {WEIGHT_DECAY_PARAMS}, got {which!r}.")


def decay_mask(params, which: str = "matrices"):
    """True for the parameters ``weight_decay_params=which`` decays ("matrices": W and embedding tables; "vectors":
    biases and LayerNorm gains/biases; "all": every one).

    Decided by the parameter's name, not its rank: the per-head attention biases b_q, b_k, b_v are (h, d_k).
    """
    _check_weight_decay_params(which)

    def decayed(path, _):
        name = str(getattr(path[-1], "key", path[-1]))
        vector = name.startswith("b_") or name in ("bias", "scale")
        return which == "all" or vector == (which == "vectors")

    return jax.tree_util.tree_map_with_path(decayed, params)


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
    """Adam with the §5.3 schedule from ``config.train`` and ``config.model.d_model``."""
    t = config.train
    schedule = schedule_from_config(config)
    which = t.get("weight_decay_params", "all")
    _check_weight_decay_params(which)  # also when weight_decay is 0: a misspelt value is a mistake either way
    parts = []
    if t.grad_clip_norm > 0:
        parts.append(optax.clip_by_global_norm(t.grad_clip_norm))
    parts.append(optax.scale_by_adam(b1=t.adam_b1, b2=t.adam_b2, eps=t.adam_eps))
    if t.weight_decay > 0:
        mask = None if which == "all" else functools.partial(decay_mask, which=which)
        parts.append(optax.add_decayed_weights(t.weight_decay, mask=mask))
    parts.append(optax.scale_by_learning_rate(schedule))
    return optax.chain(*parts)
