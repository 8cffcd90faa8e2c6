"""Test-wide settings: cheaper XLA compilation (tests compile many tiny programs and run each only briefly)."""

import os

# Must be set before JAX initialises its backend; the tests' subprocesses inherit it.
os.environ["XLA_FLAGS"] = " ".join(filter(None, [
    os.environ.get("XLA_FLAGS", ""),
    "--xla_backend_optimization_level=0",
    "--xla_llvm_disable_expensive_passes=true",
]))
