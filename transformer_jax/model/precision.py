"""Mixed precision (DESIGN.md "Dtypes"): which dtype each part of the model computes in, decided here.

* Parameters are stored in float32 (params.py); each matmul casts its operands to the *compute dtype*
  ``model.dtype`` and accumulates in float32 where the result must stay float32 (attention logits, logits).
* ``model.dtype = "auto"`` is bfloat16 on GPU and TPU and float32 elsewhere (CPU, where bfloat16 matmuls are not
  faster), resolved by :func:`compute_dtype` — the one reader of the field.
* float32 always: attention logits and softmax, LayerNorm, the residual sums, the output logits and the loss.
* Dropout of a lower-precision tensor returns float32 (dropout.py): 1/P(keep) is not a bfloat16 number (1/0.9
  rounds to 1.109375, a 0.15% bias of E[dropout(x)]), so the scaled value is kept in float32 until it meets the
  residual sum (exact there) or the next matmul (one unbiased rounding). LayerNorm writes the compute dtype,
  so the post-LN stream between layers is in the compute dtype; the pre-LN stream (x + sublayer) is float32.
"""

import jax
import jax.numpy as jnp

ACCELERATORS = ("gpu", "tpu")
DTYPES = ("auto", "float32", "bfloat16", "float16")


def compute_dtype(name: str) -> jnp.dtype:
    """``model.dtype`` → the compute dtype: "auto" is bfloat16 on GPU/TPU (jax.default_backend()), else float32."""
    if name not in DTYPES:
        raise ValueError(f"Unknown model.dtype {name!r}; valid: {', '.join(DTYPES)}.")
    if name == "auto":
        return jnp.dtype(jnp.bfloat16 if jax.default_backend() in ACCELERATORS else jnp.float32)
    return jnp.dtype(name)
