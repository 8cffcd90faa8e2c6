"""Device mesh (data, fsdp, tensor), the logical-axis rules, and placing batches and parameters on the mesh.

Training, decoding and the benchmarks all use it (the model itself is built, on a mesh, by model/build.py).

The model names each parameter axis logically (transformer_jax/model/params.py); this file alone maps those
names to mesh axes. ``fsdp`` shards parameters and optimizer state along ``embed``; ``tensor`` shards heads,
the FFN's inner dimension and the vocabulary; the batch is split over data × fsdp. An axis whose size the mesh
axis does not divide stays replicated (e.g. a vocabulary of 2000 on a tensor axis of 3).
"""

import math

import jax
import ml_collections
import numpy as np
from flax import nnx
from jax.sharding import AxisType, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")
BATCH_AXES = ("data", "fsdp")

# logical axis name → mesh axis (None = replicated). The one place that decides how parameters are sharded.
LOGICAL_AXIS_RULES: dict[str, str | None] = {
    "embed": "fsdp",
    "heads": "tensor",
    "mlp": "tensor",
    "vocab": "tensor",
    "kv": None,
    "length": None,
}


def mesh_shape(mesh_config: ml_collections.ConfigDict, num_devices: int) -> tuple[int, int, int]:
    """Resolves the (data, fsdp, tensor) sizes; one of them may be -1 = all remaining devices."""
    sizes = [int(mesh_config[a]) for a in MESH_AXES]
    if sizes.count(-1) > 1:
        raise ValueError(f"At most one mesh axis may be -1, got {dict(zip(MESH_AXES, sizes))}.")
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        if num_devices % known:
            raise ValueError(f"{num_devices} devices cannot be split into a mesh {dict(zip(MESH_AXES, sizes))}.")
        sizes[sizes.index(-1)] = num_devices // known
    if math.prod(sizes) != num_devices:
        raise ValueError(f"Mesh {dict(zip(MESH_AXES, sizes))} needs {math.prod(sizes)} devices; "
                         f"{num_devices} are available.")
    return tuple(sizes)


def make_mesh(mesh_config: ml_collections.ConfigDict, devices: list | None = None) -> jax.sharding.Mesh:
    """A (data, fsdp, tensor) mesh with explicit Auto axis types over ``devices`` (default: all).

    On several TPU slices (multislice) the ``data`` axis spans the slices, so only the gradient all-reduce crosses
    the data-center network between them (MaxText's and big_vision's hybrid mesh); fsdp and tensor stay in a slice.
    """
    devices = jax.devices() if devices is None else devices
    shape = mesh_shape(mesh_config, len(devices))
    slices = len({getattr(d, "slice_index", 0) for d in devices})
    if slices == 1:
        return jax.make_mesh(shape, MESH_AXES, axis_types=(AxisType.Auto,) * 3, devices=devices)
    if shape[0] % slices:
        raise ValueError(f"Mesh {dict(zip(MESH_AXES, shape))} over {slices} slices: the data axis spans the slices, "
                         f"so its size must be a multiple of {slices}.")
    from jax.experimental import mesh_utils

    grid = mesh_utils.create_hybrid_device_mesh((shape[0] // slices, *shape[1:]), (slices, 1, 1), devices)
    return jax.sharding.Mesh(grid, MESH_AXES, axis_types=(AxisType.Auto,) * 3)


def logical_to_spec(logical_axes: tuple[str | None, ...], shape: tuple[int, ...],
                    mesh: jax.sharding.Mesh) -> PartitionSpec:
    """PartitionSpec for one parameter from its logical axes (replicated where the size is not divisible)."""
    spec = []
    for name, size in zip(logical_axes, shape):
        axis = LOGICAL_AXIS_RULES.get(name) if name else None
        spec.append(axis if axis and size % mesh.shape[axis] == 0 else None)
    return PartitionSpec(*spec)


def param_shardings(params: nnx.State, mesh: jax.sharding.Mesh) -> dict:
    """The sharding of every parameter of a model's (abstract) ``nnx.Param`` state, by the logical axes each
    carries, as a plain dict."""
    return nnx.to_pure_dict(jax.tree.map(
        lambda v: NamedSharding(mesh, logical_to_spec(v.get_metadata()["logical_axes"], v.shape, mesh)),
        params, is_leaf=lambda x: isinstance(x, nnx.Variable)))


def batch_sharding(mesh: jax.sharding.Mesh) -> NamedSharding:
    """Batches [rows, length] are split by rows over data × fsdp."""
    return NamedSharding(mesh, PartitionSpec(BATCH_AXES))


def replicated(mesh: jax.sharding.Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def global_batch(local_batch: dict[str, np.ndarray], mesh: jax.sharding.Mesh) -> dict[str, jax.Array]:
    """Builds global arrays from this host's rows (each host passes only its own slice)."""
    sharding = batch_sharding(mesh)
    return {k: jax.make_array_from_process_local_data(sharding, v) for k, v in local_batch.items()}


def eval_rows(rows: int, mesh: jax.sharding.Mesh) -> int:
    """``rows`` rounded up to a multiple of the devices that split a batch (data × fsdp) and of the hosts."""
    multiple = math.lcm(mesh.shape["data"] * mesh.shape["fsdp"], jax.process_count())
    return -(-rows // multiple) * multiple


def global_eval_batch(batch: dict[str, np.ndarray], mesh: jax.sharding.Mesh) -> dict[str, jax.Array]:
    """Global arrays from a batch that every host built whole (evaluation data): each passes its own rows.

    The batch is padded with all-padding rows (id 0: no tokens, no loss, outputs nobody reads) to `eval_rows`, so
    that ``decode.batch_size`` sentences can be evaluated on a pod with more data-parallel devices than that.
    """
    rows, count, index = next(iter(batch.values())).shape[0], jax.process_count(), jax.process_index()
    padded = eval_rows(rows, mesh)
    if padded != rows:
        batch = {k: np.pad(v, [(0, padded - rows)] + [(0, 0)] * (v.ndim - 1)) for k, v in batch.items()}
    n = padded // count
    return global_batch({k: v[index * n:(index + 1) * n] for k, v in batch.items()}, mesh)


def gather_to_host(x: jax.Array) -> np.ndarray:
    """The whole of a (possibly multi-host) global array as numpy, on every host."""
    if jax.process_count() == 1:
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))

