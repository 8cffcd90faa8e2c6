"""The train step's gradients and Adam updates in absolute terms, against an independent computation.

Used by tests/test_accumulation_absolute.py in a subprocess (4 simulated CPU devices must be set before JAX
starts)::

    python tests/scripts/accumulation_absolute.py

Three steps of the tiny model (dropout off, ε_ls = 0.1) on packed batches with uneven padding, run

* by the train step on 1 device (grad_accum_steps = 1) and on a (4, 1, 1) mesh with grad_accum_steps = 2;
* independently: ``jax.grad`` of (Σ over non-pad targets of the label-smoothed cross-entropy, written here from
  §5.4 with the convention of transformer_jax/train/loss.py: 1 - ε on the reference, ε/(V-1) on every other
  id) / (the step's global count of non-pad targets), and Adam (§5.3) written here in numpy.

The train step's gradient of step 1 is read from Adam's first moment (μ₁ = (1 - β₁)·g₁). Prints one JSON object
of relative errors (see the test for what is compared), plus the errors that two wrong normalisations would
give, to show that the comparison can tell them apart.
"""

import sys

from tiny_setup import packed_batches, set_xla_flags, tiny_config

set_xla_flags(device_count=4)

import json

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx

from transformer_jax import sharding
from transformer_jax.model.transformer import Transformer
from transformer_jax.train.step import init_state, make_setup, make_train_step

STEPS = 3
ROWS, LENGTH = 16, 16
RUNS = {"1": ((1, 1, 1), 1, 1), "4,1,1/accum2": ((4, 1, 1), 4, 2)}  # name → (mesh, devices, grad_accum_steps)


def config_for(mesh_shape: tuple[int, int, int], accum: int) -> ml_collections.ConfigDict:
    c = tiny_config(grad_accum_steps=accum)
    assert c.model.dropout_rate == 0.0 and c.train.label_smoothing == 0.1
    c.model.dtype = "float32"
    c.train.mesh = ml_collections.ConfigDict(dict(zip(("data", "fsdp", "tensor"), mesh_shape)))
    return c


def run_train_step(name: str, batches: list[dict]) -> dict:
    mesh_shape, devices, accum = RUNS[name]
    config = config_for(mesh_shape, accum)
    mesh = sharding.make_mesh(config.train.mesh, devices=jax.devices()[:devices])
    setup = make_setup(config, mesh)
    with jax.set_mesh(mesh):
        step_fn = make_train_step(setup)
        state = init_state(setup)
        initial = jax.tree.map(np.asarray, state["params"])
        out = {"initial": initial, "losses": [], "nlls": [], "tokens": []}
        for step, batch in enumerate(batches):
            state, metrics = step_fn(state, sharding.global_batch(batch, mesh))
            out["losses"].append(float(metrics["train_loss"]))
            out["nlls"].append(float(metrics["train_nll"]))
            out["tokens"].append(float(metrics["target_tokens"]))
            if step == 0:
                out["mu_1"] = jax.tree.map(np.asarray, state["opt_state"][0].mu)
        out["params"] = jax.tree.map(np.asarray, state["params"])
        out["mu"] = jax.tree.map(np.asarray, state["opt_state"][0].mu)
        out["nu"] = jax.tree.map(np.asarray, state["opt_state"][0].nu)
    return out


# --- the independent computation ---


def smoothed_loss_sums(logits: jax.Array, targets: jax.Array, epsilon: float) -> tuple[jax.Array, ...]:
    """§5.4: Σ over non-pad targets of the cross-entropy against q (1 - ε on the reference, ε/(V-1) elsewhere),
    that sum minus the entropy of q per token (the reported loss), and Σ -log p(reference)."""
    vocab = logits.shape[-1]
    log_p = jax.nn.log_softmax(logits, axis=-1)
    q = jnp.where(jax.nn.one_hot(targets, vocab, dtype=bool), 1.0 - epsilon, epsilon / (vocab - 1))
    real = (targets != 0).astype(jnp.float32)
    cross_entropy = -(q * log_p).sum(-1)
    entropy = -(q * jnp.log(q)).sum(-1)
    nll = -jnp.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]
    return (cross_entropy * real).sum(), ((cross_entropy - entropy) * real).sum(), (nll * real).sum()


def make_reference_grad(config: ml_collections.ConfigDict):
    graphdef, _ = nnx.split(Transformer(config.model, rngs=nnx.Rngs(0)), nnx.Param)
    epsilon = config.train.label_smoothing

    def objective(params, batch, count):
        model = nnx.merge(graphdef, params)
        logits = model(batch["inputs"], batch["targets"], batch["inputs_segmentation"],
                       batch["targets_segmentation"], batch["inputs_position"], batch["targets_position"])
        total, reported, nll = smoothed_loss_sums(logits, batch["targets"], epsilon)
        return total / count, (reported / count, nll / count)

    return jax.jit(jax.grad(objective, has_aux=True))


