"""Tests of the training maths (§5.3, §5.4): schedule, label-smoothed loss, Adam, accumulation, clip / decay.

Each check compares against a hand computation in numpy (not against the library's own helpers). The train-step
test uses a 1-device mesh and the tiny model of tests/scripts/tiny_setup.py; compiling its step twice is most of
this file's run time.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import tiny_setup as tiny
from transformer_jax import sharding
from transformer_jax.configs import base
from transformer_jax.model.build import init_params
from transformer_jax.train.loss import cross_entropy_sums
from transformer_jax.train.optimizer import decay_mask, learning_rate_schedule, make_optimizer
from transformer_jax.train.step import init_state, make_setup, make_train_step
from transformer_jax.train.trainer import Throughput


def paper_lrate(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """§5.3 written out: lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5) (times a scale)."""
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


# --- §5.3 schedule -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("step", [1, 2, 100, 1000, 3999, 4000, 4001, 10_000, 100_000])
def test_schedule_matches_paper_formula(step):
    schedule = learning_rate_schedule(512, 4000)
    # optax counts updates from 0: the paper's step s is optax count s - 1.
    np.testing.assert_allclose(float(schedule(step - 1)), paper_lrate(step, 512, 4000), rtol=1e-6)


def test_schedule_peak_at_warmup_and_scale():
    c = base.get_config()
    schedule = learning_rate_schedule(c.model.d_model, c.train.warmup_steps, c.train.learning_rate_scale)
    values = np.array([float(schedule(count)) for count in range(3990, 4010)])
    assert values.argmax() + 3990 == 3999  # count 3999 = step 4000 = warmup_steps
    np.testing.assert_allclose(values.max(), 512**-0.5 * 4000**-0.5, rtol=1e-6)
    assert abs(values.max() - 7.0e-4) < 0.05e-4  # the paper's peak for base (≈ 6.99e-4)
    # count 0 is step 1 (not 0, which would be lrate 0): d^-0.5 · warmup^-1.5.
    np.testing.assert_allclose(float(schedule(0)), 512**-0.5 * 4000**-1.5, rtol=1e-6)
    scaled = learning_rate_schedule(512, 4000, scale=2.5)
    np.testing.assert_allclose(float(scaled(99)), 2.5 * paper_lrate(100, 512, 4000), rtol=1e-6)


def test_cooldown_is_a_linear_ramp_over_the_last_steps():
    """cooldown_steps = 4 of 10: steps 1-6 keep the §5.3 rate, steps 7-10 take 4/4, 3/4, 2/4, 1/4 of it."""
    schedule = learning_rate_schedule(64, 3, 2.0, num_steps=10, cooldown_steps=4)
    for step in range(1, 11):
        factor = min(1.0, (10 - (step - 1)) / 4)
        np.testing.assert_allclose(float(schedule(step - 1)), factor * paper_lrate(step, 64, 3, 2.0), rtol=1e-6)
    assert float(schedule(9)) > 0  # the last update is not wasted at rate 0
    off = learning_rate_schedule(64, 3, 2.0, num_steps=10, cooldown_steps=0)
    assert all(float(off(c)) == float(learning_rate_schedule(64, 3, 2.0)(c)) for c in range(10))


@pytest.mark.parametrize("cooldown", [-1, 11])
def test_cooldown_outside_the_run_is_refused(cooldown):
    with pytest.raises(ValueError, match="train.cooldown_steps must be in"):
        learning_rate_schedule(64, 3, num_steps=10, cooldown_steps=cooldown)


# --- §5.4 label-smoothed cross-entropy ---------------------------------------------------------------------------

LOGITS = np.array([[[2.0, -1.0, 0.5, 0.0], [0.1, 0.2, 3.0, -2.0], [1.0, 1.0, 1.0, 1.0]],
                   [[-0.5, 4.0, 0.0, 1.5], [0.0, 0.0, 0.0, 9.0], [3.0, -3.0, 2.0, 0.0]]], np.float32)  # [2, 3, V=4]
TARGETS = np.array([[1, 2, 0], [1, 3, 3]], np.int32)  # one pad token (id 0) at [0, 2]


def hand_smoothed_loss(logits: np.ndarray, targets: np.ndarray, eps: float) -> tuple[float, float, float]:
    """Σ over non-pad tokens of [Σ_v q_v·(−log p_v) − H(q)], Σ −log p_y, and the token count, in float64."""
    vocab = logits.shape[-1]
    loss = nll = tokens = 0.0
    for b in range(targets.shape[0]):
        for t in range(targets.shape[1]):
            y = targets[b, t]
            if y == 0:
                continue
            z = logits[b, t].astype(np.float64)
            log_p = z - math.log(np.exp(z).sum())
            q = np.full(vocab, eps / (vocab - 1))
            q[y] = 1.0 - eps
            entropy = -sum(qv * math.log(qv) for qv in q if qv > 0)
            loss += float(-(q * log_p).sum()) - entropy
            nll += -log_p[y]
            tokens += 1
    return loss, nll, tokens


def test_label_smoothing_matches_hand_computation():
    sums = cross_entropy_sums(jnp.asarray(LOGITS), jnp.asarray(TARGETS), 0.1)
    loss, nll, tokens = hand_smoothed_loss(LOGITS, TARGETS, 0.1)
    assert float(sums["tokens"]) == tokens == 5  # the pad target is not counted
    np.testing.assert_allclose(float(sums["loss"]), loss, rtol=1e-5)
    np.testing.assert_allclose(float(sums["nll"]), nll, rtol=1e-5)
    assert float(sums["loss"]) < float(sums["nll"])  # smoothing subtracts H(q) and spreads the target


def test_pad_tokens_are_ignored():
    changed = LOGITS.copy()
    changed[0, 2] = [50.0, -50.0, 7.0, 3.0]  # logits at the padded position must not matter
    a = cross_entropy_sums(jnp.asarray(LOGITS), jnp.asarray(TARGETS), 0.1)
    b = cross_entropy_sums(jnp.asarray(changed), jnp.asarray(TARGETS), 0.1)
    for k in ("loss", "nll", "tokens"):
        assert float(a[k]) == float(b[k])


def test_smoothed_loss_is_zero_at_the_target_distribution():
    eps, vocab = 0.1, 4
    q = np.full(vocab, eps / (vocab - 1))
    q[2] = 1 - eps
    logits = np.log(q)[None, None].astype(np.float32)  # p = q exactly → KL(q‖p) = 0
    sums = cross_entropy_sums(jnp.asarray(logits), jnp.asarray([[2]], jnp.int32), eps)
    assert abs(float(sums["loss"])) < 1e-5


def test_no_smoothing_is_plain_cross_entropy():
    sums = cross_entropy_sums(jnp.asarray(LOGITS), jnp.asarray(TARGETS), 0.0)
    loss, nll, _ = hand_smoothed_loss(LOGITS, TARGETS, 0.0)
    np.testing.assert_allclose(float(sums["loss"]), loss, rtol=1e-5)
    np.testing.assert_allclose(loss, nll, rtol=1e-12)  # with ε = 0, q is one-hot and H(q) = 0
    np.testing.assert_allclose(float(sums["loss"]), float(sums["nll"]), rtol=1e-6)
    ce = optax.softmax_cross_entropy_with_integer_labels(jnp.asarray(LOGITS), jnp.asarray(TARGETS))
    np.testing.assert_allclose(float(sums["nll"]), float((ce * (TARGETS != 0)).sum()), rtol=1e-6)


# --- §5.3 Adam (and the optional clip / decay switches) ------------------------------------------------------------

PARAMS = {"w": np.array([[0.5, -1.0], [2.0, 0.25]], np.float32), "b": np.array([0.1, -0.2, 0.3], np.float32)}
# Three steps of gradients; "b" has components of the size of ε = 1e-9, where ε changes the update by half.
GRADS = [
    {"w": np.array([[0.3, -0.1], [0.02, 1.5]], np.float32), "b": np.array([1e-9, -2e-9, 0.5], np.float32)},
    {"w": np.array([[-0.2, 0.4], [0.0, 0.7]], np.float32), "b": np.array([3e-9, 1e-9, -0.1], np.float32)},
    {"w": np.array([[0.05, 0.05], [-1.0, 0.2]], np.float32), "b": np.array([-1e-9, 4e-9, 0.2], np.float32)},
]


def optimizer_config(**train):
    c = base.get_config()
    c.model.d_model = 64
    c.train.warmup_steps = 10
    c.train.learning_rate_scale = 3.0
    c.train.update(train)
    return c


def hand_adam(params, grads_seq, *, d_model, warmup, scale, b1=0.9, b2=0.98, eps=1e-9, clip=0.0, decay=0.0,
              rate_factors=None):
    """Adam (Kingma & Ba) with bias correction, in float64; optional global-norm clip before, AdamW decay after."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(x) for k, x in p.items()}
    for t, grads in enumerate(grads_seq, start=1):
        g = {k: x.astype(np.float64) for k, x in grads.items()}
        if clip:
            norm = math.sqrt(sum(float((x**2).sum()) for x in g.values()))
            g = {k: x * min(1.0, clip / norm) for k, x in g.items()}
        lr = paper_lrate(t, d_model, warmup, scale) * (1.0 if rate_factors is None else rate_factors[t - 1])
        for k, value in p.items():
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2
            update = (m[k] / (1 - b1**t)) / (np.sqrt(v[k] / (1 - b2**t)) + eps) + decay * value
            p[k] = value - lr * update
    return p


