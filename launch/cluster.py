"""Multi-host start-up: ``jax.distributed.initialize()`` before any device is touched.

Called by every command that computes. It initialises when launched on a cluster — explicit
``--coordinator_address/--num_processes/--process_id`` flags, a Slurm job with several tasks
(``srun``: JAX reads SLURM_* itself), or a Cloud TPU pod slice (JAX finds its peers) — and does nothing on a
single machine.
"""

import logging
import os
import signal
import sys

import jax
from absl import flags

COORDINATOR = flags.DEFINE_string("coordinator_address", None, "host:port of process 0 (multi-host runs).")
NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Number of processes (multi-host runs).")
PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's index (multi-host runs).")
CPU_COLLECTIVES = flags.DEFINE_string(
    "cpu_collectives", "gloo", "CPU collectives implementation for multi-process CPU runs (gloo or mpi).")
FLAG_NAMES = ("coordinator_address", "num_processes", "process_id", "cpu_collectives")  # taken by computing commands

PREEMPTED_EXIT_STATUS = 128 + signal.SIGTERM  # how shells report a process stopped by SIGTERM


def _on_cluster() -> bool:
    if int(os.environ.get("SLURM_NTASKS", "1")) > 1:
        return True
    return "TPU_WORKER_HOSTNAMES" in os.environ and "," in os.environ["TPU_WORKER_HOSTNAMES"]


def maybe_initialize() -> None:
    """Initialises jax.distributed when this process is one of several; logs the process layout."""
    if COORDINATOR.value:
        jax.config.update("jax_cpu_collectives_implementation", CPU_COLLECTIVES.value)
        jax.distributed.initialize(coordinator_address=COORDINATOR.value, num_processes=NUM_PROCESSES.value,
                                   process_id=PROCESS_ID.value)
    elif _on_cluster():
        jax.distributed.initialize()
    else:
        return
    logging.getLogger(__name__).info("Process %d of %d; %d local / %d global devices", jax.process_index(), jax.process_count(),
                 jax.local_device_count(), jax.device_count())


def exit_preempted(command: str, error: Exception) -> None:
    """Ends a command stopped by SIGTERM (train/preemption.py: its checkpoint is saved) with status 143."""
    print(f"transformer-jax {command}: {error}", file=sys.stderr)
    sys.exit(PREEMPTED_EXIT_STATUS)
