"""Test-wide settings and fixtures: cheaper XLA compilation (tests compile many tiny programs and run each only
briefly), and coordinator ports for the 2-process tests that no other process can take."""

import fcntl
import os
import random
import socket
import sys
import tempfile
from pathlib import Path

import pytest

# tests/scripts holds the tiny configs and the subprocess scripts: test modules import tiny_setup from there, as the
# scripts (run from that folder) do.
sys.path.insert(0, str(Path(__file__).parent / "scripts"))

# Must be set before JAX initialises its backend; the tests' subprocesses inherit it.
os.environ["XLA_FLAGS"] = " ".join(filter(None, [
    os.environ.get("XLA_FLAGS", ""),
    "--xla_backend_optimization_level=0",
    "--xla_llvm_disable_expensive_passes=true",
]))

PORT_LOCKS = Path(tempfile.gettempdir()) / "transformer_jax_test_ports"


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _bindable(port: int) -> bool:
    """Whether nothing holds ``port`` now, on any address (the coordinator binds [::]:port)."""
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((address, port))
        except OSError:
            if family == socket.AF_INET6 and not socket.has_ipv6:
                continue
            return False
    return True


@pytest.fixture
def coordinator_port():
    """A localhost port for a test's jax.distributed coordinator, held by this test until it ends.

    Why it cannot collide (binding port 0 and closing the socket can: the kernel may hand the port to the next
    connect() or bind(0) anywhere on the machine before the coordinator binds it):
    - the port lies outside the kernel's ephemeral range (ip_local_port_range), which is the only range the kernel
      hands out by itself, to connect() and bind(0); only a program asking for this very number could take it;
    - every test that uses this fixture, in any pytest process on the machine (xdist workers, concurrent sessions),
      first takes an exclusive lock on PORT_LOCKS/<port> and keeps it until its processes have ended; the lock is
      released by the kernel if the test's process dies, so a crashed run blocks nothing;
    - the port is bindable when chosen, so no running program holds it.
    """
    low, high = _ephemeral_range()
    candidates = [p for p in range(10_000, 65_536) if not low <= p <= high]
    start = random.randrange(len(candidates))  # spread concurrent sessions over the range; the lock decides
    PORT_LOCKS.mkdir(exist_ok=True)
    for port in candidates[start:] + candidates[:start]:
        with open(PORT_LOCKS / str(port), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another test holds it
            if _bindable(port):
                yield port  # the lock is held until the test ends (closing the file releases it)
                return
    raise RuntimeError(f"no free coordinator port outside the ephemeral range {low}-{high}")
