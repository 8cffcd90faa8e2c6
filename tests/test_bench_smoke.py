"""bench/accelerator_check.sh --smoke: the accelerator check's code paths on CPU with tiny shapes, so the script is
known to run before an accelerator is ever lent (it is run there once, in one short call)."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parent.parent


def test_accelerator_check_smoke():
    env = {**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(["bash", str(REPO / "bench" / "accelerator_check.sh"), "--smoke"], capture_output=True,
                          text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = {r["check"]: r for r in map(json.loads, filter(None, proc.stdout.splitlines()))}
    assert set(records) == {"device", "peak", "train", "decode"}
    train, decode = records["train"], records["decode"]
    # the tiny smoke config asks for 512 real tokens a step: the step holds them (train/plan.py), in bf16
    assert train["dtype"] == "bfloat16" and abs(train["real_target_tokens"] / 512 - 1) <= 0.1
    assert train["step_s"] > 0 and train["compile_s"] > 0 and train["target_tokens_per_s"] > 0
    assert 0 < train["mfu_vs_measured_matmul"] and train["loss"] > 0
    assert decode["sentences"] == 8 and decode["output_tokens"] > 8 and decode["wall_s"] > 0
