"""Accelerator check of the attention implementations and the bfloat16 default (issue 12): one JSON line per check.

Run from the repository root on a GPU machine (ml_collections must be importable there)::

    PYTHONPATH=. PYTHONUNBUFFERED=1 python3 bench/gpu_attention_check.py   # a few minutes on one H200
    PYTHONPATH=. SMALL=1 python bench/gpu_attention_check.py               # smoke run on CPU (no cuDNN)
    SECTIONS=environment,mask_kinds ...                                            # only those sections

1. "auto" resolves to bfloat16 and to "cudnn" on the GPU (and the compiled step holds cuDNN's fused attention).
2. Every mask kind (padding, causal, packed segments, packed causal, cross) at head size 64: the outputs and
   gradients (parameters and inputs) of "cudnn", "xla" and "cpu" (the einsum path) in bfloat16 against the float32
   einsum reference; "xla" against "cpu" in float32 at highest matmul precision (should be ~1e-6); each record
   ``passed`` or not against LIMITS (bench/accelerator_check.py runs these too).
3. Base-width model (6+6 layers), packed batch, bfloat16: training loss and gradient norm per implementation, the
   step time, and cached decoding against teacher forcing.
"""

import json
import os
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.configs import base
from transformer_jax.model import attention
from transformer_jax.model.attention import MultiHeadAttention, padding_mask
from transformer_jax.model.precision import compute_dtype
from transformer_jax.model.transformer import START_ID, Transformer

SMALL = bool(os.environ.get("SMALL"))
GPU = jax.default_backend() == "gpu"
IMPLEMENTATIONS = ("cpu", "xla", "cudnn") if GPU else ("cpu", "xla")


def report(check: str, **values) -> None:
    print(json.dumps({"check": check, **values}, default=str), flush=True)


