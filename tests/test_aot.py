"""Ahead-of-time compilation for TPU topologies and GPU targets on this CPU (aot.py, fit.py, `transformer-jax
compile`): the compiled step holds exactly the sharded state, XLA's FLOPs match the formula, "auto" compiles
bfloat16 for a TPU, an over-budget run fails in one line with a suggestion that itself compiles, and describe and
compile plan the same batches.

Needs the [aot] extra (libtpu, jax's CUDA plugin, cuDNN): marked ``aot``, run by CI in its own environment
(`.ci/run`, with TRANSFORMER_JAX_REQUIRE_AOT=1 so that a missing package fails instead of skipping).
"""

import importlib.util
import math
import os
import subprocess
import sys

import jax
import pytest

from transformer_jax import aot, fit
from transformer_jax import target as targets
from transformer_jax.configs import base, tiny
from transformer_jax.data.batching import BATCH_KEYS
from transformer_jax.launch.describe import describe
from transformer_jax.model.size import count_parameters

pytestmark = pytest.mark.aot

if importlib.util.find_spec("libtpu") is None or importlib.util.find_spec("jax_cuda12_plugin") is None:
    if os.environ.get("TRANSFORMER_JAX_REQUIRE_AOT"):
        raise ImportError(f'TRANSFORMER_JAX_REQUIRE_AOT is set but the [aot] extra is missing: {targets.AOT_INSTALL}')
    pytest.skip(f"the [aot] extra is not installed ({targets.AOT_INSTALL})", allow_module_level=True)

CLI = [sys.executable, "-m", "transformer_jax.launch.cli", "compile"]
# the test model: tiny's depth with base-like widths, so matmuls dominate the FLOPs as in the paper's models
WIDE = ["--config.model.d_model=256", "--config.model.d_ff=1024", "--config.model.num_heads=4",
        "--config.model.d_k=64", "--config.model.d_v=64", "--config.model.vocab_size=2000",
        "--config.data.tokens_per_batch=8192"]


def wide_config(**mesh):
    c = tiny.get_config()
    for flag in WIDE:
        key, value = flag.removeprefix("--config.").split("=")
        section, field = key.split(".")
        c[section][field] = int(value)
    for axis, size in mesh.items():
        c.train.mesh[axis] = size
    return c


_COMPILED = {}


def compiled(name: str, **mesh) -> tuple[aot.Compiler, aot.Program]:
    """The wide config's training step on target ``name`` (compiled once per test session)."""
    key = (name, tuple(sorted(mesh.items())))
    if key not in _COMPILED:
        compiler = aot.Compiler.for_target(wide_config(**mesh), targets.parse(name))
        compiler.keep_executables = True
        _COMPILED[key] = compiler, compiler.train()[0]
    return _COMPILED[key]


