"""Building the Transformer of a config: its graph and its parameters' shapes and shardings on a mesh, and its
initial parameters.

Training, decoding and ahead-of-time compilation start from :func:`model_setup`, which allocates nothing: decoding
restores parameters into it and builds no optimizer; train/step.py adds the optimizer state for training. Each
parameter is sharded by the logical axes it carries (model/params.py), mapped to mesh axes by sharding.py.
"""

import dataclasses

import jax
import ml_collections
from flax import nnx

from transformer_jax import sharding
from transformer_jax.model.transformer import Transformer


@dataclasses.dataclass
class ModelSetup:
    """The model's graph and its parameters' shapes and shardings on a mesh (nothing allocated)."""

    config: ml_collections.ConfigDict
    mesh: jax.sharding.Mesh
    graphdef: nnx.GraphDef
    param_shardings: dict
    abstract_params: dict  # ShapeDtypeStructs carrying the shardings (restore targets)


def model_setup(config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh) -> ModelSetup:
    """Splits the (abstract) model of ``config.model`` into graph + parameters and shards every parameter by the
    logical axes it carries (sharding.py's ``LOGICAL_AXIS_RULES``)."""
    abstract_model = nnx.eval_shape(lambda: Transformer(config.model, rngs=nnx.Rngs(config.seed)))
    graphdef, abstract = nnx.split(abstract_model, nnx.Param)
    shardings = sharding.param_shardings(abstract, mesh)
    abstract = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                            nnx.to_pure_dict(abstract), shardings)
    return ModelSetup(config, mesh, graphdef, shardings, abstract)


def init_params(config: ml_collections.ConfigDict) -> dict:
    """The initial parameters of ``config.model`` (seed ``config.seed``) as a plain dict (call under jit)."""
    return nnx.to_pure_dict(nnx.state(Transformer(config.model, rngs=nnx.Rngs(config.seed)), nnx.Param))
