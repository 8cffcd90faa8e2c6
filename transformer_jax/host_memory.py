"""Host memory: let the C allocator keep what XLA frees, so a training step does not page-fault its buffers in.

XLA on the CPU allocates each step's temporary buffers with ``malloc`` and frees them when the step ends. glibc
serves a large block with a fresh ``mmap`` and gives it back with ``munmap`` on ``free``, and from a worker thread's
arena it cannot do otherwise (a thread arena's heap is at most 64 MB). So every step the kernel hands out, and
zeroes, new pages one 4 KB fault at a time, a share of the process's CPU time spent in the kernel (``perf stat``
counts the faults).

:func:`keep_freed_memory` sets three glibc ``mallopt`` parameters before XLA starts its threads: one arena for
every thread (``M_ARENA_MAX`` 1), blocks of any size from that arena instead of ``mmap`` (``M_MMAP_THRESHOLD``)
and no trimming of its top (``M_TRIM_THRESHOLD``). Freed buffers are then reused by the next step with their pages
still mapped. The price is that the process keeps its peak heap until it exits, which a training or decoding
process reaches every step anyway. It is what swapping in tcmalloc (as TensorFlow and some JAX trainers do with
``LD_PRELOAD``) achieves, without a library to install. It helps XLA:CPU only: where XLA runs on a GPU or TPU
(:func:`accelerator`) the host's threads are SentencePiece's, orbax's and tensorstore's, which one arena would
serialise on one malloc lock, so the default (``TRANSFORMER_JAX_HOST_MALLOC=auto``) leaves glibc as it is there.
``keep`` applies the settings anyway, ``default`` never (e.g. to measure the difference: ``bench/train_throughput.py``
runs under the same setting as the CLI). How much it gains depends on the CPU, where page faults cost more or
less (experiments/results/speed).
"""

import ctypes
import ctypes.util
import glob
import logging
import os
from collections.abc import Callable

ENV = "TRANSFORMER_JAX_HOST_MALLOC"  # "auto" (the default: keep on XLA:CPU), "keep" or "default"
CHOICES = ("auto", "keep", "default")
# Device files of the accelerators JAX would use (the NVIDIA driver's; TPU VMs': /dev/accel* on v2-v4, VFIO on v5+)
ACCELERATOR_DEVICES = {"gpu": ("/dev/nvidia[0-9]*",), "tpu": ("/dev/accel[0-9]*", "/dev/vfio/[0-9]*")}

# glibc's <malloc.h> parameter numbers for mallopt(int param, int value).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
_LARGEST = 2**31 - 1  # mallopt takes a C int: the largest threshold it can express (2 GiB)

logger = logging.getLogger(__name__)
_applied = []  # [True] once keep_freed_memory has changed this process's allocator


def setting() -> str:
    """This process's allocator setting, for provenance and bench output: "keep" once applied, else "default"."""
    return "keep" if _applied else "default"


def requested() -> str:
    """The setting asked for by the environment; raises ValueError naming the variable for anything else."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ValueError(f"{ENV}={os.environ[ENV]!r}: expected one of {', '.join(CHOICES)}.")
    return value


def accelerator(platforms: str | None = None, device_files: Callable[[str], list] = glob.glob) -> str | None:
    """The accelerator XLA will run on in this process ("gpu", "tpu"), or None for XLA:CPU — known before JAX
    starts: from ``JAX_PLATFORMS`` where set (its first platform), else from the accelerators' device files."""
    platforms = os.environ.get("JAX_PLATFORMS", "") if platforms is None else platforms
    first = platforms.split(",")[0].strip().lower()
    if first:
        return None if first == "cpu" else ("gpu" if first in ("cuda", "rocm", "gpu") else first)
    return next((name for name, patterns in ACCELERATOR_DEVICES.items()
                 if any(device_files(pattern) for pattern in patterns)), None)


def keep_freed_memory() -> bool:
    """Applies the ``mallopt`` settings above on XLA:CPU (or everywhere with ``keep``, nowhere with ``default``);
    call before JAX's first computation (the CLI and the bench scripts call it first thing).

    Returns:
        True when glibc accepted all three settings; False when asked not to, where XLA runs on an accelerator
        (``auto``), or on a C library without ``mallopt`` (macOS, musl), where the allocator is left as it is.
    """
    choice = requested()
    if choice == "default":
        return False
    if choice == "auto" and (device := accelerator()) is not None:
        logger.info("XLA runs on %s here: host allocator left as it is (%s=keep applies it anyway).", device, ENV)
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        logger.info("No mallopt in the C library (%s): host allocator left as it is.", name)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settings = ((M_ARENA_MAX, 1), (M_MMAP_THRESHOLD, _LARGEST), (M_TRIM_THRESHOLD, _LARGEST))
    accepted = [mallopt(param, value) == 1 for param, value in settings]  # every setting tried
    if all(accepted):
        _applied[:] = [True]
    return bool(_applied)
