"""What a run's programs are compiled for: a *target* — a TPU slice (or several), GPU nodes, or this machine's own
devices — with its chips' memory and peak FLOP/s and the devices XLA compiles for.

A TPU or GPU target needs no TPU or GPU. libtpu describes any TPU topology to XLA's TPU compiler
(``jax.experimental.topologies.get_topology_desc``), and jax's CUDA plugin compiles for a GPU from a description
of it (XLA's GpuTargetConfigProto; the packaged ones are in gpu_targets/, with where each came from), on any x86-64
Linux host: ``pip install -e ".[aot]"``. The devices they return carry the slice's host layout (``process_index``),
so the batch plan, the mesh and the memory analysis are the pod's own.

Names are the ones users type: TPU slices as Cloud TPU names them — ``v5e-256`` / ``v6e-64`` count chips, ``v4-32``
/ ``v5p-128`` count TensorCores (two per chip, one megacore device) — ``2xv5e-256`` for a multislice job, GPU nodes
as ``h100x8`` (more than 8 GPUs: 8 per host), libtpu's topology strings (``v5e:4x4``, ``v4:2x2x4``), and ``local``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
import os
import re
from importlib import resources

import jax

GIB = 2**30
AOT_INSTALL = 'pip install -e ".[aot]"'
GPU_SPECS = "gpu_targets"  # package folder of the GPU target descriptions (*.txtpb)
# JAX preallocates this share of a GPU's memory (XLA_PYTHON_CLIENT_MEM_FRACTION, jax's GPU memory docs): a step's
# buffers must fit in it.
GPU_MEMORY_FRACTION = 0.75


@dataclasses.dataclass(frozen=True)
class Chip:
    """One device of a target: what XLA may allocate on it and how fast it multiplies.

    Attributes:
        key: the name in target strings (v5e, h100, …).
        name: the product's name.
        platform: "tpu", "gpu" or "cpu".
        hbm_gib: memory per device (vendor figure).
        usable_gib: what a program may use: the TPU compiler's limit (libtpu's "available HBM"; a step that needs
            more fails to compile) or, on GPU, ``GPU_MEMORY_FRACTION`` of the memory (what JAX preallocates).
        peak_tflops: dense bfloat16 TFLOP/s per device (vendor figure).
        source: where the numbers come from.
    """

    key: str
    name: str
    platform: str
    hbm_gib: float | None
    usable_gib: float | None
    peak_tflops: float | None
    source: str

    @property
    def usable_bytes(self) -> int | None:
        return None if self.usable_gib is None else int(self.usable_gib * GIB)


def _gpu(key: str, name: str, hbm_bytes: int, peak_tflops: float, source: str) -> Chip:
    hbm = hbm_bytes / GIB
    return Chip(key, name, "gpu", round(hbm, 2), round(hbm * GPU_MEMORY_FRACTION, 2), peak_tflops, source)


# usable_gib of the TPUs: the "available HBM" libtpu 0.0.42.1 reports when a program does not fit (per device; v4
# and v5p as megacore: one device is a chip's two TensorCores).
CHIPS = {c.key: c for c in (
    Chip("v4", "TPU v4", "tpu", 32, 30.75, 275, "cloud.google.com/tpu/docs/v4: 32 GiB HBM2, 275 TFLOP/s bf16"),
    Chip("v5e", "TPU v5e", "tpu", 16, 15.75, 197, "cloud.google.com/tpu/docs/v5e: 16 GiB HBM2, 197 TFLOP/s bf16"),
    Chip("v5p", "TPU v5p", "tpu", 95, 95.74, 459, "cloud.google.com/tpu/docs/v5p: 95 GiB HBM2e, 459 TFLOP/s bf16"),
    Chip("v6e", "TPU v6e (Trillium)", "tpu", 32, 31.25, 918,
         "cloud.google.com/tpu/docs/v6e: 32 GiB HBM, 918 TFLOP/s bf16"),
    _gpu("a100", "NVIDIA A100 SXM4 80GB", 85899345920, 312, "NVIDIA A100 datasheet: 312 TFLOP/s dense bf16"),
    _gpu("h100", "NVIDIA H100 SXM5 80GB", 85045477376, 989, "NVIDIA H100 datasheet: 989 TFLOP/s dense bf16"),
    _gpu("h200", "NVIDIA H200 SXM 141GB", 150754820096, 989, "NVIDIA H200 datasheet: 989 TFLOP/s dense bf16"),
)}
# libtpu's topology prefix of each TPU chip (v5p is "v5" there)
TOPOLOGY_PREFIX = {"v4": "v4", "v5e": "v5e", "v5p": "v5", "v6e": "v6e"}
CORES_PER_CHIP = {"v4": 2, "v5p": 2, "v5e": 1, "v6e": 1}  # Cloud TPU names count TensorCores for v4 / v5p
CHIPS_PER_HOST = {"v4": 4, "v5p": 4, "v5e": 4, "v6e": 4}  # multi-host slices; v5e/v6e slices of ≤ 8 are one host
GPUS_PER_HOST = 8

# The names --list_targets shows (any chip count of the same form works).
EXAMPLES = ("v4-8", "v4-32", "v4-128", "v5e-1", "v5e-8", "v5e-16", "v5e-64", "v5e-256", "2xv5e-256", "v5p-8",
            "v5p-128", "v5p-512", "v6e-8", "v6e-64", "v6e-256", "a100x8", "h100x8", "h100x16", "h200x8", "local")


class TargetError(ValueError):
    """A target name that names no target (the message lists the forms that do)."""


class TargetUnavailable(RuntimeError):
    """This install cannot compile for the target (libtpu / the CUDA plugin missing or of another jax version)."""


@dataclasses.dataclass(frozen=True)
class Target:
    """A set of devices to compile for.

    Attributes:
        name: as given (``v5e-256``).
        chip: the device type.
        topology: libtpu's topology (``v5e:16x16``), the GPU layout ``slices x hosts x GPUs per host``, or "local".
        num_slices: TPU slices of a multislice job (data-center network between them).
        chips_per_host: TPU chips per host when not libtpu's default (v5e/v6e single-host slices).
    """

    name: str
    chip: Chip
    topology: str
    num_slices: int = 1
    chips_per_host: tuple[int, int, int] | None = None

    @property
    def platform(self) -> str:
        return self.chip.platform

    @property
    def is_local(self) -> bool:
        return self.topology == "local"

    def devices(self) -> list:
        """The target's devices, in libtpu's / the plugin's order (``process_index`` = host)."""
        return list(_devices(self))

    @property
    def num_devices(self) -> int:
        return len(self.devices())

    @property
    def num_hosts(self) -> int:
        return len({d.process_index for d in self.devices()})

    @property
    def devices_per_host(self) -> int:
        return self.num_devices // self.num_hosts

    def describe(self) -> str:
        """``v5e-256: 256 × TPU v5e (16 GiB HBM, 15.75 usable; 197 TFLOP/s bf16), 64 hosts, topology v5e:16x16``."""
        c = self.chip
        memory = f"{c.hbm_gib:g} GiB, {c.usable_gib:g} usable" if c.hbm_gib else "memory unknown"
        peak = f"; {c.peak_tflops:g} TFLOP/s bf16" if c.peak_tflops else ""
        slices = f" in {self.num_slices} slices" if self.num_slices > 1 else ""
        return (f"{self.name}: {self.num_devices} × {c.name} ({memory}{peak}), {self.num_hosts} host(s){slices}, "
                f"topology {self.topology}")


