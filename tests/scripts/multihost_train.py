"""One host of a 2-process CPU "cluster" running ``trainer.train`` (checkpoints, clock, SIGTERM) on a shared workdir.

    python tests/scripts/multihost_train.py PROCESS_ID NUM_PROCESSES PORT WORKDIR [--num_steps=12]
        [--jump_clock_after=K] [--hold_at=STEP --held_file=PATH] [--slow_prepare_s=S] [--pid=N]

Each process has 2 simulated CPU devices; JAX's distributed runtime (coordinator on 127.0.0.1:PORT, gloo
collectives) joins them into one 4-device data-parallel job, as ``transformer-jax train --coordinator_address=...``
does. ``--jump_clock_after=K``: this process's clock jumps 10 minutes ahead after its K-th reading (an NTP step,
a skewed host), which would make it alone decide that a 10-minute safety save is due. ``--hold_at``: after step
STEP's evaluation (the eval hook, which runs every step and touches no state) the process writes PATH.pI (I = its
process id) and waits there until JAX's preemption service has brought the SIGTERM notice to every host, so a test
signals a known step instead of racing a running clock: each host's sync protocol reports step STEP and the run
stops at STEP + 1 on both. A SIGTERM ends the process as the CLI does (launch/cluster.py: status 143 once the
checkpoint is saved). ``--slow_prepare_s``: process 0's data preparation takes S seconds longer (a WMT14 download),
and process 1 fails if it enters a collective (sync_global_devices) before the preparation is recorded.
``--pid``: os.getpid() returns N in this process (hosts in containers share PIDs: no temporary file may collide).
Prints one JSON line: ``{"process_index", "last"}``.
"""

import argparse
import os
import sys
import time

from tiny_setup import HOLD_DEADLINE_S, INITIALIZATION_TIMEOUT_S, MULTIHOST_JUMP_S, multihost_config, set_xla_flags

set_xla_flags(device_count=2)

import json
import logging

import jax
from jax._src import distributed
from jax.experimental import multihost_utils

from transformer_jax.data import pipeline
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


# Where each host's preemption sync protocol (xla/tsl preemption_sync_manager.cc) reports the step it has reached,
# holding its lock until the sync point (the largest reported step + 1) is set: once every host's entry is there,
# the next reached_preemption_sync_point call on every host waits for that sync point and the stop step is fixed.
PREEMPTION_COUNTERS = "PREEMPTION_CURRENT_COUNTER/"


def wait_for_preemption_notice(num_processes: int) -> None:
    """Blocks until every host's sync protocol has reported its step to the coordination service."""
    deadline = time.monotonic() + HOLD_DEADLINE_S
    while len(distributed.global_state.client.key_value_dir_get(PREEMPTION_COUNTERS)) < num_processes:
        if time.monotonic() > deadline:
            sys.exit(f"no SIGTERM reached every host's preemption service within {HOLD_DEADLINE_S} s")
        time.sleep(0.01)


def slow_preparation(process_id: int, workdir: str, seconds: float) -> None:
    """Process 0 prepares ``seconds`` longer; process 1 may enter no collective before that preparation is done."""
    if process_id == 0:
        prepare = pipeline.prepare

        def slow(config, workdir):
            time.sleep(seconds)
            return prepare(config, workdir)

        pipeline.prepare = slow
        return
    sync = multihost_utils.sync_global_devices

    def guarded(name: str) -> None:
        if pipeline.read_prepared(workdir) is None:
            sys.exit(f"process 1 entered the collective {name!r} while process 0 was preparing the data")
        sync(name)

    multihost_utils.sync_global_devices = guarded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("process_id", type=int)
    parser.add_argument("num_processes", type=int)
    parser.add_argument("port", type=int)
    parser.add_argument("workdir")
    parser.add_argument("--num_steps", type=int, default=12)
    parser.add_argument("--jump_clock_after", type=int, default=0)
    parser.add_argument("--hold_at", type=int, default=0)
    parser.add_argument("--held_file", default="")
    parser.add_argument("--slow_prepare_s", type=float, default=0.0)
    parser.add_argument("--pid", type=int, default=0)
    args = parser.parse_args()
    if args.pid:
        os.getpid = lambda: args.pid
    if args.slow_prepare_s:
        slow_preparation(args.process_id, args.workdir, args.slow_prepare_s)
    logging.basicConfig(format=f"p{args.process_id} %(name)s: %(message)s")
    logging.getLogger("transformer_jax").setLevel(logging.INFO)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{args.port}", num_processes=args.num_processes,
                               process_id=args.process_id, initialization_timeout=INITIALIZATION_TIMEOUT_S)

    def hold(setup, params, step):
        if step == args.hold_at:
            with open(f"{args.held_file}.p{args.process_id}", "w") as f:
                f.write(str(step))
            wait_for_preemption_notice(args.num_processes)
        return {}

    try:
        last = trainer.train(multihost_config(args.num_steps), args.workdir, progress=False,
                             eval_hook=hold if args.hold_at else None, clock=jumping_clock(args.jump_clock_after))
    except Preempted as e:
        cluster.exit_preempted("train", e)
    print(json.dumps({"process_index": jax.process_index(), "last": last}), flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    sys.exit(main())
