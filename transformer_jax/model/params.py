"""Parameter creation with logical axis names (embed, heads, kv, mlp, vocab, length).

Every parameter is an ``nnx.Param`` in float32 carrying ``logical_axes`` metadata; transformer_jax/sharding.py maps those
names to mesh axes with one set of rules, so the model never mentions a device or a mesh.
"""

import math

import jax
import jax.numpy as jnp
from flax import nnx


def dense_param(rngs: nnx.Rngs, shape: tuple[int, ...], logical_axes: tuple[str | None, ...],
                fan_in: int, fan_out: int | None = None) -> nnx.Param:
    """A projection matrix with Glorot-uniform init (tensor2tensor's default for the paper's model)."""
    fan_out = fan_out if fan_out is not None else math.prod(shape) // fan_in
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    value = jax.random.uniform(rngs.params(), shape, jnp.float32, -limit, limit)
    return nnx.Param(value, logical_axes=logical_axes)


def normal_param(rngs: nnx.Rngs, shape: tuple[int, ...], logical_axes: tuple[str | None, ...],
                 stddev: float) -> nnx.Param:
    """A table (embeddings, learned positions) initialised N(0, stddev²)."""
    return nnx.Param(stddev * jax.random.normal(rngs.params(), shape, jnp.float32), logical_axes=logical_axes)


def zeros_param(shape: tuple[int, ...], logical_axes: tuple[str | None, ...]) -> nnx.Param:
    """Biases."""
    return nnx.Param(jnp.zeros(shape, jnp.float32), logical_axes=logical_axes)


def ones_param(shape: tuple[int, ...], logical_axes: tuple[str | None, ...]) -> nnx.Param:
    """LayerNorm gains."""
    return nnx.Param(jnp.ones(shape, jnp.float32), logical_axes=logical_axes)
