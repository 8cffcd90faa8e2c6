"""Mixed precision (DESIGN.md "Dtypes"): which dtype each part of the model computes in, decided here.

* Parameters are stored in float32 (params.py); each matmul casts its operands to the *compute dtype*
  ``model.dtype`` and accumulates in float32 where the result must stay float32 (attention logits, logits).
* ``model.dtype = "auto"`` is bfloat16 on GPU and TPU and float32 elsewhere (CPU, where bfloat16 matmuls are not
  faster), resolved by :func:`compute_dtype` — the one reader of the field — for the platform the program is
  traced for (:func:`platform`): this machine's backend, or a compile target's (`compiling_for`), so a plan made
  on a CPU login node for a TPU pod is the bfloat16 program the pod runs.
* float32 always: attention logits and softmax, LayerNorm, the residual sums, the output logits and the loss.
* Dropout of a lower-precision tensor returns float32 (dropout.py): 1/P(keep) is not a bfloat16 number (1/0.9
  rounds to 1.109375, a 0.15% bias of E[dropout(x)]), so the scaled value is kept in float32 until it meets the
  residual sum (exact there) or the next matmul (one unbiased rounding). LayerNorm writes the compute dtype,
  so the post-LN stream between layers is in the compute dtype; the pre-LN stream (x + sublayer) is float32.
"""

import contextlib
import contextvars
from collections.abc import Iterator

import jax
import jax.numpy as jnp

ACCELERATORS = ("gpu", "tpu")
PLATFORMS = ("cpu",) + ACCELERATORS
DTYPES = ("auto", "float32", "bfloat16", "float16")

_TARGET_PLATFORM: contextvars.ContextVar[str | None] = contextvars.ContextVar("target_platform", default=None)


@contextlib.contextmanager
def compiling_for(platform: str) -> Iterator[None]:
    """Within this block, models are built and traced for ``platform`` ("cpu", "gpu" or "tpu"), whatever this
    machine's backend: ahead-of-time compilation for a TPU topology or a GPU target (transformer_jax/aot.py)."""
    if platform not in PLATFORMS:
        raise ValueError(f"Unknown platform {platform!r}; valid: {', '.join(PLATFORMS)}.")
    token = _TARGET_PLATFORM.set(platform)
    try:
        yield
    finally:
        _TARGET_PLATFORM.reset(token)


def platform() -> str:
    """The platform programs are traced for: a compile target's (`compiling_for`), else jax.default_backend()."""
    return _TARGET_PLATFORM.get() or jax.default_backend()


def compute_dtype(name: str, on: str | None = None) -> jnp.dtype:
    """``model.dtype`` → the compute dtype: "auto" is bfloat16 on GPU/TPU, else float32, for platform ``on``
    (default: :func:`platform`)."""
    if name not in DTYPES:
        raise ValueError(f"Unknown model.dtype {name!r}; valid: {', '.join(DTYPES)}.")
    if name == "auto":
        return jnp.dtype(jnp.bfloat16 if (on or platform()) in ACCELERATORS else jnp.float32)
    return jnp.dtype(name)
