"""One host of a 2-process CPU "cluster" on localhost: trains the tiny model a few steps on a (4,1,1) mesh.

Used by tests/test_train_sharding.py, which starts two of these at once, and one alone as the reference::

    python tests/scripts/multiprocess_worker.py PROCESS_ID 2 PORT    # PROCESS_ID 0 and 1
    python tests/scripts/multiprocess_worker.py 0 1 0                # one process with 4 devices

With 2 processes each has 2 simulated CPU devices; JAX's distributed runtime (coordinator on 127.0.0.1:PORT) joins
them into 4 global devices and gloo carries the CPU collectives. Each host feeds only ITS half of every batch's rows
(``sharding.global_batch`` → ``jax.make_array_from_process_local_data``). Prints one JSON line:
``{"process_index", "process_count", "device_count", "local_device_count", "losses"}``.
"""

import sys

from tiny_setup import INITIALIZATION_TIMEOUT_S, SHARDING_STEPS, set_xla_flags, sharding_batches, sharding_config

DEVICES = 4
NUM_PROCESSES = int(sys.argv[2])
set_xla_flags(device_count=DEVICES // NUM_PROCESSES)

import json

import jax

from transformer_jax import sharding
from transformer_jax.train.step import init_state, make_setup, make_train_step


def main(process_id: int, num_processes: int, port: int) -> None:
    if num_processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=num_processes,
                                   process_id=process_id, initialization_timeout=INITIALIZATION_TIMEOUT_S)
    assert jax.device_count() == DEVICES, jax.devices()
    config = sharding_config((4, 1, 1))
    mesh = sharding.make_mesh(config.train.mesh)
    setup = make_setup(config, mesh)
    batches = sharding_batches()
    per_host = batches[0]["inputs"].shape[0] // jax.process_count()
    mine = slice(jax.process_index() * per_host, (jax.process_index() + 1) * per_host)
    losses = []
    with jax.set_mesh(mesh):
        step_fn = make_train_step(setup)
        state = init_state(setup)
        for batch in batches[:SHARDING_STEPS]:
            local = {k: v[mine] for k, v in batch.items()}  # this host's rows only
            state, metrics = step_fn(state, sharding.global_batch(local, mesh))
            losses.append(float(metrics["train_loss"]))
    print(json.dumps({"process_index": jax.process_index(), "process_count": jax.process_count(),
                      "device_count": jax.device_count(), "local_device_count": jax.local_device_count(),
                      "losses": losses}), flush=True)
    if num_processes > 1:
        jax.distributed.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), NUM_PROCESSES, int(sys.argv[3]))