def run_optimizer(config, params=PARAMS, grads_seq=GRADS):
    tx = make_optimizer(config)
    p = jax.tree.map(jnp.asarray, params)
    state = tx.init(p)
    for grads in grads_seq:
        updates, state = tx.update(jax.tree.map(jnp.asarray, grads), state, p)
        p = optax.apply_updates(p, updates)
    return jax.tree.map(np.asarray, p)


def assert_trees_close(actual, desired, rtol=1e-5, atol=1e-7):
    for k in desired:
        np.testing.assert_allclose(actual[k], desired[k], rtol=rtol, atol=atol, err_msg=k)


def test_paper_adam_hyperparameters():
    t = base.get_config().train
    assert (t.adam_b1, t.adam_b2, t.adam_eps) == (0.9, 0.98, 1e-9)
    assert t.grad_clip_norm == 0 and t.weight_decay == 0  # the paper has neither


def test_adam_matches_hand_rolled_numpy():
    got = run_optimizer(optimizer_config())
    want = hand_adam(PARAMS, GRADS, d_model=64, warmup=10, scale=3.0)
    assert_trees_close(got, want)
    # The check has teeth: other β2 / ε (e.g. the PyTorch defaults) give clearly different parameters.
    for wrong in (dict(b2=0.999), dict(eps=1e-8), dict(b1=0.8)):
        other = hand_adam(PARAMS, GRADS, d_model=64, warmup=10, scale=3.0, **wrong)
        assert any(not np.allclose(got[k], other[k], rtol=1e-4, atol=0) for k in got), wrong