def section(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 — keep going: one failed section must not hide the others
        report(fn.__name__, error=f"{type(e).__name__}: {e}"[:800], trace=traceback.format_exc()[-800:])


def rel_err(a, b) -> float:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def flat(leaves) -> np.ndarray:
    return np.concatenate([np.asarray(x, np.float32).ravel() for x in leaves])


def environment():
    q = jnp.zeros((2, 64, 8, 64), jnp.bfloat16)
    report("environment", jax=jax.__version__, backend=jax.default_backend(), devices=[str(d) for d in jax.devices()],
           compute_dtype_auto=str(compute_dtype("auto")),
           attention_auto_bf16=attention.attention_implementation("auto", q, q, jnp.ones((2, 1, 64, 64), bool)),
           attention_auto_fp32=attention.attention_implementation("auto", q.astype(jnp.float32), q, None))


def segments(batch: int, length: int, pieces: int, seed: int) -> jax.Array:
    """Random packed rows: ``pieces`` sentences and trailing padding per row (ids 1..pieces, 0 = padding)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(batch):
        cuts = np.sort(rng.choice(np.arange(1, length), pieces, replace=False))
        row = np.searchsorted(cuts, np.arange(length), side="right") + 1
        row[row > pieces] = 0
        rows.append(row)
    return jnp.asarray(np.stack(rows), jnp.int32)


@jax.jit(static_argnums=(0, 5))
def attention_grads(graphdef, params, x_q, x_kv, mask, causal, cot):
    """Σ out · cot and its gradients w.r.t. parameters and both inputs."""
    def loss(params, x_q, x_kv):
        out = nnx.merge(graphdef, params)(x_q, x_kv, mask, causal=causal)
        return (out.astype(jnp.float32) * cot).sum(), out
    return jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True)(params, x_q, x_kv)


# Pass/fail limits of attention_errors (max |error| / max |reference|): bfloat16 has an 8-bit mantissa (~4e-3 a
# value), so its outputs and gradients land within a few 1e-3 of the float32 reference; "xla" in float32 at highest
# matmul precision should match the einsum path to rounding.
LIMITS = {"fp32_out": 1e-4, "fp32_grad": 1e-4, "bf16_out": 2e-2, "bf16_grad": 5e-2}


def mask_kinds():
    for record in attention_errors(SMALL):
        report(record.pop("check"), **record)


def attention_errors(small: bool) -> list[dict]:
    """Every mask kind at head size 64 (8 heads × 64 = 512; small: 4 × 8): each implementation's output and
    gradients against the float32 einsum reference, with ``passed`` against LIMITS."""
    records = []
    b, length, d, h = (2, 16, 32, 4) if small else (4, 128, 512, 8)
    src_len = length * 3 // 4
    plain = segments(b, length, 1, 0)
    packed, memory = segments(b, length, 3, 1), segments(b, src_len, 3, 2)
    kinds = {"padding": (plain, plain, False), "causal": (plain, plain, True), "packed": (packed, packed, False),
             "packed_causal": (packed, packed, True), "cross": (packed, memory, False)}
    for kind, (q_seg, k_seg, causal) in kinds.items():
        mask = padding_mask(q_seg, k_seg)
        x_q = jax.random.normal(jax.random.key(1), (b, q_seg.shape[1], d))
        x_kv = x_q if k_seg is q_seg else jax.random.normal(jax.random.key(2), (b, k_seg.shape[1], d))
        cot = jax.random.normal(jax.random.key(3), x_q.shape)

        def run(implementation, dtype, args=(x_q, x_kv, mask, causal, cot)):
            mha = MultiHeadAttention(d, h, d // h, d // h, use_bias=True, dropout_rate=0.0, dtype=dtype,
                                     rngs=nnx.Rngs(0), implementation=implementation)
            graphdef, params = nnx.split(mha)
            (_, out), grads = attention_grads(graphdef, params, *args)
            return out, jax.tree.leaves(grads)

        with jax.default_matmul_precision("highest"):
            ref_out, ref_grads = run("cpu", jnp.float32)
            xla_out, xla_grads = run("xla", jnp.float32)
        out_rel, grad_rel = rel_err(xla_out, ref_out), rel_err(flat(xla_grads), flat(ref_grads))
        records.append({"check": "mask_fp32_xla_vs_cpu", "kind": kind, "out_rel": out_rel, "grad_rel": grad_rel,
                        "passed": out_rel <= LIMITS["fp32_out"] and grad_rel <= LIMITS["fp32_grad"]})
        for implementation in IMPLEMENTATIONS:
            out, grads = run(implementation, jnp.bfloat16)
            out_rel, grad_rel = rel_err(out, ref_out), rel_err(flat(grads), flat(ref_grads))  # (b_k's grad is ~0)
            records.append({"check": "mask_bf16_vs_fp32_reference", "kind": kind, "implementation": implementation,
                            "out_rel": out_rel, "grad_rel": grad_rel,
                            "passed": out_rel <= LIMITS["bf16_out"] and grad_rel <= LIMITS["bf16_grad"]})
    return records


def model_config(implementation: str):
    m = base.get_config().model
    m.vocab_size = 512 if SMALL else 8000
    if SMALL:
        m.update(d_model=32, d_ff=64, num_heads=4, d_k=8, d_v=8, num_encoder_layers=2, num_decoder_layers=2)
    m.max_len, m.dtype, m.attention_implementation = 256, "auto", implementation
    return m


def packed_batch(rows: int, length: int, vocab: int) -> dict:
    batch = {}
    for side, seed in (("inputs", 4), ("targets", 5)):
        seg = segments(rows, length, 4, seed)
        starts = np.concatenate([np.ones((rows, 1), bool), np.diff(np.asarray(seg), axis=1) != 0], axis=1)
        pos = np.zeros(seg.shape, np.int32)
        for r in range(rows):
            for t in range(1, length):
                pos[r, t] = 0 if starts[r, t] else pos[r, t - 1] + 1
        ids = jax.random.randint(jax.random.key(seed), seg.shape, 3, vocab)
        batch[side] = jnp.where(seg != 0, ids, 0)
        batch[f"{side}_segmentation"], batch[f"{side}_position"] = seg, jnp.asarray(pos * (np.asarray(seg) != 0))
    return batch


def train_loss(params, graphdef, batch, key):
    logits = nnx.merge(graphdef, params)(**batch, dropout_key=key)
    weights = (batch["targets"] != 0).astype(jnp.float32)
    nll = -jnp.take_along_axis(jax.nn.log_softmax(logits), batch["targets"][..., None], -1)[..., 0]
    return (nll * weights).sum() / weights.sum()


def train_steps():
    rows, length = (4, 16) if SMALL else (192, 128)  # ~25K tokens a side, the paper's batch
    batch = packed_batch(rows, length, model_config("auto").vocab_size)
    for implementation in ("auto", "cpu", "xla"):  # ("auto" is "cudnn" on the GPU: cudnn_fmha_in_hlo says so)
        graphdef, params = nnx.split(Transformer(model_config(implementation), rngs=nnx.Rngs(0)))
        step = jax.jit(jax.value_and_grad(train_loss), static_argnums=1)
        start = time.perf_counter()
        compiled = step.lower(params, graphdef, batch, jax.random.key(0)).compile()
        compile_s = time.perf_counter() - start
        hlo = compiled.as_text()
        value, grads = compiled(params, batch, jax.random.key(0))
        jax.block_until_ready(grads)
        start = time.perf_counter()
        for i in range(5):
            value, grads = compiled(params, batch, jax.random.key(i))
        jax.block_until_ready(grads)
        step_ms = (time.perf_counter() - start) / 5 * 1e3
        norm = float(jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree.leaves(grads))))
        report("train_step", implementation=implementation, loss=float(value), grad_norm=norm, step_ms=step_ms,
               compile_s=compile_s, cudnn_fmha_in_hlo="cudnn$fmha" in hlo or "__cudnn" in hlo)


def cached_decoding():
    model = Transformer(model_config("auto"), rngs=nnx.Rngs(0))
    src = jax.random.randint(jax.random.key(6), (4, 20), 3, 500).at[:, 15:].set(0)
    tgt = jax.random.randint(jax.random.key(7), (4, 12), 3, 500)
    full = model(src, tgt)
    state = model.prepare_memory(model.encode(src), src)
    cache = model.init_cache(4, 12, 2)
    previous, stepped = jnp.full((8,), START_ID, jnp.int32), []
    step = jax.jit(model.decode_step)
    for t in range(12):
        logits, cache = step(previous, state, cache)
        stepped.append(logits.reshape(4, 2, -1)[:, 0])
        previous = tgt[:, t].repeat(2)
    report("cached_decoding_vs_teacher_forcing", rel=rel_err(jnp.stack(stepped, 1), full),
           cache_dtype=str(cache["kv"][0][0].dtype))


if __name__ == "__main__":
    chosen = os.environ.get("SECTIONS", "environment,mask_kinds,train_steps,cached_decoding").split(",")
    for fn in (environment, mask_kinds, train_steps, cached_decoding):
        if fn.__name__ in chosen:
            section(fn)
