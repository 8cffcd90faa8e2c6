"""Training throughput and MFU on the peer shapes (issue: training ≥ 1.0× HF Marian on every shape).

    python bench/train_throughput.py --shapes=tiny,small,base [--peak-gflops=X] [--dtype=float32]
    python bench/train_throughput.py --workdir=runs/m30k_search/tiny   # a real run's step, isolated, vs its log
    python bench/train_throughput.py --shapes=tiny --profile           # + time per XLA op (bench/step_profile.py)

One training step = forward + backward + Adam on a batch of 64 × 32 source and 32 target tokens (every token
real, dropout 0.1, label smoothing 0.1), exactly the peers' setting (../shared/bench/peers/PEERS.md).
MFU = model FLOPs per step (transformer_jax/model/size.py, the `describe` formula) / step time / the fp32
matmul peak measured in the same run (or --peak-gflops). Prints one JSON line per shape; the last line is a
JSON object with every shape.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import statistics

import jax
import ml_collections
import numpy as np

from bench.common import matmul_peak_gflops, shape_config, summary, timed
from bench.step_profile import profile_steps
from transformer_jax import host_memory, sharding
from transformer_jax.model.size import flops_per_target_token
from transformer_jax.run import folder, provenance
from transformer_jax.run.metrics import read_metrics
from transformer_jax.train.step import init_state, make_setup, make_train_step, passes_per_row


def bench_shape(name: str, batch: int, length: int, dtype: str, budget_s: float, peak: float,
                config: ml_collections.ConfigDict | None = None, profile: bool = False) -> dict:
    """One shape: a peer shape by ``name``, or ``config``'s model (a run's) labelled ``name``; ``profile`` adds
    the step's time per XLA op (bench/step_profile.py)."""
    config = config or shape_config(name, dtype)
    mesh = sharding.make_mesh(config.train.mesh)
    setup = make_setup(config, mesh)
    state = init_state(setup)
    step = make_train_step(setup)
    rng = np.random.RandomState(0)
    v = config.model.vocab_size
    local = {"inputs": rng.randint(3, v, (batch, length)).astype(np.int32),
             "targets": rng.randint(3, v, (batch, length)).astype(np.int32)}
    with jax.set_mesh(mesh):
        data = sharding.global_batch(local, mesh)
        holder = [state]

        def run():
            holder[0], metrics = step(holder[0], data)
            jax.block_until_ready(metrics)

        times = timed(run, budget_s=budget_s)
        ops = {"profile": profile_steps(run)} if profile else {}
    s = summary(times)
    tokens = batch * length
    flops = flops_per_target_token(config.model, length) * tokens * passes_per_row(config)
    return {"shape": name, "dtype": dtype, "batch": batch, "src_len": length, "tgt_len": length,
            "tokens_per_s": tokens / s["median_s"], "step_s": s["median_s"], "gflop_per_step": flops / 1e9,
            "mfu": flops / s["median_s"] / (peak * 1e9), "peak_gflops": peak, **s, **ops}


def bench_run(workdir: str, budget_s: float, peak: float, profile: bool = False) -> dict:
    """A run's training step in isolation vs the run: per compiled shape (rows × length) the step time with every
    token real, and the run's logged real target tokens/s (per log interval; data, host syncs, checkpoints and
    the packing's padding included, compilations and evaluations excluded as the trainer logs it). ``expected_tokens_per_s`` = isolated tokens/s at the run's mean fill rate, over
    the shapes in the proportion the run used them (one step each: bucket frequencies are not logged)."""
    config = folder.load_config(workdir)
    records = read_metrics(workdir)
    shapes = sorted({(int(r["batch_rows"]), int(r["batch_length"])) for r in records if "batch_rows" in r})
    logged = [r["tokens_per_s"] for r in records if r.get("tokens_per_s") is not None]
    fills = [r["fill_rate"] for r in records if "fill_rate" in r]
    results = [bench_shape(workdir, rows, length, config.model.dtype, budget_s, peak, config, profile)
               for rows, length in shapes]
    for r in results:
        print(json.dumps(r), flush=True)
    fill = statistics.mean(fills) if fills else 1.0
    step_s = statistics.mean(r["step_s"] for r in results)
    tokens = statistics.mean(r["batch"] * r["tgt_len"] for r in results)
    return {"workdir": workdir, "shapes": shapes, "isolated_step_s": step_s, "fill_rate": fill,
            "expected_tokens_per_s": tokens * fill / step_s,
            "logged_tokens_per_s_median": statistics.median(logged) if logged else None,
            "logged_intervals": len(logged)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="tiny,small,base", help="comma-separated: tiny, small, base")
    ap.add_argument("--batch", type=int, default=64, help="sentences per step")
    ap.add_argument("--length", type=int, default=32, help="source and target tokens per sentence")
    ap.add_argument("--dtype", default="float32", help="compute dtype (float32 or bfloat16)")
    ap.add_argument("--budget-s", type=float, default=20.0, help="timed seconds per shape (after warm-up)")
    ap.add_argument("--peak-gflops", type=float, default=None, help="report MFU against this peak instead")
    ap.add_argument("--workdir", default=None, help="bench a run instead: its model (config.json) on every batch "
                    "shape its training compiled (metrics.jsonl), beside the real tokens/s it logged")
    ap.add_argument("--profile", action="store_true", help="also trace a few steps of each shape and print the "
                    "time per XLA op: the matmul share and the largest ops outside the matmuls")
    args = ap.parse_args()
    host_memory.keep_freed_memory()  # as the CLI does, before the first computation
    peak = args.peak_gflops or matmul_peak_gflops()
    print(json.dumps({"matmul_peak_gflops": peak, "measured": args.peak_gflops is None,
                      "cpu_model": provenance.cpu_model(),
                      "host_malloc": host_memory.setting()}), flush=True)
    if args.workdir:
        print(json.dumps(bench_run(args.workdir, args.budget_s, peak, args.profile)))
        return
    results = []
    for name in args.shapes.split(","):
        r = bench_shape(name, args.batch, args.length, args.dtype, args.budget_s, peak, profile=args.profile)
        results.append(r)
        print(json.dumps(r), flush=True)
    last = results[-1]
    print(json.dumps({"shape": last["shape"], "tokens_per_s": last["tokens_per_s"], "mfu": last["mfu"],
                      "peak_gflops": peak, "results": results}))


if __name__ == "__main__":
    main()
