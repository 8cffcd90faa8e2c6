"""Evaluation batches with fewer rows than data-parallel devices (a pod: 64 sentences on 256 chips), simulated with
3 rows on 8 CPU devices: `sharding.global_eval_batch` pads them, and decoding and the dev loss give what one device
gives. Prints one JSON line (tests/test_eval_on_many_devices.py reads it)."""

import json
import sys

from tiny_setup import set_xla_flags, tiny_config

set_xla_flags(device_count=8)

import jax
import numpy as np

from transformer_jax import sharding
from transformer_jax.decode.translate import make_decode_fn
from transformer_jax.train.step import init_state, make_eval_step, make_setup


def main() -> None:
    assert jax.device_count() == 8, jax.devices()
    config = tiny_config()
    rng = np.random.default_rng(0)
    rows, length = 3, 16
    inputs = rng.integers(4, config.model.vocab_size, (rows, length)).astype(np.int32)
    inputs[:, 10:] = 0
    batch = {"inputs": inputs, "targets": np.roll(inputs, 1, axis=1), "inputs_segmentation": (inputs != 0) * 1,
             "targets_segmentation": (inputs != 0) * 1,
             "inputs_position": np.tile(np.arange(length, dtype=np.int32), (rows, 1)),
             "targets_position": np.tile(np.arange(length, dtype=np.int32), (rows, 1))}
    out = {}
    for name, devices in (("one", jax.devices()[:1]), ("eight", jax.devices())):
        mesh = sharding.make_mesh(config.train.mesh, devices)
        setup = make_setup(config, mesh)
        with jax.set_mesh(mesh):
            params = init_state(setup)["params"]
            global_batch = sharding.global_eval_batch(batch, mesh)
            ids = make_decode_fn(config, setup.graphdef)(params, global_batch["inputs"], jax.random.PRNGKey(0))
            sums = make_eval_step(setup)(params, global_batch)
        out[name] = {"rows": int(global_batch["inputs"].shape[0]), "ids": np.asarray(ids)[:rows].tolist(),
                     "padding_rows_zero": bool((np.asarray(global_batch["inputs"])[rows:] == 0).all()),
                     "loss": float(sums["loss"]), "tokens": float(sums["tokens"])}
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
