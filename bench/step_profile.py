"""Where a training step's time goes, op by op: a JAX profiler trace of a few steps, summed per XLA op.

XLA:CPU runs a compiled step as thunks, one per HLO op (fusions included) and traces each with its ``hlo_op``
name. Matrix multiplications are the ``ynn_fusion``s (XLA fuses each dot with its neighbours into an YNNPACK call),
``dot``s and ``convolution``s; everything else (softmax, layer norm, dropout masks, the Adam update, gathers,
transposes, copies) is "outside the matmuls" (the issue's item 3). Thunks of one step can run on both cores at once,
so op time can exceed wall time.

Used by ``bench/train_throughput.py --profile``.
"""

import collections
import glob
import gzip
import json
import os
import re
import tempfile
from collections.abc import Callable

import jax

MATMUL = re.compile(r"^(ynn_fusion|dot|convolution|.*gemm|.*matmul)")


def profile_steps(run_step: Callable[[], None], steps: int = 3) -> dict:
    """Traces ``steps`` calls of ``run_step`` (one training step each, blocking) and sums the time per HLO op.

    Returns wall ms per step, op ms per step (all threads), the matmul share of the op time, and the ten largest
    ops outside the matmuls (ms per step)."""
    with tempfile.TemporaryDirectory() as log_dir:
        with jax.profiler.trace(log_dir, create_perfetto_trace=True):
            for _ in range(steps):
                run_step()
        (path,) = glob.glob(os.path.join(log_dir, "**", "perfetto_trace.json.gz"), recursive=True)
        with gzip.open(path) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    per_op: collections.Counter = collections.Counter()
    wall = 0.0
    for e in events:
        if e.get("ph") != "X":
            continue
        op = e.get("args", {}).get("hlo_op")
        if op:
            per_op[re.sub(r"\.\d+$", "", op)] += e["dur"] / 1000 / steps  # µs → ms per step; .N copies summed
        elif e["name"] == "ThunkExecutor::Execute (wait for completion)":
            wall += e["dur"] / 1000 / steps
    total = sum(per_op.values())
    matmul = sum(ms for op, ms in per_op.items() if MATMUL.match(op))
    outside = [(op, ms) for op, ms in per_op.most_common() if not MATMUL.match(op)]
    return {"wall_ms_per_step": wall, "op_ms_per_step": total, "matmul_ms_per_step": matmul,
            "matmul_share": matmul / total if total else None,
            "top_outside_matmuls_ms": {op: round(ms, 2) for op, ms in outside[:10]}}
