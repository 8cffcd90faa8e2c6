"""Runs the tiny model's train step on 8 simulated CPU devices with several meshes; prints one JSON object.

Used by tests/test_train_sharding.py in a subprocess, because the device count (XLA_FLAGS) must be set before JAX
starts::

    python tests/scripts/sharded_losses.py WORKDIR

Prints ``{"losses": {mesh: [train loss per step]}, "specs": …, "shard_shapes": …, "sharded_init_equal": …,
"cross_mesh": …}`` where mesh "1" is one device and the others (data, fsdp, tensor) over all 8; "hash …" are
two of them with ``model.dropout_rng="hash"``.
"""

import sys

from tiny_setup import SHARDING_STEPS, set_xla_flags, sharding_batches, sharding_config

set_xla_flags(device_count=8)

import json

import jax
import numpy as np

from transformer_jax import sharding
from transformer_jax.run.checkpoints import Checkpointer
from transformer_jax.train.step import init_state, make_setup, make_train_step

# name → ((data, fsdp, tensor) or None for the default, number of devices, model.dropout_rng)
MESHES = {"1": (None, 1, "threefry"), "8,1,1": ((8, 1, 1), 8, "threefry"), "2,4,1": ((2, 4, 1), 8, "threefry"),
          "2,2,2": ((2, 2, 2), 8, "threefry"), "hash 1": (None, 1, "hash"), "hash 2,2,2": ((2, 2, 2), 8, "hash")}
# A few parameters (and one Adam moment) whose shardings are reported: embed / heads / mlp / vocab axes.
PICKS = {"embedding": ("params", "embedding", "table"),
         "w_q": ("params", "encoder_layers", 0, "self_attention", "w_q"),
         "w_1": ("params", "decoder_layers", 0, "ffn", "w_1")}


def leaf_at(tree, path):
    for key in path:
        tree = tree[key]
    return tree


def spec_json(spec) -> list:
    return [list(a) if isinstance(a, tuple) else a for a in spec]


def main(workdir: str) -> None:
    assert jax.device_count() == 8, jax.devices()
    batches = sharding_batches()
    out = {"losses": {}, "specs": {}, "shard_shapes": {}}
    compiled = {}
    initial = None  # created once on one device, then placed on each mesh (compiling init per mesh costs seconds)
    for name, (shape, num_devices, generator) in MESHES.items():
        config = sharding_config(shape)
        config.model.dropout_rng = generator
        mesh = sharding.make_mesh(config.train.mesh, devices=jax.devices()[:num_devices])
        setup = make_setup(config, mesh)
        with jax.set_mesh(mesh):
            step_fn = make_train_step(setup)
            if initial is None:
                initial = jax.tree.map(np.asarray, init_state(setup))
            state = jax.device_put(initial, setup.state_shardings)
            losses = []
            for batch in batches[:SHARDING_STEPS]:
                state, metrics = step_fn(state, sharding.global_batch(batch, mesh))
                losses.append(float(metrics["train_loss"]))
        compiled[name] = setup, step_fn
        out["losses"][name] = losses
        # The shardings of the arrays the step *returned* (not only those the setup asked for).
        picks = {k: leaf_at(state, p) for k, p in PICKS.items()}
        picks["adam_mu_w_q"] = state["opt_state"][0].mu["encoder_layers"][0]["self_attention"]["w_q"]
        out["specs"][name] = {k: spec_json(v.sharding.spec) for k, v in picks.items()}
        out["shard_shapes"][name] = {k: [list(v.shape), list(v.addressable_shards[0].data.shape)]
                                     for k, v in picks.items()}
    # init_state creates the state directly sharded on a mesh: it must equal the one-device initialisation.
    setup = compiled["2,2,2"][0]
    direct = init_state(setup)
    out["sharded_init_equal"] = all(np.array_equal(a, np.asarray(b))
                                    for a, b in zip(jax.tree.leaves(initial), jax.tree.leaves(direct)))
    out["sharded_init_table_shard"] = list(direct["params"]["embedding"]["table"].addressable_shards[0].data.shape)
    out["cross_mesh"] = cross_mesh(workdir, batches, compiled, initial)
    print(json.dumps(out))


def cross_mesh(workdir: str, batches, compiled, initial) -> dict:
    """Trains 2 steps on (8,1,1) with checkpoint_every_steps=2, restores onto (2,2,2): values, shardings, next step."""
    setup_a, step_a = compiled["8,1,1"]
    setup_b, step_b = compiled["2,2,2"]
    every = 2
    checkpointer = Checkpointer(workdir, keep=3, every_steps=every)
    data_state = {"epoch": 0, "window": 0, "batch": 2, "carry": [3, 1, 4]}
    with jax.set_mesh(setup_a.mesh):
        state = jax.device_put(initial, setup_a.state_shardings)
        for step, batch in enumerate(batches[:2], start=1):
            state, _ = step_a(state, sharding.global_batch(batch, setup_a.mesh))
            if checkpointer.due(step):
                checkpointer.save(step, state, data_state)
    checkpointer.close()
    saved = jax.tree.map(np.asarray, state)
    with jax.set_mesh(setup_a.mesh):  # the next step on the original mesh, for comparison
        _, metrics_a = step_a(state, sharding.global_batch(batches[2], setup_a.mesh))

    checkpointer = Checkpointer(workdir, keep=3)
    steps = checkpointer.all_steps()
    restored, restored_data = checkpointer.restore(checkpointer.latest_step(), setup_b.abstract_state)
    checkpointer.close()
    flat_saved = jax.tree_util.tree_flatten_with_path(saved)[0]
    flat_restored = jax.tree.leaves(restored)
    flat_shardings = jax.tree.leaves(setup_b.state_shardings, is_leaf=lambda x: isinstance(x, jax.sharding.Sharding))
    result = {
        "steps": steps,
        "num_leaves": len(flat_restored),
        "same_structure": jax.tree.structure(saved) == jax.tree.structure(restored),
        "mismatched_values": [jax.tree_util.keystr(p) for (p, a), b in zip(flat_saved, flat_restored)
                              if not np.array_equal(a, np.asarray(b))],
        "mismatched_shardings": [jax.tree_util.keystr(p) for (p, _), b, s in
                                 zip(flat_saved, flat_restored, flat_shardings)
                                 if not b.sharding.is_equivalent_to(s, b.ndim)],
        "restored_step": int(restored["step"]),
        "restored_data": restored_data,
        "saved_data": data_state,
        "table_spec": spec_json(restored["params"]["embedding"]["table"].sharding.spec),
        "table_mesh_shape": dict(restored["params"]["embedding"]["table"].sharding.mesh.shape),
        "next_loss_a": float(metrics_a["train_loss"]),
    }
    with jax.set_mesh(setup_b.mesh):
        _, metrics_b = step_b(restored, sharding.global_batch(batches[2], setup_b.mesh))  # donates `restored`
    result["next_loss_b"] = float(metrics_b["train_loss"])
    return result


if __name__ == "__main__":
    main(sys.argv[1])
