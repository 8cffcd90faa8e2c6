"""Training throughput and MFU on the peer shapes (issue: training ≥ 1.0× HF Marian on every shape).

    python bench/train_throughput.py --shapes=tiny,small,base [--peak-gflops=X] [--dtype=float32]

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

import jax
import numpy as np

from bench.common import matmul_peak_gflops, shape_config, summary, timed
from transformer_jax import sharding
from transformer_jax.model.size import flops_per_target_token
from transformer_jax.train.step import init_state, make_setup, make_train_step


def bench_shape(name: str, batch: int, length: int, dtype: str, budget_s: float, peak: float) -> dict:
    config = shape_config(name, dtype)
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
    s = summary(times)
    tokens = batch * length
    flops = flops_per_target_token(config.model, length) * tokens
    return {"shape": name, "dtype": dtype, "batch": batch, "src_len": length, "tgt_len": length,
            "tokens_per_s": tokens / s["median_s"], "step_s": s["median_s"], "gflop_per_step": flops / 1e9,
            "mfu": flops / s["median_s"] / (peak * 1e9), "peak_gflops": peak, **s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="tiny,small,base", help="comma-separated: tiny, small, base")
    ap.add_argument("--batch", type=int, default=64, help="sentences per step")
    ap.add_argument("--length", type=int, default=32, help="source and target tokens per sentence")
    ap.add_argument("--dtype", default="float32", help="compute dtype (float32 or bfloat16)")
    ap.add_argument("--budget-s", type=float, default=20.0, help="timed seconds per shape (after warm-up)")
    ap.add_argument("--peak-gflops", type=float, default=None, help="report MFU against this peak instead")
    args = ap.parse_args()
    peak = args.peak_gflops or matmul_peak_gflops()
    print(json.dumps({"matmul_peak_gflops": peak, "measured": args.peak_gflops is None}), flush=True)
    results = []
    for name in args.shapes.split(","):
        r = bench_shape(name, args.batch, args.length, args.dtype, args.budget_s, peak)
        results.append(r)
        print(json.dumps(r), flush=True)
    last = results[-1]
    print(json.dumps({"shape": last["shape"], "tokens_per_s": last["tokens_per_s"], "mfu": last["mfu"],
                      "peak_gflops": peak, "results": results}))


if __name__ == "__main__":
    main()
