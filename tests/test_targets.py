"""Compile targets without compiling (target.py, precision.py, aot.compute_choices): the names users type map to
libtpu topologies and GPU layouts, "auto" dtype and attention follow the target's platform, and a missing [aot]
extra is one line naming the install command. No libtpu or CUDA plugin needed (tests/test_aot.py compiles)."""

import importlib.util

import jax.numpy as jnp
import pytest

from transformer_jax import aot
from transformer_jax import target as targets
from transformer_jax.configs import base, table3
from transformer_jax.model import precision
from transformer_jax.model.attention import attention_implementation


@pytest.mark.parametrize("name, topology, slices, chip", [
    ("v5e-1", "v5e:1x1", 1, "v5e"), ("v5e-8", "v5e:2x4", 1, "v5e"), ("v5e-16", "v5e:4x4", 1, "v5e"),
    ("v5e-256", "v5e:16x16", 1, "v5e"), ("2xv5e-256", "v5e:16x16", 2, "v5e"), ("v6e-64", "v6e:8x8", 1, "v6e"),
    # v4 / v5p are named by TensorCores: v4-32 is 16 chips, v5p-128 is 64 (libtpu calls v5p "v5")
    ("v4-8", "v4:2x2x1", 1, "v4"), ("v4-32", "v4:2x2x4", 1, "v4"), ("v5p-128", "v5:4x4x4", 1, "v5p"),
    ("v5p:2x2x2", "v5:2x2x2", 1, "v5p"), ("V5E:4x4", "v5e:4x4", 1, "v5e"),
    ("h100x8", "1x1x8", 1, "h100"), ("h100x16", "1x2x8", 1, "h100"), ("h200x4", "1x1x4", 1, "h200"),
    ("a100x8", "1x1x8", 1, "a100"),
])
def test_names_map_to_topologies(name, topology, slices, chip):
    t = targets.parse(name)
    assert (t.topology, t.num_slices, t.chip.key) == (topology, slices, chip)
    assert t.platform == ("gpu" if chip in ("a100", "h100", "h200") else "tpu")


def test_single_host_v5e_slices_are_one_host():
    """A v5e-8 is one VM with 8 chips (libtpu's default would model two hosts of 4)."""
    assert targets.parse("v5e-8").chips_per_host == (2, 4, 1)
    assert targets.parse("v5e-16").chips_per_host is None


@pytest.mark.parametrize("name", ["v5e-3", "v4-6", "v5p-4", "v5e-256x", "h100x12", "tpu", "2xh100x8", "v7-8"])
def test_bad_names_are_one_line_errors(name):
    with pytest.raises(targets.TargetError) as error:
        targets.parse(name)
    assert "\n" not in str(error.value) and name in str(error.value)


def test_every_listed_example_parses():
    assert len(targets.EXAMPLES) == len({targets.parse(n).name for n in targets.EXAMPLES})


def test_chips_have_memory_and_peak():
    for chip in targets.CHIPS.values():
        assert 0 < chip.usable_gib <= chip.hbm_gib + 1 and chip.peak_tflops > 100, chip
    assert targets.CHIPS["v5e"].usable_bytes == int(15.75 * 2**30)
    assert targets.CHIPS["h100"].usable_gib == pytest.approx(0.75 * 85045477376 / 2**30, abs=0.01)


@pytest.mark.parametrize("platform, dtype, attention", [
    ("tpu", "bfloat16", "xla"), ("gpu", "bfloat16", "cudnn"), ("cpu", "float32", "cpu")])
def test_auto_follows_the_platform(platform, dtype, attention):
    assert aot.compute_choices(base.get_config().model, platform) == {
        "platform": platform, "dtype": dtype, "attention": attention}


def test_explicit_choices_stay():
    m = base.get_config().model
    m.dtype, m.attention_implementation = "float32", "xla"
    assert aot.compute_choices(m, "gpu") == {"platform": "gpu", "dtype": "float32", "attention": "xla"}
    m.dtype = "auto"
    m.attention_implementation = "auto"
    m.attention_dropout_rate = 0.1  # weights are dropped: only the einsum path forms them
    assert aot.compute_choices(m, "tpu")["attention"] == "cpu"


def test_cudnn_only_where_its_kernel_takes_the_heads():
    """Row B-style heads wider than 128 (or not a multiple of 8) fall back to XLA's attention on GPU."""
    m = table3.get_config("A1").model  # h = 1: d_k = d_v = 512
    assert aot.compute_choices(m, "gpu")["attention"] == "xla"


def test_compiling_for_changes_what_traced_code_sees():
    q = jnp.zeros((1, 4, 2, 64), jnp.bfloat16)
    assert precision.platform() == "cpu"
    with precision.compiling_for("tpu"):
        assert precision.compute_dtype("auto") == jnp.bfloat16
        assert attention_implementation("auto", q, q, None) == "xla"
        with precision.compiling_for("gpu"):
            assert attention_implementation("auto", q, q, None) == "cudnn"
        assert precision.platform() == "tpu"
    assert precision.platform() == "cpu" and precision.compute_dtype("auto") == jnp.float32
    with pytest.raises(ValueError, match="Unknown platform"), precision.compiling_for("cuda"):
        pass


def test_missing_extra_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "libtpu" else real(name, *a))
    with pytest.raises(targets.TargetUnavailable) as error:
        targets.check_installed("tpu")
    assert str(error.value).endswith('pip install -e ".[aot]"') and "libtpu" in str(error.value)


def test_compile_verb_on_this_machine_and_its_refusals():
    """`compile --target=local` runs the verb end to end without the [aot] extra (XLA:CPU: float32, the einsum
    attention, no memory budget); a missing or unknown --target is one line with exit status 1."""
    import json

    from cli_runs import run_all

    results = run_all({"local": ["compile", "--config=tiny", "--target=local", "--json"],
                       "none": ["compile", "--config=tiny"],
                       "unknown": ["compile", "--config=tiny", "--target=v5e-3"]})
    local = results["local"]
    assert local.returncode == 0, local.stderr[-2000:]
    report = json.loads(local.stdout.strip().splitlines()[-1])
    assert (report["platform"], report["dtype"], report["attention"], report["devices"]) == ("cpu", "float32", "cpu", 1)
    assert [p["name"] for p in report["programs"]] == ["train 64", "decode"] and report["fits"]
    train = report["programs"][0]
    assert train["memory"]["argument"] > 0 and train["budget_bytes"] is None and train["rows_per_device"] == train["rows"]
    for name, expected in (("none", "--target is required"), ("unknown", "--target=v5e-3: v5e slices are named")):
        result = results[name]
        assert result.returncode == 2 and result.stdout == ""  # a command-line mistake (launch/cli.py USAGE_ERROR)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"transformer-jax compile: {expected}"), result.stderr


def test_device_kinds_name_the_chips_libtpu_models():
    """The kinds jax reports for TPU chips (checked against libtpu's topology devices by test_aot.py)."""
    assert {targets.TPU_KINDS[k] for k in targets.TPU_KINDS} == {"v4", "v5e", "v5p", "v6e"}
