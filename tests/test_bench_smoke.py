"""Benchmarks run at tiny sizes: bench/accelerator_check.sh --smoke (the accelerator check's code paths on CPU, so
the script is known to run before an accelerator is ever lent; it is run there once, in one short call) and
bench/complexity.py (Table 1's timing: its records, fitted slopes and plot)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from transformer_jax.configs import tiny
from transformer_jax.model.size import flops_per_target_token

REPO = Path(__file__).parent.parent


@pytest.mark.slow  # ~40 s on 2 cores: the slow step (README), keeping the default run under ~10 minutes
def test_accelerator_check_smoke():
    env = {**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(["bash", str(REPO / "bench" / "accelerator_check.sh"), "--smoke"], capture_output=True,
                          text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = list(map(json.loads, filter(None, proc.stdout.splitlines())))
    records = {r["check"]: r for r in lines}
    assert set(records) == {"versions", "mask_fp32_xla_vs_cpu", "mask_bf16_vs_fp32_reference", "attention_equality",
                            "peak", "train", "decode"}
    assert records["versions"]["jax"] and records["versions"]["cudnn"] is None  # (no CUDA here)
    # the attention equality check: every mask kind, each implementation here, within its limits
    masks = [r for r in lines if r["check"].startswith("mask_")]
    assert len(masks) == 5 * 3 and all(r["passed"] for r in masks) and records["attention_equality"]["passed"]
    train, decode = records["train"], records["decode"]
    assert train["attention"] == "cpu" and train["attention_kernel_in_hlo"].startswith("xla or einsum")
    # the tiny smoke config asks for 512 real tokens a step: the step holds them (train/plan.py), in bf16
    assert train["dtype"] == "bfloat16" and abs(train["real_target_tokens"] / 512 - 1) <= 0.1
    # Throughput and utilisation are the step's real tokens and model/size.py's FLOPs over the measured step time.
    tokens, step_s = train["real_target_tokens"], train["step_s"]
    assert train["batch_shape"][1] == 32 and train["target_tokens_per_s"] == pytest.approx(tokens / step_s)
    flops = flops_per_target_token(tiny.get_config().model, 32) * tokens
    assert train["tflops_per_s"] == pytest.approx(flops / step_s / 1e12)
    assert train["mfu_vs_measured_matmul"] == pytest.approx(train["tflops_per_s"] / records["peak"]["measured_tflops"])
    # At initialisation the loss (KL to the smoothed targets) is that of a near-uniform guess: ln V − H(q_ε).
    v, eps = tiny.get_config().model.vocab_size, tiny.get_config().train.label_smoothing
    entropy = -(1 - eps) * math.log(1 - eps) - eps * math.log(eps / (v - 1))
    assert abs(train["loss"] - (math.log(v) - entropy)) < 0.5, train["loss"]
    assert decode["sentences"] == 8 and decode["output_tokens"] > 8


def test_complexity_bench_records_slopes_and_plot(tmp_path):
    figure = tmp_path / "complexity.png"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "complexity.py"), "--lengths=32,64,128",
                           "--windows=0,4", "--d_model=32", "--budget_s=0.05", f"--plot={figure}"],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    *points, last = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [(p["window"], p["n"]) for p in points] == [(w, n) for w in (0, 4) for n in (32, 64, 128)]
    for p in points:
        assert p["best_s"] <= p["median_s"] and p["us_per_token"] == pytest.approx(p["median_s"] / p["n"] * 1e6)
    # the fitted slopes are those of the printed medians (n ≥ d: all three lengths here)
    for window in (0, 4):
        mine = [p for p in points if p["window"] == window]
        expected = np.polyfit(np.log([p["n"] for p in mine]), np.log([p["median_s"] for p in mine]), 1)[0]
        assert last["summary"][str(window)]["slope_n_ge_d"] == pytest.approx(expected)
    assert figure.stat().st_size > 10_000


def test_step_profile_splits_op_time_into_matmuls_and_the_rest():
    """bench/step_profile.py (train_throughput --profile): per-step op times from the profiler's trace, in ms, with
    the dots counted as matmuls and the elementwise work outside them."""
    import time

    import jax
    import jax.numpy as jnp

    sys.path.insert(0, str(REPO))
    from bench.step_profile import profile_steps

    x = jnp.ones((768, 768), jnp.float32)
    matmuls = jax.jit(lambda a: (a @ a) @ a)
    elementwise = jax.jit(lambda a: jnp.sin(jnp.exp(a * 1e-3)) + jnp.cos(a))

    def run(f):
        def step():
            f(x).block_until_ready()
        step()
        tic = time.perf_counter()
        result = profile_steps(step, steps=4)
        return result, (time.perf_counter() - tic) / 4 * 1000

    mm, mm_wall = run(matmuls)
    assert mm["matmul_share"] > 0.8, mm
    assert 0 < mm["wall_ms_per_step"] <= mm_wall  # per step, in ms: not the 4 steps' total, not µs
    assert mm["op_ms_per_step"] > 0.3 * mm["wall_ms_per_step"]
    ew, _ = run(elementwise)
    assert ew["matmul_share"] == 0.0 and ew["top_outside_matmuls_ms"], ew
