"""The one-shot accelerator check: the paper's base and big training steps and a newstest-sized beam search.

    bash bench/accelerator_check.sh            # on a GPU/TPU machine: ≤ 8 minutes on one H200, compiles included
    bash bench/accelerator_check.sh --smoke    # the same code paths on CPU with tiny shapes (a test runs this)

Prints one JSON line per measurement:
- ``{"check": "peak"}``: the bf16 matmul rate measured in this run (8192³ on accelerators), beside the vendor peak.
- ``{"check": "train", "config": "base"|"big", ...}``: one training step (forward + backward + Adam, dropout and
  label smoothing on) at the paper's ~25K source + ~25K target real tokens (§5.1) in bf16 compute, on one device:
  the step shape is what training would use on one device (train/plan.py, fill rate ``planning_fill_rate``),
  rows packed with 2–3 random sentences each. Step time (median), real target tokens/s, MFU (the `describe` FLOPs
  formula with the row length as the attention span / step time / the vendor's dense bf16 peak, and against the
  measured matmul rate), compile time, and the device's peak memory.
- ``{"check": "decode", ...}``: beam 4, α 0.6, max length = source + 50 (§6.1) over 3,003 sentences (the size of
  newstest2014) with newstest-like lengths, batched as `evaluate` batches them (``config.decode.batch_size``,
  sentences grouped by length). The weights are random, so nearly every hypothesis runs to its maximum length:
  the wall time is an upper bound for a trained model (which stops at EOS), compiles included and reported.

- ``{"check": "versions"}`` first: jax, jaxlib, the backend and device, the CUDA runtime / driver and cuDNN versions
  (jax's CUDA plugin reports them).
- ``{"check": "mask_*"}`` and ``{"check": "attention_equality", "passed": ...}``: the attention implementations
  ("cudnn", "xla", the einsum path) against a float32 reference for every mask kind, with pass/fail limits
  (bench/gpu_attention_check.py); each train record names the kernel that ran (cuDNN's fused attention is visible
  in the compiled program, or it did not run).

Parameters, Adam moments, logits, softmax and loss stay float32 (DESIGN.md); ``--dtype`` sets the compute dtype.
It runs from a bare checkout (no install: transformer_jax/__init__.py maps configs/); on an image without
ml_collections, `bash bench/accelerator_wheels.sh` first fetches it as a wheel that travels in ``.whl/``.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import itertools

import gpu_attention_check  # (bench/, beside this script)
import jax
import jax.numpy as jnp
import numpy as np

from transformer_jax import sharding
from transformer_jax.aot import compute_choices
from transformer_jax.configs import base, big, tiny
from transformer_jax.data.batching import BATCH_KEYS, eval_batches
from transformer_jax.data.tokenizer import EOS_ID
from transformer_jax.decode.translate import make_decode_fn
from transformer_jax.model.size import flops_per_target_token
from transformer_jax.train.plan import layout_plan
from transformer_jax.train.step import init_state, make_setup, make_train_step, passes_per_row

VENDOR_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "cpu": None}  # dense, per chip
NEWSTEST_SENTENCES = 3003  # newstest2014 EN-DE


def device_name() -> str:
    d = jax.devices()[0]
    return getattr(d, "device_kind", d.platform)


def vendor_peak() -> float | None:
    kind = device_name()
    return next((v for k, v in VENDOR_BF16_TFLOPS.items() if k.lower() in kind.lower()), None)


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def matmul_tflops(n: int, dtype) -> float:
    """Best of 10 n³ matmuls (TFLOP/s)."""
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), dtype)
    b = jax.random.normal(jax.random.PRNGKey(1), (n, n), dtype)
    f = jax.jit(jnp.dot)
    f(a, b).block_until_ready()
    best = float("inf")
    for _ in range(10):
        t = time.perf_counter()
        f(a, b).block_until_ready()
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e12


def packed_batch(rows: int, length: int, vocab: int, fill: float, rng: np.random.Generator) -> dict:
    """``rows × length`` per side, each row 2–3 random sentences filling ~``fill`` of it (segment ids, positions)."""
    batch = {k: np.zeros((rows, length), np.int32) for k in BATCH_KEYS}
    for r in range(rows):
        real = max(2, round(fill * length))
        cuts = np.sort(rng.choice(np.arange(1, real), size=min(rng.integers(1, 3), real - 1), replace=False))
        bounds = [0, *cuts.tolist(), real]
        for side in ("inputs", "targets"):
            for seg, (a, b) in enumerate(itertools.pairwise(bounds), start=1):
                batch[side][r, a:b] = rng.integers(4, vocab, b - a)
                batch[side][r, b - 1] = EOS_ID
                batch[f"{side}_segmentation"][r, a:b] = seg
                batch[f"{side}_position"][r, a:b] = np.arange(b - a)
    return batch


def device_peak_bytes() -> int | None:
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def check_train(name: str, config, lengths: list[int], steps: int, peak_tflops: float | None,
                measured_tflops: float) -> None:
    mesh = sharding.make_mesh(config.train.mesh, jax.devices()[:1])
    setup = make_setup(config, mesh)
    plan = layout_plan(config, 1, 1)
    rng = np.random.default_rng(0)
    with jax.set_mesh(mesh):
        state = init_state(setup)
        step_fn = make_train_step(setup)
        for bucket in plan.buckets:
            if bucket.length not in lengths:
                continue
            batch = sharding.global_batch(packed_batch(bucket.rows, bucket.length, int(config.model.vocab_size),
                                                      bucket.fill_rate, rng), mesh)
            tic = time.perf_counter()
            compiled = step_fn.lower(setup.abstract_state, batch).compile()
            compile_s = time.perf_counter() - tic
            state, metrics = compiled(state, batch)  # warm-up
            jax.block_until_ready(metrics)
            times = []
            for _ in range(steps):
                tic = time.perf_counter()
                state, metrics = compiled(state, batch)
                jax.block_until_ready(metrics)
                times.append(time.perf_counter() - tic)
            step_s = statistics.median(times)
            tokens = float(metrics["target_tokens"])
            flops = flops_per_target_token(config.model, bucket.length) * tokens * passes_per_row(config)
            mem = compiled.memory_analysis()
            kernel = "cudnn" if "__cudnn$fmha" in compiled.as_text() else "xla or einsum (no cuDNN attention)"
            emit({"check": "train", "config": name, "device": device_name(), "dtype": str(config.model.dtype),
                  "attention": compute_choices(config.model, jax.default_backend())["attention"],
                  "attention_kernel_in_hlo": kernel,
                  "batch_shape": [bucket.rows, bucket.length], "real_target_tokens": tokens,
                  "real_source_tokens": float(metrics["source_tokens"]), "step_s": step_s, "best_step_s": min(times),
                  "steps_timed": steps, "target_tokens_per_s": tokens / step_s, "compile_s": compile_s,
                  "tflops_per_s": flops / step_s / 1e12,
                  "mfu_vs_vendor_peak": flops / step_s / 1e12 / peak_tflops if peak_tflops else None,
                  "mfu_vs_measured_matmul": flops / step_s / 1e12 / measured_tflops,
                  "loss": float(metrics["train_loss"]),
                  "compiled_temp_gib": mem.temp_size_in_bytes / 2**30 if mem else None,
                  "compiled_argument_gib": mem.argument_size_in_bytes / 2**30 if mem else None,
                  "device_peak_gib": (device_peak_bytes() or 0) / 2**30})


def newstest_lengths(n: int, rng: np.random.Generator, max_len: int) -> np.ndarray:
    """Source lengths in word pieces (EOS included) shaped like newstest2014's English side: mean ~30, long tail."""
    return np.clip(np.round(rng.lognormal(np.log(26.0), 0.55, n)), 3, max_len).astype(int)