def test_grad_clipping_switch():
    clip = 0.5  # every step's gradient norm is above it
    got = run_optimizer(optimizer_config(grad_clip_norm=clip))
    assert_trees_close(got, hand_adam(PARAMS, GRADS, d_model=64, warmup=10, scale=3.0, clip=clip))
    plain = run_optimizer(optimizer_config())
    assert not np.allclose(got["w"], plain["w"], rtol=1e-4, atol=0)


def test_cooldown_reaches_the_optimizer():
    """make_optimizer takes the cooldown from config.train: with 2 of 3 steps cooled, step 2 moves at 2/2 and
    step 3 at 1/2 of the §5.3 rate (hand Adam on the same rates)."""
    got = run_optimizer(optimizer_config(num_steps=3, cooldown_steps=2))
    assert_trees_close(got, hand_adam(PARAMS, GRADS, d_model=64, warmup=10, scale=3.0, rate_factors=(1, 1, 0.5)))
    assert not np.allclose(got["w"], run_optimizer(optimizer_config(num_steps=3))["w"], rtol=1e-4, atol=0)


def test_weight_decay_switch():
    got = run_optimizer(optimizer_config(weight_decay=0.1))
    assert_trees_close(got, hand_adam(PARAMS, GRADS, d_model=64, warmup=10, scale=3.0, decay=0.1))
    plain = run_optimizer(optimizer_config())
    assert not np.allclose(got["w"], plain["w"], rtol=1e-4, atol=0)