def padded_bytes(shape, dtype, layout) -> int:
    """Bytes of a shard in XLA's layout: the minor dimensions rounded up to the layout's first tile."""
    physical = [shape[i] for i in layout.major_to_minor] or [1]
    tile = layout.tiling[0] if layout.tiling else ()
    physical = [1] * max(0, len(tile) - len(physical)) + physical
    for j, t in enumerate(reversed(tile)):
        k = len(physical) - 1 - j
        physical[k] = -(-physical[k] // t) * t
    return math.prod(physical) * dtype.itemsize


def expected_argument_bytes(compiler: aot.Compiler, program: aot.Program) -> int:
    from transformer_jax.train.step import make_setup

    setup = make_setup(compiler.config, compiler.mesh)
    state = jax.tree.leaves(setup.abstract_state)
    batch = [jax.ShapeDtypeStruct((program.rows, program.length), "int32",
                                  sharding=jax.sharding.NamedSharding(compiler.mesh, jax.sharding.PartitionSpec(("data", "fsdp"))))
             for _ in BATCH_KEYS]
    formats = jax.tree.leaves(program.executable.input_formats[0]) + jax.tree.leaves(program.executable.input_formats[1])
    return sum(padded_bytes(a.sharding.shard_shape(a.shape), a.dtype, f.layout)
               for a, f in zip(state + batch, formats, strict=True))


def unsharded_state_bytes(config) -> tuple[int, int]:
    """(all parameters, those without an ``embed`` axis — the per-head q/k/v biases and the FFN's inner bias, which
    fsdp leaves whole), in bytes, counted from the config by hand."""
    m = config.model
    total = count_parameters(m)["total"] * 4
    attention_blocks = m.num_encoder_layers + 2 * m.num_decoder_layers
    whole = (attention_blocks * m.num_heads * (2 * m.d_k + m.d_v) + (m.num_encoder_layers + m.num_decoder_layers)
             * m.d_ff) * 4
    return total, whole


@pytest.mark.parametrize("name", ["v5e:2x2", "v5e:4x4"])
def test_arguments_are_parameters_and_adam_moments_under_the_sharding(name):
    """Per chip: parameters + Adam's two moments (+ step, rng, Adam's count) + this chip's rows, exactly as XLA lays
    them out; replicated on a data-parallel mesh, a quarter of every embed-axis matrix with fsdp=4."""
    total, whole = unsharded_state_bytes(wide_config())
    scalars = 4 + 8 + 4 + 4  # step (int32), rng (uint32[2]), the counts of Adam and of the schedule (int32)
    for mesh, expected_state in (({}, 3 * total + scalars),
                                 ({"data": -1, "fsdp": 4}, 3 * ((total - whole) // 4 + whole) + scalars)):
        compiler, program = compiled(name, **mesh)
        assert aot.state_bytes(compiler.config, compiler.mesh) == expected_state, mesh
        assert program.memory["argument"] == expected_argument_bytes(compiler, program), mesh
    # XLA pads each shard to its tiles (a 64-wide shard of a 256-wide row takes a 128-wide tile), so its ratio is
    # above the unpadded 1/4; still well under half
    replicated, sharded = compiled(name)[1].memory["argument"], compiled(name, data=-1, fsdp=4)[1].memory["argument"]
    assert 0.25 < sharded / replicated < 0.4


@pytest.mark.parametrize("name", ["v5e:2x2", "v5e:4x4"])
def test_xla_flops_match_the_formula(name):
    """XLA's count of the partitioned step × chips vs model/size.py for the step's row slots: within 3% (the
    formula leaves out elementwise work: LayerNorm, softmax, dropout masks, Adam)."""
    _, program = compiled(name)
    assert 1.0 <= program.flops_ratio <= 1.03, program.flops_ratio


def test_hosts_and_rows_per_chip():
    compiler, program = compiled("v5e:4x4")
    assert (compiler.target.num_hosts, compiler.target.devices_per_host) == (4, 4)
    assert program.rows % 16 == 0 and program.rows_per_device == program.rows // 16


def test_auto_compiles_bfloat16_for_a_tpu():
    """model.dtype="auto" on this CPU host, lowered for a TPU: the matmuls' operands are bfloat16 (float32 when
    asked; XLA:TPU may still run those in bf16 passes, its own choice, so the lowered program is what is checked)."""
    def dot_operands(program) -> list[str]:
        lines = [line for line in program.lowered.as_text().splitlines() if "stablehlo.dot_general" in line]
        return [line.rsplit(":", 1)[-1].split("->")[0] for line in lines]

    _, program = compiled("v5e:2x2")
    operands = dot_operands(program)  # every matmul reads bfloat16 (the attention logits' gradients are float32)
    assert len(operands) > 20 and all("xbf16>" in o for o in operands)
    float32 = wide_config()
    float32.model.dtype = "float32"
    compiler = aot.Compiler.for_target(float32, targets.parse("v5e:2x2"))
    compiler.keep_executables = True
    assert not any("bf16" in o for o in dot_operands(compiler.train()[0]))


def test_describe_and_compile_plan_the_same_batches():
    """`describe --num_processes=4 --devices_per_process=4`, `describe --target=v5e-16` and `compile
    --target=v5e-16` lay out the same rows × length for every bucket of the paper's base."""
    config, target = base.get_config(), targets.parse("v5e-16")
    by_layout = describe(config, 32, num_processes=4, devices_per_process=4)["batch_shapes"]
    by_target = describe(config, 32, target=target)["batch_shapes"]
    compiler = aot.Compiler.for_target(config, target)
    assert by_layout == by_target == [[b.rows, b.length] for b in compiler.plan.buckets]
    with pytest.raises(ValueError, match="contradicts"):
        describe(config, 32, num_processes=8, target=target)


def test_out_of_memory_is_a_result_not_a_crash():
    """A step over the chip's memory: XLA:TPU refuses it (RESOURCE_EXHAUSTED) and the program reports the need."""
    config = wide_config()
    config.data.tokens_per_batch = 16384 * 64
    program = aot.Compiler.for_target(config, targets.parse("v5e-1")).train()[0]
    assert program.memory is None and not program.fits
    assert program.needed_bytes > targets.CHIPS["v5e"].usable_bytes


def _run(args, **kwargs):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(CLI + args, capture_output=True, text=True, env=env, timeout=600, check=False, **kwargs)


def test_over_budget_fails_in_one_line_with_a_suggestion_that_compiles():
    """Exit status 1 and one line: the bucket, its need against the budget, and flags that fit — which the
    suggestion search compiled, and which compile to a fit when given."""
    _, program = compiled("v5e:2x2")
    budget_gib = 0.93 * program.memory["total"] / 2**30  # the step needs 7% more
    args = ["--config=tiny", *WIDE, "--target=v5e:2x2", f"--hbm_gib={budget_gib:.6f}", "--nodecode"]
    result = _run(args)
    assert result.returncode == 1, result.stderr[-2000:]
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("transformer-jax compile: bucket 64 needs") and "it fits with --config." in line, line
    suggested = line.split("it fits with ")[1].split(" (")[0].split()
    again = _run(args + suggested)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "fits: the largest program" in again.stdout


def test_suggestions_are_ordered_and_skip_what_cannot_fit():
    compiler, program = compiled("v5e:2x2")
    state = aot.state_bytes(compiler.config, compiler.mesh)
    budget = int(0.93 * program.memory["total"])
    found = fit.candidates(compiler.config, compiler.target, program, state, budget)
    # kind by kind — fsdp (the same math), accumulation, both, tensor, and only then fewer tokens — each from its
    # smallest change predicted to fit; only the fields that change (the mesh's data is already -1)
    kinds = [tuple(sorted(c.overrides)) for c in found]
    assert kinds[0] == ("train.mesh.fsdp",) and ("train.grad_accum_steps",) in kinds
    assert kinds.index(("train.grad_accum_steps",)) < kinds.index(("data.tokens_per_batch",))
    assert [c.changes_recipe for c in found] == sorted(c.changes_recipe for c in found)  # recipe changes last
    assert found[0].predicted_bytes <= fit.HEADROOM * budget


def test_gpu_target_compiles_with_cudnn_attention():
    """8×H100 from the packaged target description: XLA's GPU compiler (Triton) and cuDNN's fused attention."""
    compiler = aot.Compiler.for_target(wide_config(), targets.parse("h100x8"))
    compiler.keep_executables = True
    program = compiler.train()[0]
    assert program.fits and program.memory["argument"] > 0
    assert "__cudnn$fmha" in program.executable.as_text()


def test_multislice_puts_the_data_axis_across_slices():
    compiler = aot.Compiler.for_target(wide_config(), targets.parse("2xv5e-4"))
    slices = [{d.slice_index for d in compiler.mesh.devices[i].flat} for i in range(compiler.mesh.shape["data"])]
    assert {next(iter(s)) for s in slices} == {0, 1} and all(len(s) == 1 for s in slices)
    assert compiler.train()[0].fits


def test_cli_json_and_list_targets():
    listing = _run(["--list_targets"])
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert any(line.split()[:3] == ["v5e-256", "256", "64"] for line in listing.stdout.splitlines())
    result = _run(["--config=tiny", "--target=v5e-8", "--json"])
    assert result.returncode == 0, result.stderr[-2000:]
    import json

    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert (report["devices"], report["hosts"], report["dtype"], report["attention"]) == (8, 1, "bfloat16", "xla")
    assert [p["name"] for p in report["programs"]] == ["train 64", "decode"] and report["fits"]


@pytest.mark.parametrize("name, chip", [("v4-8", "v4"), ("v5e-1", "v5e"), ("v5p-8", "v5p"), ("v6e-8", "v6e")])
def test_topology_devices_report_the_kinds_local_targets_read(name, chip):
    """A job on the chip itself (``--target=local``) finds the chip's figures by jax's device_kind."""
    assert targets.TPU_KINDS[targets.parse(name).devices()[0].device_kind] == chip


def test_under_accumulation_only_the_formula_counts_flops():
    """XLA counts the body of the micro-batch loop once: its FLOPs would be a fraction of the step's (0.55 for big
    on one chip with 2 micro-batches), so they are not reported and estimates use the formula's."""
    config = wide_config()
    config.train.grad_accum_steps = 2
    program = aot.Compiler.for_target(config, targets.parse("v5e:2x2")).train()[0]
    assert program.fits and program.xla_flops is None and program.flops_ratio is None and program.formula_flops
    assert aot.step_flops([program])[1] == "formula"