def check_decode(config, sentences: int) -> None:
    mesh = sharding.make_mesh(config.train.mesh, jax.devices()[:1])
    setup = make_setup(config, mesh)
    rng = np.random.default_rng(1)
    vocab = int(config.model.vocab_size)
    pairs = [(list(rng.integers(4, vocab, n - 1)) + [EOS_ID], [EOS_ID])
             for n in newstest_lengths(sentences, rng, int(config.model.max_len) // 2)]
    batches = eval_batches(pairs, batch_size=int(config.decode.batch_size), max_len=int(config.model.max_len))
    with jax.set_mesh(mesh):
        params = init_state(setup)["params"]
        decode = make_decode_fn(config, setup.graphdef)
        key = jax.random.PRNGKey(0)
        shapes, compile_s, out_tokens = set(), 0.0, 0
        tic = time.perf_counter()
        for batch in batches:
            shape = batch["inputs"].shape
            t0 = time.perf_counter()
            ids = np.asarray(decode(params, batch["inputs"], key))
            if shape not in shapes:  # first call of a shape = compile + run; counted in the wall time too
                shapes.add(shape)
                compile_s += time.perf_counter() - t0
            out_tokens += int((ids[batch["index"] >= 0] != 0).sum())
        wall = time.perf_counter() - tic
    emit({"check": "decode", "device": device_name(), "dtype": str(config.model.dtype), "sentences": sentences,
          "beam_size": int(config.decode.beam_size), "batch_size": int(config.decode.batch_size),
          "batches": len(batches), "shapes": sorted(shapes), "wall_s": wall,
          "first_call_per_shape_s": compile_s, "output_tokens": out_tokens, "output_tokens_per_s": out_tokens / wall,
          "note": "random weights: hypotheses run to source length + 50, an upper bound for a trained model"})


def versions() -> dict:
    """jax, jaxlib, and the CUDA / cuDNN versions jax's CUDA plugin reports (None off a CUDA GPU)."""
    import jaxlib

    out = {"check": "versions", "jax": jax.__version__, "jaxlib": jaxlib.__version__,
           "backend": jax.default_backend(), "device": device_name(), "device_count": jax.device_count()}
    try:
        from jax._src.lib import cuda_versions
    except ImportError:
        cuda_versions = None
    for name in ("cuda_runtime_get_version", "cuda_driver_get_version", "cudnn_get_version"):
        try:
            out[name.removesuffix("_get_version")] = getattr(cuda_versions, name)()
        except Exception:  # noqa: BLE001 — no CUDA plugin, or no driver: recorded as None
            out[name.removesuffix("_get_version")] = None
    return out


def check_attention(small: bool) -> bool:
    """The attention equality check (gpu_attention_check.attention_errors): one line per record and a verdict."""
    records = gpu_attention_check.attention_errors(small)
    for record in records:
        emit(record)
    failed = [f"{r['check']}:{r['kind']}:{r.get('implementation', 'xla')}" for r in records if not r["passed"]]
    emit({"check": "attention_equality", "passed": not failed, "failed": failed,
          "limits": gpu_attention_check.LIMITS})
    return not failed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on any backend (CPU): checks the code paths")
    ap.add_argument("--dtype", default="bfloat16", help="compute dtype")
    ap.add_argument("--steps", type=int, default=10, help="timed training steps per shape")
    ap.add_argument("--base-lengths", default="64,256", help="row lengths (buckets) timed for base")
    ap.add_argument("--big-lengths", default="64", help="row lengths (buckets) timed for big")
    ap.add_argument("--sentences", type=int, default=NEWSTEST_SENTENCES, help="sentences decoded")
    ap.add_argument("--override", action="append", default=[],
                    help="config override KEY=VALUE for every config, e.g. model.attention_implementation=cudnn")
    args = ap.parse_args()

    def configured(config):
        config.model.dtype = args.dtype
        for item in args.override:
            key, value = item.split("=", 1)
            section, field = key.split(".", 1)
            old = config[section][field]
            config[section][field] = type(old)(value) if not isinstance(old, bool) else value == "true"
        return config

    emit(versions())
    check_attention(small=args.smoke)
    if args.smoke:
        small = configured(tiny.get_config())
        small.data.tokens_per_batch, small.data.max_length = 512, 32
        smoke_peak = matmul_tflops(256, jnp.float32)
        emit({"check": "peak", "measured_tflops": smoke_peak, "vendor_tflops": None})
        check_train("tiny", small, [32], 2, None, smoke_peak)
        small.decode.batch_size = 4
        check_decode(small, 8)
        return
    n = 8192 if jax.default_backend() != "cpu" else 1024
    measured = matmul_tflops(n, jnp.bfloat16)
    emit({"check": "peak", "matmul": f"{n}^3 bf16", "measured_tflops": measured, "vendor_tflops": vendor_peak()})
    check_train("base", configured(base.get_config()), [int(x) for x in args.base_lengths.split(",")], args.steps,
                vendor_peak(), measured)
    check_train("big", configured(big.get_config()), [int(x) for x in args.big_lengths.split(",")],
                max(3, args.steps // 2), vendor_peak(), measured)
    check_decode(configured(base.get_config()), args.sentences)


if __name__ == "__main__":
    main()