@pytest.mark.parametrize("which, decayed_name", [("matrices", "w_1"), ("vectors", "b_1")])
def test_weight_decay_params_chooses_what_decays(which, decayed_name):
    """weight_decay_params: "matrices" decays the matrix "w_1" and spares the bias "b_1"; "vectors" the reverse
    (hand AdamW on each)."""
    rename = lambda tree: {"w_1": tree["w"], "b_1": tree["b"]}
    params, grads = rename(PARAMS), [rename(g) for g in GRADS]
    got = run_optimizer(optimizer_config(weight_decay=0.1, weight_decay_params=which), params, grads)
    decayed = hand_adam(params, grads, d_model=64, warmup=10, scale=3.0, decay=0.1)
    plain = hand_adam(params, grads, d_model=64, warmup=10, scale=3.0)
    assert_trees_close(got, {k: (decayed if k == decayed_name else plain)[k] for k in params})
    for k in params:  # the sparing is visible in both leaves
        assert not np.allclose(decayed[k], plain[k], rtol=1e-4, atol=0)


@pytest.mark.parametrize("decay", [0.0, 0.1])
def test_weight_decay_params_rejects_unknown_values(decay):
    """A misspelt choice is an error at make_optimizer, even with the decay off."""
    with pytest.raises(ValueError, match="weight_decay_params must be one of"):
        make_optimizer(optimizer_config(weight_decay=decay, weight_decay_params="matrix"))


def test_decay_mask_on_the_model_names_not_ranks():
    """On the real parameter tree, "matrices" decays every W and embedding table and spares every bias (the
    per-head b_q is 2-D) and every LayerNorm gain/bias; "vectors" decays exactly those it spares."""
    c = optimizer_config()
    c.model.update(num_encoder_layers=1, num_decoder_layers=1, num_heads=2, d_k=4, d_v=4, d_ff=16, vocab_size=32)
    params = jax.eval_shape(lambda: init_params(c))
    vectors = {"b_q", "b_k", "b_v", "b_o", "b_1", "b_2", "bias", "scale"}
    marks = {which: [(path[-1].key, m) for path, m in
                     jax.tree_util.tree_flatten_with_path(decay_mask(params, which))[0]]
             for which in ("matrices", "vectors", "all")}
    assert {name for name, m in marks["matrices"] if m} >= {"w_q", "w_k", "w_v", "w_o", "w_1", "w_2", "table"}
    assert {name for name, m in marks["matrices"] if not m} == vectors
    # "vectors" is the exact complement of "matrices", and "all" decays every leaf
    assert [(name, not m) for name, m in marks["matrices"]] == marks["vectors"]
    assert all(m for _, m in marks["all"])


# --- the jitted train step: accumulation and the schedule's wiring -----------------------------------------------

# ε = 1e-4 instead of 1e-9 for the step tests only: some gradients are exactly 0 in exact arithmetic (e.g. the key
# biases: softmax ignores a shift shared by all keys), so fp32 rounding noise of ~1e-10 there would be blown up by
# Adam to ±lr with ε = 1e-9 and hide the comparison; with ε = 1e-4 real gradients still get Adam-sized updates.
STEP_OVERRIDES = dict(adam_eps=1e-4)