def adam(params: dict, grads_per_step: list[dict], config: ml_collections.ConfigDict) -> tuple[dict, dict, dict]:
    """§5.3 in numpy: Adam(β1, β2, ε) with lrate = scale · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)."""
    t = config.train
    b1, b2, eps = t.adam_b1, t.adam_b2, t.adam_eps
    params = jax.tree.map(lambda p: np.asarray(p, np.float64), params)
    mu = jax.tree.map(np.zeros_like, params)
    nu = jax.tree.map(np.zeros_like, params)
    for step, grads in enumerate(grads_per_step, start=1):
        grads = jax.tree.map(lambda g: np.asarray(g, np.float64), grads)
        lr = t.learning_rate_scale * config.model.d_model ** -0.5 * min(step ** -0.5, step * t.warmup_steps ** -1.5)
        mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
        nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, nu, grads)
        correction_1, correction_2 = 1 - b1 ** step, 1 - b2 ** step  # bias corrections (Kingma & Ba)

        def update(p, m, v, lr=lr, c1=correction_1, c2=correction_2):
            return p - lr * (m / c1) / (np.sqrt(v / c2) + eps)

        params = jax.tree.map(update, params, mu, nu)
    return params, mu, nu


# The key biases' gradient is 0 in exact arithmetic (b_k adds q·b_k to a whole softmax row), so it is rounding
# noise (~1e-9) whose relative error means nothing, and Adam turns that noise into ±lr steps: b_k is compared
# apart, by the size of its gradient.
NOISE = "b_k"


def _leaves(tree: dict, noise: bool) -> list[np.ndarray]:
    return [np.asarray(leaf, np.float64) for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
            if (str(path[-1].key) == NOISE) == noise]


def relative_error(ours: dict, reference: dict) -> float:
    """max over leaves (b_k left out) of max|ours - reference| / max|reference|."""
    errors = []
    for a, b in zip(_leaves(ours, False), _leaves(reference, False)):
        errors.append(float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)))
    return max(errors)


def noise_scale(grads: dict) -> float:
    """max|gradient of b_k| / max|gradient| over all other parameters."""
    return max(np.abs(g).max() for g in _leaves(grads, True)) / max(np.abs(g).max() for g in _leaves(grads, False))


def max_difference(ours: dict, reference: dict, noise: bool = False) -> float:
    return max(float(np.abs(a - b).max()) for a, b in zip(_leaves(ours, noise), _leaves(reference, noise)))


def main() -> None:
    assert jax.device_count() == 4, jax.devices()
    batches = packed_batches(STEPS, rows=ROWS, length=LENGTH, vocab_size=tiny_config().model.vocab_size, seed=5)
    runs = {name: run_train_step(name, batches) for name in RUNS}
    initial = runs["1"]["initial"]
    config = config_for((1, 1, 1), 1)
    grad_fn = make_reference_grad(config)

    params, grads, losses, nlls, counts = initial, [], [], [], []
    for batch in batches:
        count = float((batch["targets"] != 0).sum())
        g, (loss, nll) = grad_fn(params, {k: jnp.asarray(v) for k, v in batch.items()}, count)
        grads.append(jax.tree.map(np.asarray, g))
        losses.append(float(loss))
        nlls.append(float(nll))
        counts.append(count)
        params = adam(initial, grads, config)[0]  # the next step's gradient is taken at the updated parameters
        params = jax.tree.map(lambda p: np.asarray(p, np.float32), params)
    ref_params, ref_mu, ref_nu = adam(initial, grads, config)
    b1 = config.train.adam_b1
    lr_1 = config.train.learning_rate_scale * config.model.d_model ** -0.5 * config.train.warmup_steps ** -1.5

    # Two wrong normalisations the comparison must tell apart: the mean of the micro-batches' own means
    # (grad_accum_steps = 2, rows r % 2), and Σ loss / (number of target positions incl. padding).
    batch = {k: jnp.asarray(v) for k, v in batches[0].items()}
    halves = [jax.tree.map(lambda x, i=i: x[i::2], batch) for i in range(2)]
    per_micro = [grad_fn(initial, h, float((h["targets"] != 0).sum()))[0] for h in halves]
    mean_of_means = jax.tree.map(lambda a, b: (np.asarray(a) + np.asarray(b)) / 2, *per_micro)
    all_positions = grad_fn(initial, batch, float(batch["targets"].size))[0]

    out = {"counts": counts, "reference_losses": losses, "reference_nlls": nlls,
           "reference_grad_1_noise_scale": noise_scale(grads[0]), "runs": {},
           "wrong": {"mean_of_microbatch_means": relative_error(mean_of_means, grads[0]),
                     "divided_by_all_positions": relative_error(all_positions, grads[0])}}
    for name, run in runs.items():
        out["runs"][name] = {
            "same_initial_params": relative_error(run["initial"], initial) == 0.0,
            "losses": run["losses"], "nlls": run["nlls"], "tokens": run["tokens"],
            "grad_1": relative_error(jax.tree.map(lambda m: m / (1 - b1), run["mu_1"]), grads[0]),
            "mu_3": relative_error(run["mu"], ref_mu),
            "nu_3": relative_error(run["nu"], ref_nu),
            "grad_1_noise_scale": noise_scale(jax.tree.map(lambda m: m / (1 - b1), run["mu_1"])),
            # Parameters after 3 steps, in units of the first step's learning rate (b_k apart, see NOISE).
            "params_3_in_lr": max_difference(run["params"], ref_params) / lr_1,
            "params_3_b_k_in_lr": max_difference(run["params"], ref_params, noise=True) / lr_1,
            "moved_in_lr": max_difference(run["params"], initial) / lr_1,
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
    sys.stdout.flush()
