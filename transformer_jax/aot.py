"""Ahead-of-time compilation of a run's programs for a target (target.py): the training step of every length
bucket, built as `train` builds it on that target, and the beam-search decode step (§6.1) at the config's decode
batch — with XLA's memory and cost analyses of each, read against the chip's memory and the FLOPs formula.

The same code as training: ``train/plan.py``'s batch plan for the target's hosts × devices, ``sharding.make_mesh``
over the target's devices (``config.train.mesh``), ``train/step.py``'s jitted step with its in/out shardings and
donated state, accumulation as configured; ``model.dtype`` / ``attention_implementation`` "auto" resolve for the
target's platform (model/precision.py ``compiling_for``), not this machine's. ``jax.jit(...).lower(abstract
arguments).compile()`` then runs XLA's TPU or GPU compiler, which fails with RESOURCE_EXHAUSTED where a step does
not fit, exactly as on the chip.

Memory per device is XLA's: arguments (parameters, Adam moments, this device's rows) + outputs − what the donated
state aliases + temporaries (activations kept for the backward pass, gradients) + generated code. FLOPs are XLA's
count of the partitioned program × devices, beside model/size.py's formula for the step's row slots (padding
included: it is computed); their ratio checks the formula (the rest is elementwise work, which it leaves out).
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import ml_collections

from transformer_jax import sharding
from transformer_jax.data.batch_plan import BucketPlan
from transformer_jax.data.batching import BATCH_KEYS
from transformer_jax.model.attention import resolve_implementation
from transformer_jax.model.build import model_setup
from transformer_jax.model.precision import compiling_for, compute_dtype
from transformer_jax.model.size import flops_per_target_token
from transformer_jax.target import GIB, Target
from transformer_jax.train import plan
from transformer_jax.train.step import make_setup, make_train_step, passes_per_row

# XLA:TPU's message when a program does not fit, e.g. "... HLO temporaries (30.22G) exceeds available HBM (15.75G)"
_OUT_OF_MEMORY = re.compile(r"\(([\d.]+)([KMGT])\) exceeds available HBM \(([\d.]+)([KMGT])\)")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclasses.dataclass
class Program:
    """One compiled program on the target, per device unless said otherwise.

    Attributes:
        name: "train 256" (the bucket's row length) or "decode".
        rows, length: the global batch shape ([rows, length] per side; decode: sentences × source length).
        rows_per_device: rows of one data-parallel device (all its micro-batches).
        padding_share: share of the step's token slots that are padding (empty rows and packing gaps).
        compile_s: seconds XLA took here.
        memory: XLA's memory analysis in bytes (argument, output, alias, temp, code, total); None if it did not fit.
        needed_bytes: what the compiler said it needed when it refused (RESOURCE_EXHAUSTED); else None.
        xla_flops: XLA's FLOPs of the whole step (all devices); None where XLA gives none (GPU, decode loops).
        formula_flops: model/size.py's FLOPs for the step's rows × length slots (training only).
        budget_bytes: what a device may use (Chip.usable_bytes); None where unknown (CPU).
        executable, lowered: XLA's compiled program and the StableHLO it came from, kept only when asked for
            (``Compiler.keep_executables``).
    """

    name: str
    rows: int
    length: int
    rows_per_device: int
    padding_share: float | None
    compile_s: float
    memory: dict | None
    needed_bytes: float | None
    xla_flops: float | None
    formula_flops: float | None
    budget_bytes: int | None
    executable: object = dataclasses.field(default=None, repr=False, compare=False)
    lowered: object = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def total_bytes(self) -> float:
        return self.memory["total"] if self.memory else self.needed_bytes

    @property
    def fits(self) -> bool:
        return self.memory is not None and (self.budget_bytes is None or self.memory["total"] <= self.budget_bytes)

    @property
    def flops_ratio(self) -> float | None:
        return self.xla_flops / self.formula_flops if self.xla_flops and self.formula_flops else None

    def as_dict(self) -> dict:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name not in ("executable", "lowered")}
        return {**fields, "total_bytes": self.total_bytes, "fits": self.fits, "flops_ratio": self.flops_ratio}


@dataclasses.dataclass
class Compiler:
    """A config laid out on a target: its mesh, batch plan and resolved compute choices, ready to compile."""

    config: ml_collections.ConfigDict
    target: Target
    mesh: jax.sharding.Mesh
    plan: plan.LayoutPlan
    budget_bytes: int | None
    keep_executables: bool = False  # keep each Program's compiled executable (tests read its layouts and HLO)

    @classmethod
    def for_target(cls, config: ml_collections.ConfigDict, target: Target, budget_bytes: int | None = None):
        devices = target.devices()
        layout = plan.layout_plan(config, target.num_hosts, target.devices_per_host)
        mesh = sharding.make_mesh(config.train.mesh, devices)
        return cls(config, target, mesh, layout, budget_bytes or target.chip.usable_bytes)

    @property
    def data_parallel(self) -> int:
        return self.mesh.shape["data"] * self.mesh.shape["fsdp"]

    def train(self, lengths: list[int] | None = None) -> list[Program]:
        """The training step of each bucket (all, or those of ``lengths``), as `train` runs it on the target."""
        buckets = [b for b in self.plan.buckets if lengths is None or b.length in lengths]
        with compiling_for(self.target.platform):
            setup = make_setup(self.config, self.mesh)  # (outside set_mesh: a target's devices run nothing here)
            step = make_train_step(setup)
            return [self._train_bucket(setup, step, b) for b in buckets]

    def _train_bucket(self, setup, step: Callable, bucket: BucketPlan) -> Program:
        batch = {k: jax.ShapeDtypeStruct((bucket.rows, bucket.length), jnp.int32,
                                         sharding=sharding.batch_sharding(self.mesh)) for k in BATCH_KEYS}
        formula = (flops_per_target_token(self.config.model, bucket.length) * bucket.rows * bucket.length
                   * passes_per_row(self.config))
        padding = 1.0 - bucket.real_tokens / (bucket.rows * bucket.length)
        # XLA's cost analysis counts a loop body once: under accumulation (a scan over micro-batches) its FLOPs
        # would be a fraction of the step's, so only the formula's are reported there
        return self._compile(f"train {bucket.length}", bucket.rows, bucket.length, padding, formula,
                             lambda: step.lower(setup.abstract_state, batch),
                             flops=int(self.config.train.grad_accum_steps) == 1)

    def decode(self, source_length: int) -> Program:
        """The §6.1 decode (encoder + beam search) of ``decode.batch_size`` sentences of ``source_length`` tokens,
        with the all-padding rows evaluation adds where the data-parallel devices outnumber them
        (sharding.global_eval_batch)."""
        from transformer_jax.decode.translate import make_decode_fn  # decoding only when asked for

        sentences = int(self.config.decode.batch_size)
        rows = math.lcm(self.data_parallel, self.target.num_hosts)  # sharding.eval_rows on the target
        rows = -(-sentences // rows) * rows  # padded as evaluation pads it
        with compiling_for(self.target.platform):
            model = model_setup(self.config, self.mesh)
            decode_fn = make_decode_fn(self.config, model.graphdef)
            inputs = jax.ShapeDtypeStruct((rows, source_length), jnp.int32, sharding=sharding.batch_sharding(self.mesh))
            rng = jax.ShapeDtypeStruct((2,), jnp.uint32, sharding=sharding.replicated(self.mesh))
            return self._compile("decode", rows, source_length, 1 - sentences / rows, None,
                                 lambda: decode_fn.lower(model.abstract_params, inputs, rng), flops=False)

    def _compile(self, name: str, rows: int, length: int, padding: float | None, formula: float | None,
                 lower: Callable, flops: bool = True) -> Program:
        tic = time.monotonic()
        memory = needed = xla_flops = compiled = lowered = None
        try:
            with compiling_for(self.target.platform), jax.set_mesh(self.mesh):
                lowered = lower()
                compiled = lowered.compile()
        except Exception as error:  # XLA raises JaxRuntimeError; only "does not fit" is a result, not a failure
            needed = out_of_memory_bytes(error)
            if needed is None:
                raise
        else:
            memory = memory_bytes(compiled.memory_analysis())
            cost = compiled.cost_analysis() if flops else None
            if cost and cost.get("flops"):
                xla_flops = float(cost["flops"]) * self.mesh.size
        return Program(name, rows, length, rows // self.data_parallel, padding, time.monotonic() - tic, memory,
                       needed, xla_flops, formula, self.budget_bytes, *((compiled, lowered) if self.keep_executables
                                                                         and memory else (None, None)))


def compute_choices(m: ml_collections.ConfigDict, platform: str) -> dict:
    """What ``model.dtype`` and ``attention_implementation`` resolve to on ``platform`` for training and
    evaluation (cached decoding always takes the einsum path: model/attention.py)."""
    dtype = compute_dtype(m.dtype, platform)
    attention = resolve_implementation(m.attention_implementation, platform, dtype, max(m.d_k, m.d_v))
    if attention in ("xla", "cudnn") and m.get("attention_dropout_rate", 0.0) > 0:
        attention = "cpu"  # attention weights are dropped: only the einsum path forms them
    return {"platform": platform, "dtype": str(dtype), "attention": attention}


def memory_bytes(stats) -> dict:
    """XLA's CompiledMemoryStats as a dict; total = arguments + outputs − aliased (donated) + temporaries + code."""
    out = {"argument": stats.argument_size_in_bytes, "output": stats.output_size_in_bytes,
           "alias": stats.alias_size_in_bytes, "temp": stats.temp_size_in_bytes,
           "code": stats.generated_code_size_in_bytes}
    out["total"] = out["argument"] + out["output"] - out["alias"] + out["temp"] + out["code"]
    return out


def out_of_memory_bytes(error: Exception) -> float | None:
    """The bytes a program needed, from XLA's RESOURCE_EXHAUSTED error; None for any other error."""
    text = str(error)
    if "RESOURCE_EXHAUSTED" not in text:
        return None
    m = _OUT_OF_MEMORY.search(text)
    return float(m.group(1)) * _UNITS[m.group(2)] if m else math.inf


def state_bytes(config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh) -> int:
    """Bytes of the training state (parameters + Adam moments + counters) one device holds under the mesh's
    shardings, before the compiler's layout padding."""
    with compiling_for("cpu"):  # shapes and shardings only: no platform-dependent choice matters here
        setup = make_setup(config, mesh)
    return sum(math.prod(a.sharding.shard_shape(a.shape)) * a.dtype.itemsize
               for a in jax.tree.leaves(setup.abstract_state))


def step_flops(programs: list[Program] | list[dict]) -> tuple[dict[str, float], str]:
    """The FLOPs of each training program (all devices) — XLA's, or the formula's where XLA gives none (its GPU
    compiler) — and which of the two they are."""
    get = (lambda p, k: p[k]) if programs and isinstance(programs[0], dict) else getattr
    train = [p for p in programs if get(p, "name").startswith("train")]
    if train and all(get(p, "xla_flops") for p in train):
        return {get(p, "name"): get(p, "xla_flops") for p in train}, "xla"
    return {get(p, "name"): get(p, "formula_flops") for p in train if get(p, "formula_flops")}, "formula"


def step_hours(flops: dict[str, float], source: str, peak_tflops: float | None, mfu: float, num_steps: int,
               devices: int) -> dict | None:
    """Estimated step time (s) of each training program — its FLOPs per device at ``mfu`` of the chip's peak — and
    the hours of ``num_steps`` at their mean (each bucket's step holds about the same tokens, so the buckets' steps
    come in similar numbers). An estimate, not a measurement."""
    if not peak_tflops or not flops:
        return None
    seconds = {name: f / devices / (peak_tflops * 1e12 * mfu) for name, f in flops.items()}
    return {"mfu": mfu, "flops": source, "step_s": seconds,
            "hours": num_steps * sum(seconds.values()) / len(seconds) / 3600}


def gib(n: float | None) -> str:
    """Bytes as GiB for tables: two decimals, three where under a tenth."""
    if n is None:
        return "–"
    return "∞" if math.isinf(n) else f"{n / GIB:.2f}" if n >= 0.1 * GIB else f"{n / GIB:.3f}"
