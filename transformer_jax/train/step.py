"""The jitted pieces of training: sharded state creation, the train step (§5) and the eval step.

State is a plain pytree ``{"params", "opt_state", "step", "rng"}``; the NNX model is split once (graphdef +
parameters) and merged inside the jitted functions, so no NNX Python overhead runs per step. Parameters and
optimizer state are created directly on the mesh with their shardings (no full copy on one device), and the
train step is ``jax.jit`` with in/out shardings and the state donated.
"""

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax import nnx
from jax.sharding import NamedSharding

from transformer_jax import sharding
from transformer_jax.model.build import init_params, model_setup
from transformer_jax.model.dropout import fold
from transformer_jax.train.loss import projected_cross_entropy_sums, projected_rdrop_sums
from transformer_jax.train.optimizer import make_optimizer, schedule_from_config


@dataclasses.dataclass
class Setup:
    """Everything static about a run's state on a mesh."""

    config: ml_collections.ConfigDict
    mesh: jax.sharding.Mesh
    graphdef: nnx.GraphDef
    optimizer: optax.GradientTransformation
    state_shardings: dict
    abstract_state: dict  # ShapeDtypeStructs carrying the shardings (restore targets)

    @property
    def param_shardings(self) -> dict:
        return self.state_shardings["params"]


def make_setup(config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh) -> Setup:
    """Derives the graph, optimizer and the shardings of every state leaf, without allocating anything."""
    model = model_setup(config, mesh)
    param_shardings = model.param_shardings
    tx = make_optimizer(config)
    abstract_opt = jax.eval_shape(tx.init, model.abstract_params)
    is_sharding = lambda x: isinstance(x, NamedSharding)
    opt_shardings = optax.tree_map_params(tx, lambda _, s: s, abstract_opt, param_shardings,
                                          transform_non_params=lambda _: sharding.replicated(mesh),
                                          is_leaf=is_sharding)
    rep = sharding.replicated(mesh)
    shardings = {"params": param_shardings, "opt_state": opt_shardings, "step": rep, "rng": rep}
    abstract = jax.eval_shape(lambda: _init(config, tx))
    abstract = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings)
    return Setup(config, mesh, model.graphdef, tx, shardings, abstract)


def _init(config: ml_collections.ConfigDict, tx: optax.GradientTransformation) -> dict:
    params = init_params(config)
    return {"params": params, "opt_state": tx.init(params), "step": jnp.zeros((), jnp.int32),
            "rng": jax.random.PRNGKey(config.seed + 1)}


def init_state(setup: Setup) -> dict:
    """Creates the initial state directly sharded on the mesh."""
    return jax.jit(lambda: _init(setup.config, setup.optimizer), out_shardings=setup.state_shardings)()


def _model_sums(graphdef: nnx.GraphDef, params: dict, batch: dict, label_smoothing: float,
                dropout_key: jax.Array | None, rdrop_alpha: float = 0.0) -> dict:
    """Loss sums of one batch; with ``rdrop_alpha`` > 0 and dropout on, each row runs twice (R-Drop, loss.py):
    ``jnp.repeat`` puts the two copies side by side on the row's own device, and the masks differ because they
    are drawn for the doubled array."""
    model = nnx.merge(graphdef, params)
    rdrop = rdrop_alpha > 0 and dropout_key is not None
    targets = batch["targets"]
    if rdrop:
        batch = jax.tree.map(lambda x: jnp.repeat(x, 2, axis=0), batch)
    memory = model.encode(batch["inputs"], batch.get("inputs_segmentation"), batch.get("inputs_position"),
                          fold(dropout_key, 0))
    hidden = model.decode_hidden(batch["targets"], memory, batch["inputs"], batch.get("inputs_segmentation"),
                                 batch.get("targets_segmentation"), batch.get("targets_position"),
                                 fold(dropout_key, 1))
    if rdrop:
        hidden = hidden.reshape(targets.shape[0], 2, *hidden.shape[1:])
        return projected_rdrop_sums(hidden, model.output_table(), targets, label_smoothing, rdrop_alpha)
    return projected_cross_entropy_sums(hidden, model.output_table(), targets, label_smoothing)


