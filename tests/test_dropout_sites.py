"""§5.4 "Residual Dropout": where dropout acts, and that it acts in training and not at evaluation.

The paper applies dropout (P_drop) to the output of every sub-layer, before it is added to the sub-layer input
and normalised, and to the sums of the embeddings and the positional encodings, in both stacks. These tests
check, without relying on how the model routes its dropout keys:

* the embedding + position sums are dropped in training and untouched at evaluation (a model with no layers,
  whose encoder / decoder output *is* that sum);
* the traced training forward draws random bits exactly once per site — 2 + 2·N_enc + 3·N_dec — and evaluation
  none, also inside the real train and eval steps;
* each of those draws drops exactly the tensor the paper names (sublayer output before the residual add, the
  embedding sums), compared against the numpy reference of tests/reference_transformer.py.
"""

import collections
import importlib
import pkgutil

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

import transformer_jax.model
from reference_transformer import forward, sinusoids
from transformer_jax.configs import tiny
from transformer_jax.model import dropout as dropout_module
from transformer_jax.model.transformer import Transformer

RATE = 0.5  # large, so that "about half the elements are dropped" is a sharp statement on a few hundred elements
INPUTS = np.array([[5, 6, 7, 8, 9, 10, 11], [12, 13, 14, 0, 0, 0, 0], [15, 16, 17, 18, 19, 0, 0]], np.int32)
TARGETS = np.array([[20, 21, 22, 23, 0, 0], [24, 25, 26, 27, 28, 29], [30, 31, 0, 0, 0, 0]], np.int32)


def model_config(**overrides) -> ml_collections.ConfigDict:
    m = tiny.get_config().model
    m.dtype = "float32"
    m.update(overrides)
    return m


def sites_per_forward(m: ml_collections.ConfigDict) -> int:
    """§5.4: the two embedding sums, 2 sublayers per encoder layer and 3 per decoder layer."""
    return 2 + 2 * m.num_encoder_layers + 3 * m.num_decoder_layers


# --- the embedding + position sums ---


def test_embedding_sums_are_dropped_in_training_and_not_at_evaluation():
    m = model_config(num_encoder_layers=0, num_decoder_layers=0, dropout_rate=RATE)  # output = the sums
    model = Transformer(m, rngs=nnx.Rngs(0))
    table = np.asarray(model.embedding.table[...], np.float64)
    shifted = np.pad(TARGETS, ((0, 0), (1, 0)))[:, :-1]  # decoder input: targets shifted right, 0 first
    expected = {"source": table[INPUTS] * np.sqrt(m.d_model) + sinusoids(INPUTS.shape[1], m.d_model),
                "target": table[shifted] * np.sqrt(m.d_model) + sinusoids(TARGETS.shape[1], m.d_model)}

    memory_eval = model.encode(jnp.asarray(INPUTS))
    hidden_eval = model.decode_hidden(jnp.asarray(TARGETS), memory_eval, jnp.asarray(INPUTS))
    # Evaluation (no key): exactly the sums, nothing dropped.
    np.testing.assert_allclose(memory_eval, expected["source"], atol=1e-5)
    np.testing.assert_allclose(hidden_eval, expected["target"], atol=1e-5)

    for seed in range(2):
        key = jax.random.key(seed)
        memory = np.asarray(model.encode(jnp.asarray(INPUTS), dropout_key=key))
        hidden = np.asarray(model.decode_hidden(jnp.asarray(TARGETS), memory_eval, jnp.asarray(INPUTS),
                                                dropout_key=key))
        for name, train, evaluation in (("source", memory, memory_eval), ("target", hidden, hidden_eval)):
            evaluation = np.asarray(evaluation)
            dropped = train == 0
            fraction = dropped.mean()
            assert 0.4 < fraction < 0.6, f"{name}: {fraction:.3f} of the sums dropped at P_drop {RATE}"
            # Inverted dropout: kept elements are scaled by 1 / P(keep).
            np.testing.assert_allclose(train[~dropped], evaluation[~dropped] / (1 - RATE), rtol=1e-4)


def test_full_forward_is_random_in_training_and_deterministic_at_evaluation():
    m = model_config(dropout_rate=0.1)
    model = Transformer(m, rngs=nnx.Rngs(0))
    args = jnp.asarray(INPUTS), jnp.asarray(TARGETS)
    evaluation = np.asarray(model(*args))
    np.testing.assert_array_equal(np.asarray(model(*args)), evaluation)
    one, two = (np.asarray(model(*args, dropout_key=jax.random.key(s))) for s in (1, 2))
    assert np.abs(one - evaluation).max() > 1e-2 and np.abs(one - two).max() > 1e-2
    np.testing.assert_array_equal(np.asarray(model(*args, dropout_key=jax.random.key(1))), one)  # reproducible


