"""Paper-scale estimates per chip: compiled training-step memory and the time to train base / big (Table 2).

    python bench/paper_scale.py [--configs=base,big] [--chips=8] [--row-length=64] [--dtype=bfloat16]

Memory is what XLA allocates for one data-parallel chip's training step — the paper's ~25K-token batch
(``config.data.tokens_per_batch``) split over ``--chips`` (rows of ``--row-length`` tokens): parameters, Adam
moments and the batch (arguments), the new state (outputs, donated), and temporaries (activations kept for the
backward pass, gradients). It is compiled for this machine's backend (CPU here), so GPU/TPU compilers will differ
by their fusion and layout choices, not by the model's own arrays. Time is an estimate, not a measurement:
the model's training FLOPs (model/size.py, the `describe` formula) × target tokens per step × the paper's steps,
over ``chips × peak × mfu`` for each accelerator in ACCELERATORS. Prints one JSON line per config.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from transformer_jax.configs import base, big
from transformer_jax.model.size import count_parameters, flops_per_target_token
from transformer_jax.train.plan import step_memory

CONFIGS = {"base": base.get_config, "big": big.get_config}
# Dense peak TFLOP/s per chip in bf16 (vendor figures).
ACCELERATORS = {"H100 SXM": 989.0, "A100": 312.0, "TPU v5e": 197.0, "TPU v4": 275.0, "P100 (fp32, the paper's)": 9.3}


def estimate(name: str, chips: int, length: int, dtype: str, mfu: float) -> dict:
    config = CONFIGS[name]()
    config.model.dtype = dtype
    tokens = int(config.data.tokens_per_batch)  # per side (source, target) per step
    rows = max(1, tokens // chips // length)
    mem = step_memory(config, rows, length)
    peak_bytes = mem["total_bytes"]
    steps = int(config.train.num_steps)
    # §5.1: "approximately 25000 source tokens and 25000 target tokens": tokens_per_batch counts each side.
    flops = flops_per_target_token(config.model, length) * tokens * steps
    hours = {acc: flops / (chips * peak * 1e12 * mfu) / 3600 for acc, peak in ACCELERATORS.items()}
    return {"config": name, "params": count_parameters(config.model)["total"], "dtype": dtype, "chips": chips,
            "rows_per_chip": rows, "row_length": length, "steps": steps, "train_pflop": flops / 1e15,
            "memory_gib_per_chip": peak_bytes / 2**30, "argument_gib": mem["argument_bytes"] / 2**30,
            "temp_gib": mem["temp_bytes"] / 2**30,
            "assumed_mfu": mfu, "hours": hours}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="base,big", help="comma-separated: base, big")
    ap.add_argument("--chips", type=int, default=8, help="data-parallel chips sharing the ~25K-token batch")
    ap.add_argument("--row-length", type=int, default=64, help="packed row length (tokens)")
    ap.add_argument("--dtype", default="bfloat16", help="compute dtype (parameters and Adam stay float32)")
    ap.add_argument("--mfu", type=float, default=0.3, help="assumed model-FLOPs utilisation for the time estimate")
    args = ap.parse_args()
    for name in args.configs.split(","):
        print(json.dumps(estimate(name, args.chips, args.row_length, args.dtype, args.mfu)), flush=True)


if __name__ == "__main__":
    main()
