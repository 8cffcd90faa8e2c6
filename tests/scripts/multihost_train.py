"""One host of a 2-process CPU "cluster" running ``trainer.train`` (checkpoints, clock, SIGTERM) on a shared workdir.

    python tests/scripts/multihost_train.py PROCESS_ID NUM_PROCESSES PORT WORKDIR [--num_steps=12]
        [--jump_clock_after=K] [--pace_s=0.15]

Each process has 2 simulated CPU devices; JAX's distributed runtime (coordinator on 127.0.0.1:PORT, gloo
collectives) joins them into one 4-device data-parallel job, as ``transformer-jax train --coordinator_address=...``
does. ``--jump_clock_after=K``: this process's clock jumps 10 minutes ahead after its K-th reading (an NTP step,
a skewed host), which would make it alone decide that a 10-minute safety save is due. ``--pace_s`` sleeps after
every step (through the eval hook, which runs every step and touches no state), so a test can signal mid-run.
A SIGTERM ends the process as the CLI does (launch/cluster.py: status 143 once the checkpoint is saved).
Prints one JSON line: ``{"process_index", "last"}``.
"""

import argparse
import sys
import time

from tiny_setup import MULTIHOST_JUMP_S, multihost_config, set_xla_flags

set_xla_flags(device_count=2)

import json
import logging

import jax
from transformer_jax.launch import cluster

from transformer_jax.train import trainer
from transformer_jax.train.preemption import Preempted


def jumping_clock(after: int):
    """time.monotonic, plus 10 minutes from the ``after``-th reading on (0 = never)."""
    calls = [0]

    def clock() -> float:
        calls[0] += 1
        return time.monotonic() + (MULTIHOST_JUMP_S if after and calls[0] > after else 0.0)

    return clock


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("process_id", type=int)
    parser.add_argument("num_processes", type=int)
    parser.add_argument("port", type=int)
    parser.add_argument("workdir")
    parser.add_argument("--num_steps", type=int, default=12)
    parser.add_argument("--jump_clock_after", type=int, default=0)
    parser.add_argument("--pace_s", type=float, default=0.0)
    args = parser.parse_args()
    logging.basicConfig(format=f"p{args.process_id} %(name)s: %(message)s")
    logging.getLogger("transformer_jax").setLevel(logging.INFO)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{args.port}", num_processes=args.num_processes,
                               process_id=args.process_id, initialization_timeout=120)

    def pace(setup, params, step):
        time.sleep(args.pace_s)
        return {}

    try:
        last = trainer.train(multihost_config(args.num_steps), args.workdir, progress=False,
                             eval_hook=pace if args.pace_s else None, clock=jumping_clock(args.jump_clock_after))
    except Preempted as e:
        cluster.exit_preempted("train", e)
    print(json.dumps({"process_index": jax.process_index(), "last": last}), flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    sys.exit(main())