def run_steps(config, batches, initial_state):
    """New params (numpy) and per-step metrics after ``make_train_step`` on ``batches`` from ``initial_state``."""
    mesh = sharding.make_mesh(config.train.mesh, devices=jax.devices()[:1])
    setup = make_setup(config, mesh)
    with jax.set_mesh(mesh):
        step_fn = make_train_step(setup)
        state = jax.tree.map(jnp.copy, initial_state)  # the step donates its input state
        metrics = []
        for batch in batches:
            state, m = step_fn(state, sharding.global_batch(batch, mesh))
            metrics.append({k: float(v) for k, v in m.items()})
    return jax.tree.map(np.asarray, state["params"]), metrics


def test_train_step_accumulation_schedule_and_token_normalisation():
    # One test (not several sharing a fixture) so that pytest-xdist compiles the tiny train step only once.
    config = tiny.tiny_config(**STEP_OVERRIDES)
    batches = tiny.packed_batches(2, rows=16, length=16, vocab_size=config.model.vocab_size, seed=1)
    state = init_state(make_setup(config, sharding.make_mesh(config.train.mesh, devices=jax.devices()[:1])))
    # Rows r % 2 form the micro-batches: their token counts differ, so a mean of per-micro-batch means would not
    # equal the big-batch loss; only normalising by the whole step's token count does.
    tokens = (batches[0]["targets"] != 0).sum(axis=1)
    assert tokens[0::2].sum() != tokens[1::2].sum()

    params_1, metrics_1 = run_steps(config, batches, state)
    params_2, metrics_2 = run_steps(tiny.tiny_config(grad_accum_steps=2, **STEP_OVERRIDES), batches, state)
    for m1, m2 in zip(metrics_1, metrics_2):
        np.testing.assert_allclose(m2["train_loss"], m1["train_loss"], rtol=1e-6)
        np.testing.assert_allclose(m2["train_nll"], m1["train_nll"], rtol=1e-6)
        assert m2["target_tokens"] == m1["target_tokens"]
        np.testing.assert_allclose(m2["grad_norm"], m1["grad_norm"], rtol=1e-5)
    start = jax.tree.map(np.asarray, state["params"])
    moved = max(float(np.abs(a - b).max()) for a, b in zip(jax.tree.leaves(params_1), jax.tree.leaves(start)))
    assert moved > 1e-3  # the updates are far larger than the tolerance below
    for a, b in zip(jax.tree.leaves(params_2), jax.tree.leaves(params_1)):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)

    # The loss is per target token of the whole step, and starts near a uniform guess over the vocabulary.
    assert metrics_1[0]["target_tokens"] == tokens.sum()
    assert abs(metrics_1[0]["train_nll"] - math.log(config.model.vocab_size)) < 1.0
    # The step reports the §5.3 rate of the paper's step = state step + 1 (optax count 0 ↔ step 1).
    t = config.train
    for step, m in enumerate(metrics_1, start=1):
        want = paper_lrate(step, config.model.d_model, t.warmup_steps, t.learning_rate_scale)
        np.testing.assert_allclose(m["learning_rate"], want, rtol=1e-6)


def test_throughput_leaves_compiling_steps_out_with_their_tokens():
    """The logged tokens/s: a step that compiled is left out whole (time and tokens), evaluations by time; an
    interval of compiling steps only — the first after a resume — has no rate, not its tokens over ~0 s."""
    now = [0.0]
    meter = Throughput(clock=lambda: now[0])
    now[0] += 5.0  # a resumed run's first step: it compiled, 5 s, 4000 tokens
    meter.exclude(5.0, 4000.0)
    assert meter.rate(4000.0) is None
    now[0] += 7.0  # then a compiling step (6 s, 1000 tokens) and a plain one (1 s, 3000 tokens)
    meter.exclude(6.0, 1000.0)
    assert meter.rate(4000.0) == pytest.approx(3000.0)
    now[0] += 12.0  # 4 plain steps over 2 s and an evaluation of 10 s
    meter.exclude(10.0)
    assert meter.rate(8000.0) == pytest.approx(4000.0)