def make_train_step(setup: Setup) -> Callable[[dict, dict], tuple[dict, dict]]:
    """The §5 update: label-smoothed loss over k micro-batches normalised by the step's global token count
    (plus R-Drop's KL term when ``train.rdrop_alpha`` > 0)."""
    config, graphdef, tx = setup.config, setup.graphdef, setup.optimizer
    accum, smoothing = config.train.grad_accum_steps, config.train.label_smoothing
    rdrop_alpha = rdrop_alpha_from_config(config)
    schedule = schedule_from_config(config)

    def step_fn(state: dict, batch: dict) -> tuple[dict, dict]:
        params = state["params"]
        key = jax.random.fold_in(state["rng"], state["step"])  # dropout keys: fold_in(key, step)
        total_tokens = jnp.maximum((batch["targets"] != 0).sum(), 1).astype(jnp.float32)

        def micro(params, micro_batch, micro_key):
            sums = _model_sums(graphdef, params, micro_batch, smoothing, micro_key, rdrop_alpha)
            return sums["loss"] / total_tokens, sums

        grad_fn = jax.grad(micro, has_aux=True)
        if accum == 1:
            grads, sums = grad_fn(params, batch, key)
        else:
            # Row r goes to micro-batch r % k, so every device holds an equal share of each micro-batch.
            micro_batches = jax.tree.map(
                lambda x: jnp.moveaxis(x.reshape(x.shape[0] // accum, accum, *x.shape[1:]), 1, 0), batch)

            def body(carry, xs):
                i, mb = xs
                g, s = grad_fn(params, mb, jax.random.fold_in(key, i))
                return jax.tree.map(jnp.add, carry, (g, s)), None

            sum_keys = ("loss", "nll", "tokens") + (("kl",) if rdrop_alpha > 0 else ())
            zeros = jax.tree.map(jnp.zeros_like, (params, dict.fromkeys(sum_keys, 0.0)))
            zeros = (zeros[0], jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), zeros[1]))
            (grads, sums), _ = jax.lax.scan(body, zeros, (jnp.arange(accum), micro_batches))
        updates, opt_state = tx.update(grads, state["opt_state"], params)
        new_params = optax.apply_updates(params, updates)
        new_state = {"params": new_params, "opt_state": opt_state,
                     "step": state["step"] + 1, "rng": state["rng"]}
        metrics = {"train_loss": sums["loss"] / total_tokens, "train_nll": sums["nll"] / total_tokens,
                   "target_tokens": sums["tokens"], "source_tokens": (batch["inputs"] != 0).sum(),
                   "learning_rate": schedule(state["step"]),
                   "grad_norm": optax.tree.norm(grads),
                   # a finite loss can still come with a non-finite update: never checkpoint that
                   "params_finite": jnp.all(jnp.stack([jnp.isfinite(p).all() for p in jax.tree.leaves(new_params)]))}
        if rdrop_alpha > 0:
            metrics["train_rdrop_kl"] = sums["kl"] / total_tokens  # ½(KL(p₁‖p₂) + KL(p₂‖p₁)) a token
        return new_state, metrics

    batch_sharding = sharding.batch_sharding(setup.mesh)
    return jax.jit(step_fn, in_shardings=(setup.state_shardings, batch_sharding),
                   out_shardings=(setup.state_shardings, sharding.replicated(setup.mesh)), donate_argnums=0)


def rdrop_alpha_from_config(config: ml_collections.ConfigDict) -> float:
    """``train.rdrop_alpha`` (0 = off; configs written before it existed have none), checked."""
    alpha = float(config.train.get("rdrop_alpha", 0.0))
    if alpha < 0:
        raise ValueError(f"train.rdrop_alpha must be >= 0 (0 = off), got {alpha}.")
    if alpha > 0 and not any(config.model.get(k, 0.0) > 0 for k in
                             ("dropout_rate", "attention_dropout_rate", "relu_dropout_rate")):
        raise ValueError("train.rdrop_alpha > 0 compares two dropout samples, but every model dropout rate is 0: "
                         "the two passes would be identical and the step would cost twice as much for nothing.")
    return alpha


def passes_per_row(config: ml_collections.ConfigDict) -> int:
    """Forward/backward passes a training row costs: 2 under R-Drop, else 1 (FLOPs per real token scale by it)."""
    return 2 if rdrop_alpha_from_config(config) > 0 else 1


def make_eval_step(setup: Setup) -> Callable[[dict, dict], dict]:
    """Sums of loss, NLL and tokens over one batch, without dropout (dev loss / perplexity)."""
    graphdef, smoothing = setup.graphdef, setup.config.train.label_smoothing

    def eval_fn(params: dict, batch: dict) -> dict:
        return _model_sums(graphdef, params, batch, smoothing, None)

    return jax.jit(eval_fn, in_shardings=(setup.param_shardings, sharding.batch_sharding(setup.mesh)),
                   out_shardings=sharding.replicated(setup.mesh))
