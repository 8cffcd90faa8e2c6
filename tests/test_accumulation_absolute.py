"""Gradient accumulation and loss normalisation in absolute terms (§5.4 loss, §5.3 Adam).

One optimizer step's gradient must be the gradient of

    Σ over the step's non-pad targets of the label-smoothed cross-entropy / the step's global non-pad count

whatever the mesh and the number of accumulation micro-batches. Comparing two runs with each other (as
tests/test_train_sharding.py does) cannot see a normalisation both share, and Adam is blind to a constant factor
in the gradient, so the subprocess tests/scripts/accumulation_absolute.py compares the train step on 1 device and
on a (4, 1, 1) mesh with grad_accum_steps = 2 against an independent ``jax.grad`` of that objective and an
independent Adam: the step-1 gradient (Adam's μ₁ / (1 - β₁)), μ and ν after 3 steps, the parameters after 3 steps
and the reported losses. Dropout is off. (The 4 simulated devices must be set before JAX starts.)
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).parent / "scripts" / "accumulation_absolute.py"
TIMEOUT_S = 600  # generous for a shared machine; the script takes ~15 s

GRAD_RTOL = 1e-5  # fp32, summation order differs (devices, micro-batches)


@pytest.fixture(scope="module")
def result() -> dict:
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=TIMEOUT_S,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-5000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stdout[-3000:]
    return json.loads(lines[-1])


def test_the_batches_have_uneven_padding(result):
    # 16 rows of 16 with padding: per-micro-batch and per-position normalisations differ from the global one.
    assert all(0 < count < 16 * 16 for count in result["counts"])
    assert len(set(result["counts"])) == 3


@pytest.mark.parametrize("run", ["1", "4,1,1/accum2"])
def test_step_gradient_is_the_global_token_mean(result, run):
    r = result["runs"][run]
    assert r["same_initial_params"]
    assert r["tokens"] == result["counts"]  # the global count of non-pad targets, all devices and micro-batches
    assert r["grad_1"] < GRAD_RTOL, f"{run}: step-1 gradient off by {r['grad_1']:.2e} (relative, worst leaf)"
    # The key biases' gradient is rounding noise around 0 in both (see the script's NOISE).
    assert r["grad_1_noise_scale"] < 1e-6 and result["reference_grad_1_noise_scale"] < 1e-6


def test_the_comparison_tells_wrong_normalisations_apart(result):
    for name, error in result["wrong"].items():
        assert error > 1000 * GRAD_RTOL, f"{name} gives only {error:.2e}"


@pytest.mark.parametrize("run", ["1", "4,1,1/accum2"])
def test_three_adam_steps_equal_the_independent_computation(result, run):
    r = result["runs"][run]
    # Adam's moments carry the gradients of all 3 steps in absolute units.
    assert r["mu_3"] < 10 * GRAD_RTOL and r["nu_3"] < 10 * GRAD_RTOL, r
    # Parameters moved by up to 6 learning rates of step 1 (lr₁ + lr₂ + lr₃ in warm-up) and agree to a small
    # fraction of one (an element whose gradient is near 0 is the most sensitive to summation order).
    assert 5 < r["moved_in_lr"] < 7
    assert r["params_3_in_lr"] < 0.05, f"{run}: parameters differ by {r['params_3_in_lr']:.3f} lr"
    assert r["params_3_b_k_in_lr"] < 7  # b_k steps on noise: bounded by the steps' learning rates only


@pytest.mark.parametrize("run", ["1", "4,1,1/accum2"])
def test_reported_losses_are_the_global_token_means(result, run):
    r = result["runs"][run]
    # train_loss: smoothed cross-entropy minus the smoothed targets' entropy; train_nll: -log p(reference).
    np.testing.assert_allclose(r["losses"], result["reference_losses"], rtol=1e-5)
    np.testing.assert_allclose(r["nlls"], result["reference_nlls"], rtol=1e-5)