def parse(name: str) -> Target:
    """The target a user names (module docstring); raises TargetError naming the accepted forms."""
    text = name.strip().lower()
    if text == "local":
        return local_target()
    slices, text = _slices(text)
    if m := re.fullmatch(r"(v4|v5e|v5p|v6e)-(\d+)", text):
        chip, count = m.group(1), int(m.group(2))
        cores = CORES_PER_CHIP[chip]
        if count % cores or not _is_power_of_two(count // cores) or (cores > 1 and count // cores < 4):
            unit = "TensorCores (2 per chip), from 8" if cores > 1 else "chips"
            raise TargetError(f"--target={name}: {chip} slices are named by their {unit} in powers of two, e.g. "
                              f"{chip}-{8 * cores}.")
        return _tpu(name, chip, _grid(count // cores, 3 if cores > 1 else 2), slices)
    if m := re.fullmatch(r"(v4|v5e|v5p|v5|v6e):(\d+(?:x\d+){1,2})", text):
        chip = "v5p" if m.group(1) == "v5" else m.group(1)
        return _tpu(name, chip, tuple(int(x) for x in m.group(2).split("x")), slices)
    if slices == 1 and (m := re.fullmatch(r"(a100|h100|h200)x(\d+)", text)):
        chip, count = m.group(1), int(m.group(2))
        if count > GPUS_PER_HOST and count % GPUS_PER_HOST:
            raise TargetError(f"--target={name}: more than {GPUS_PER_HOST} GPUs come in whole hosts of "
                              f"{GPUS_PER_HOST}, e.g. {chip}x{2 * GPUS_PER_HOST}.")
        hosts, per_host = (count // GPUS_PER_HOST, GPUS_PER_HOST) if count > GPUS_PER_HOST else (1, count)
        return Target(name, CHIPS[chip], f"1x{hosts}x{per_host}")
    raise TargetError(f"--target={name}: not a target; use a Cloud TPU slice (v4-32, v5e-256, v5p-128, v6e-64; "
                      f"2xv5e-256 for 2 slices), a libtpu topology (v5e:4x4, v4:2x2x4), GPUs (h100x8, h200x8, "
                      f"a100x8; h100x16 = 2 hosts) or local (--list_targets shows examples).")


def _slices(text: str) -> tuple[int, str]:
    m = re.fullmatch(r"(\d+)x(v.*)", text)
    return (int(m.group(1)), m.group(2)) if m else (1, text)


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _grid(chips: int, dims: int) -> tuple[int, ...]:
    """Cloud TPU's slice shapes: double the last of the smallest sides until ``chips`` (2x4, 4x4; v4 / v5p from
    2x2x1: 2x2x2, 2x2x4, 2x4x4, 4x4x4, 4x4x8)."""
    if dims == 3:  # (parse admits ≥ 4 chips)
        shape, start = [2, 2, 1], 4
    else:
        shape, start = [1, 1], 1
    while start < chips:
        smallest = min(shape)
        i = max(j for j, side in enumerate(shape) if side == smallest)
        shape[i] *= 2
        start *= 2
    return tuple(shape)


def _tpu(name: str, chip: str, shape: tuple[int, ...], slices: int) -> Target:
    chips = math.prod(shape)
    per_host = None
    if chip in ("v5e", "v6e") and chips <= 8:  # single-host slices: one VM with all the chips (ct5lp-hightpu-8t)
        per_host = (shape[0], shape[1], 1) if len(shape) == 2 else shape
    topology = f"{TOPOLOGY_PREFIX[chip]}:{'x'.join(map(str, shape))}"
    return Target(name, CHIPS[chip], topology, slices, per_host)


# jax's device_kind of each TPU chip (libtpu's topology devices report the same)
TPU_KINDS = {"TPU v4": "v4", "TPU v5 lite": "v5e", "TPU v5": "v5p", "TPU v5p": "v5p", "TPU v6 lite": "v6e"}


def local_target() -> Target:
    """This machine's own devices (``jax.devices()``), the target `train` uses; a known chip keeps its figures."""
    device = jax.devices()[0]
    key = TPU_KINDS.get(device.device_kind) or next(
        (k for k in ("a100", "h100", "h200") if k in device.device_kind.lower()), None)
    if key:
        return Target("local", CHIPS[key], "local")
    limit = (device.memory_stats() or {}).get("bytes_limit") if device.platform != "cpu" else None
    usable = round(limit / GIB, 2) if limit else None
    platform = "gpu" if device.platform in ("gpu", "cuda", "rocm") else device.platform
    return Target("local", Chip("local", device.device_kind, platform, usable, usable, None, "this machine"), "local")


def examples() -> list[Target]:
    """The targets of ``--list_targets``."""
    return [parse(name) for name in EXAMPLES]


@functools.cache
def _devices(target: Target) -> tuple:
    if target.is_local:
        return tuple(jax.devices())
    check_installed(target.platform)
    from jax.experimental import topologies

    if target.platform == "tpu":
        os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")  # no metadata server to ask off a TPU VM
        os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")  # (else libtpu logs an error about its absence)
        # compiling touches no chip: let it run beside a training job (or another compile) that holds libtpu's lock
        os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
        options = {}
        if target.chip.key in ("v4", "v5p"):
            options["chip_config_name"] = "megacore"
        if target.chips_per_host:
            options["chips_per_host_bounds"] = target.chips_per_host
        if target.num_slices > 1:
            options["num_slices"] = target.num_slices
        topology = topologies.get_topology_desc(topology_name=target.topology, platform="tpu", **options)
    else:
        spec = resources.files("transformer_jax").joinpath(GPU_SPECS, f"{target.chip.key}.txtpb").read_text()
        topology = topologies.get_topology_desc(platform="cuda", target_config=spec, topology=target.topology)
    return tuple(topology.devices)


def check_installed(platform: str) -> None:
    """Raises TargetUnavailable (one line with the install command) unless this install compiles for ``platform``."""
    package = {"tpu": "libtpu", "gpu": "jax_cuda12_plugin"}[platform]
    if importlib.util.find_spec(package) is None:
        raise TargetUnavailable(f"compiling for {platform.upper()} needs {package.replace('_', '-')} of jax "
                                f"{jax.__version__}: {AOT_INSTALL}")
    if platform == "gpu":
        from importlib import metadata

        version = metadata.version("jax-cuda12-plugin")
        if version != jax.__version__:
            raise TargetUnavailable(f"jax-cuda12-plugin {version} does not match jax {jax.__version__}: "
                                    f"{AOT_INSTALL} (or pip install jax-cuda12-plugin=={jax.__version__} "
                                    f"jax-cuda12-pjrt=={jax.__version__})")
