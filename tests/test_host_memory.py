"""The host allocator setting (transformer_jax/host_memory.py): freed XLA-sized blocks are reused without
page faults, in a fresh process as the CLI starts one."""

import os
import subprocess
import sys

import pytest

from transformer_jax import host_memory

# In a fresh interpreter: optionally apply the setting, then allocate, fill and free a 256 MB block four times from
# a worker thread (as XLA's threads do) and print the minor page faults of the last three rounds.
PROBE = r"""
import ctypes, resource, sys, threading
from transformer_jax import host_memory
applied = host_memory.keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
size, faults = 256 << 20, []
def work():
    for _ in range(4):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        block = libc.malloc(size)
        ctypes.memset(block, 1, size)
        libc.free(block)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
thread = threading.Thread(target=work)
thread.start()
thread.join()
print(applied, host_memory.setting(), sum(faults[1:]))
"""


def probe(value: str, **env_vars: str) -> tuple[str, str, int]:
    env = {**os.environ, host_memory.ENV: value, "JAX_PLATFORMS": "cpu", **env_vars}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    applied, setting, faults = out.stdout.split()
    return applied, setting, int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_blocks_are_reused_without_page_faults():
    pages = 3 * (256 << 20) // 4096  # the last three rounds, had every page been fresh
    applied, setting, faults = probe("keep")
    assert (applied, setting) == ("True", "keep")
    assert faults < pages // 20, faults  # the pages of round one are reused
    # glibc as it is: each round maps, faults in and unmaps the block again, so the probe can tell the two apart.
    applied, setting, faults = probe("default")
    assert (applied, setting) == ("False", "default")
    assert faults > pages // 2, faults


def test_an_unknown_setting_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(host_memory.ENV, "tcmalloc")
    with pytest.raises(ValueError, match="TRANSFORMER_JAX_HOST_MALLOC='tcmalloc': expected one of auto, keep, default"):
        host_memory.keep_freed_memory()
    monkeypatch.setenv(host_memory.ENV, " Default ")
    assert host_memory.requested() == "default" and host_memory.keep_freed_memory() is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_not_applied_where_xla_runs_on_an_accelerator():
    """On a GPU/TPU host XLA:CPU's page faults are not there to save, and one arena would make SentencePiece's,
    orbax's and tensorstore's threads queue on one lock: "auto" (the default) leaves glibc alone; "keep" insists."""
    assert probe("auto")[:2] == ("True", "keep")  # XLA:CPU
    for platforms in ("tpu", "cuda", "gpu,cpu"):
        assert probe("auto", JAX_PLATFORMS=platforms)[:2] == ("False", "default"), platforms
    assert probe("keep", JAX_PLATFORMS="tpu")[:2] == ("True", "keep")


def test_accelerator_from_device_files():
    def files(*present):
        import fnmatch

        return lambda pattern: fnmatch.filter(present, pattern)

    assert host_memory.accelerator("", files("/dev/nvidia0", "/dev/nvidiactl")) == "gpu"
    assert host_memory.accelerator("", files("/dev/vfio/0")) == "tpu"
    assert host_memory.accelerator("", files("/dev/accel0")) == "tpu"
    assert host_memory.accelerator("", files("/dev/nvidiactl")) is None  # a driver without a GPU
    assert host_memory.accelerator("", files()) is None
    assert host_memory.accelerator("cpu", files("/dev/nvidia0")) is None  # JAX_PLATFORMS decides where it is set
