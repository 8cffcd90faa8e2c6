"""Host memory: let the C allocator keep what XLA frees, so a training step does not page-fault its buffers in.

XLA on the CPU allocates each step's temporary buffers with ``malloc`` and frees them when the step ends. glibc
serves a large block with a fresh ``mmap`` and gives it back with ``munmap`` on ``free``, and from a worker thread's
arena it cannot do otherwise (a thread arena's heap is at most 64 MB). So every step the kernel hands out, and
zeroes, new pages one 4 KB fault at a time: measured on the Multi30k recipe's training run (perf stat), ~125K page
faults a step (≈ 0.5 GB of fresh pages) and ~17% of the process's CPU time in the kernel.

:func:`keep_freed_memory` sets three glibc ``mallopt`` parameters before XLA starts its threads: one arena for
every thread (``M_ARENA_MAX`` 1), blocks of any size from that arena instead of ``mmap`` (``M_MMAP_THRESHOLD``)
and no trimming of its top (``M_TRIM_THRESHOLD``). Freed buffers are then reused by the next step with their pages
still mapped. The price is that the process keeps its peak heap until it exits, which a training or decoding
process reaches every step anyway. It is what swapping in tcmalloc (as TensorFlow and some JAX trainers do with
``LD_PRELOAD``) achieves, without a library to install. Set ``TRANSFORMER_JAX_HOST_MALLOC=default`` to leave glibc
as it is (e.g. to measure the difference: ``bench/train_throughput.py`` runs under the same setting as the CLI).
Measured on the Multi30k recipe's step (README, "Speed"): 1.25× faster on an AMD EPYC (family 26), no change on an
Intel Xeon (family 6, model 167) where the faults cost less.
"""

import ctypes
import ctypes.util
import logging
import os

ENV = "TRANSFORMER_JAX_HOST_MALLOC"  # "keep" (the default) or "default"
CHOICES = ("keep", "default")

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
    value = os.environ.get(ENV, "keep").strip().lower() or "keep"
    if value not in CHOICES:
        raise ValueError(f"{ENV}={os.environ[ENV]!r}: expected one of {', '.join(CHOICES)}.")
    return value


def keep_freed_memory() -> bool:
    """Applies the ``mallopt`` settings above unless the environment says ``default``; call before JAX's first
    computation (the CLI and the bench scripts call it first thing).

    Returns:
        True when glibc accepted all three settings; False when asked not to, or on a C library without
        ``mallopt`` (macOS, musl), where the allocator is left as it is.
    """
    if requested() == "default":
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