# --- one random draw per site ---


def _count_primitives(jaxpr, counts: collections.Counter) -> collections.Counter:
    """Primitive names in a jaxpr and every jaxpr nested in it (jit, scan, custom_vjp, cond, …)."""
    for eqn in jaxpr.eqns:
        counts[eqn.primitive.name] += 1
        for value in eqn.params.values():
            for item in value if isinstance(value, (list, tuple)) else (value,):
                inner = getattr(item, "jaxpr", item)  # ClosedJaxpr → Jaxpr
                if hasattr(inner, "eqns"):
                    _count_primitives(inner, counts)
    return counts


def random_draws(fn, *args) -> int:
    return _count_primitives(jax.make_jaxpr(fn)(*args).jaxpr, collections.Counter())["random_bits"]


@pytest.mark.parametrize("layers", [(1, 1), (2, 3)])
@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_training_forward_draws_once_per_dropout_site(layers, norm_position):
    m = model_config(num_encoder_layers=layers[0], num_decoder_layers=layers[1], norm_position=norm_position)
    assert m.dropout_rate == 0.1 and m.attention_dropout_rate == 0 and m.relu_dropout_rate == 0  # the paper's
    model = Transformer(m, rngs=nnx.Rngs(0))
    args = jnp.asarray(INPUTS), jnp.asarray(TARGETS)
    assert random_draws(lambda key: model(*args, dropout_key=key), jax.random.key(0)) == sites_per_forward(m)
    assert random_draws(lambda: model(*args)) == 0


def test_train_step_drops_out_and_eval_step_does_not():
    """The trainer's jitted steps: the train step passes a dropout key to every site, the eval step none."""
    from transformer_jax import sharding
    from transformer_jax.train.step import make_eval_step, make_setup, make_train_step

    config = tiny.get_config()
    config.model.dtype = "float32"
    config.train.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=1, tensor=1))
    mesh = sharding.make_mesh(config.train.mesh, devices=jax.devices()[:1])
    setup = make_setup(config, mesh)
    batch = {k: jax.ShapeDtypeStruct((4, 8), jnp.int32) for k in
             ("inputs", "targets", "inputs_segmentation", "targets_segmentation", "inputs_position",
              "targets_position")}
    with jax.set_mesh(mesh):
        train = make_train_step(setup).trace(setup.abstract_state, batch).jaxpr
        evaluation = make_eval_step(setup).trace(setup.abstract_state["params"], batch).jaxpr
    assert _count_primitives(train.jaxpr, collections.Counter())["random_bits"] == sites_per_forward(config.model)
    assert _count_primitives(evaluation.jaxpr, collections.Counter())["random_bits"] == 0


# --- which tensors are dropped ---


@pytest.fixture
def recorded_dropouts(monkeypatch) -> list[tuple[float, bool, np.ndarray]]:
    """Replaces the dropout function wherever the model modules imported it by an identity that records
    (rate, has_key, input). The forward is then the evaluation forward, and the records say what would be dropped.
    """
    original = dropout_module.dropout
    calls = []

    def recording(x, rate, key):
        calls.append((float(rate), key is not None, np.asarray(x, np.float64)))
        return x

    patched = 0
    for info in pkgutil.iter_modules(transformer_jax.model.__path__, "transformer_jax.model."):
        module = importlib.import_module(info.name)
        if getattr(module, "dropout", None) is original:
            monkeypatch.setattr(module, "dropout", recording)
            patched += 1
    assert patched >= 2, "expected the model modules to call transformer_jax.model.dropout.dropout"
    return calls


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_dropout_acts_on_sublayer_outputs_and_embedding_sums(recorded_dropouts, norm_position):
    m = model_config(norm_position=norm_position, dropout_rate=0.1)
    model = Transformer(m, rngs=nnx.Rngs(0))
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    with jax.default_matmul_precision("highest"):
        model(jnp.asarray(INPUTS), jnp.asarray(TARGETS), dropout_key=jax.random.key(0))
    _, sites = forward(params, m, INPUTS, TARGETS)
    active = [x for rate, has_key, x in recorded_dropouts if has_key and rate > 0]
    assert all(rate == m.dropout_rate for rate, has_key, _ in recorded_dropouts if has_key and rate > 0)
    assert len(active) == len(sites) == sites_per_forward(m)
    unmatched = dict(sites)
    for x in active:
        name = next((n for n, value in unmatched.items()
                     if value.shape == x.shape and np.allclose(x, value, atol=1e-5, rtol=1e-5)), None)
        assert name is not None, f"dropout applied to a tensor that is no §5.4 site: shape {x.shape}"
        del unmatched[name]
    assert not unmatched, f"§5.4 sites without dropout: {sorted(unmatched)}"
