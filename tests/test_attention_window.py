"""Restricted self-attention (§4, Table 1 row 4): ``model.attention_window`` r > 0.

Each query attends only to keys within distance r by position in its own sentence (|i - j| ≤ r; causal in the
decoder: i - r ≤ j ≤ i); encoder-decoder attention stays full. Checked: r ≥ the length equals full attention
(training forward on padded and packed rows, teacher forcing, cached decoding, both attention implementations);
cached decoding equals teacher forcing with a small window; the attention weights are a distribution over
exactly the allowed keys; a token outside a query's window does not reach it; `describe`'s FLOPs. Float32, tiny.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.configs import tiny
from transformer_jax.launch.describe import describe
from transformer_jax.model import attention
from transformer_jax.model.attention import (
    BAND_BLOCK_MIN,
    BandMask,
    banded_attention,
    causal_mask,
    fused_attention,
    scaled_dot_product_attention,
)
from transformer_jax.model.size import flops_per_target_token
from transformer_jax.model.transformer import START_ID, Transformer, self_attention_mask

# Padded rows: the second source and the first target end in padding (id 0).
SRC = jnp.array([[5, 6, 7, 8, 9, 0, 0, 0], [10, 11, 12, 13, 14, 15, 16, 17]], jnp.int32)
TGT = jnp.array([[13, 14, 15, 16, 17, 18, 0, 0], [18, 19, 20, 21, 22, 23, 24, 25]], jnp.int32)
# Packed rows: two sentences per row (segment ids, positions restarting at 0), then padding.
SEG = jnp.array([[1, 1, 1, 2, 2, 2, 2, 0], [1, 1, 1, 1, 1, 2, 2, 2]], jnp.int32)
POS = jnp.array([[0, 1, 2, 0, 1, 2, 3, 0], [0, 1, 2, 3, 4, 0, 1, 2]], jnp.int32)
PACKED = {"inputs": jnp.where(SEG > 0, SRC + 1, 0), "targets": jnp.where(SEG > 0, TGT + 1, 0),
          "inputs_segmentation": SEG, "targets_segmentation": SEG, "inputs_position": POS, "targets_position": POS}


def model_config(window: int, implementation: str = "cpu", layers: int = 2):
    m = tiny.get_config().model
    m.update({"dtype": "float32", "attention_implementation": implementation, "attention_window": window,
              "num_encoder_layers": layers, "num_decoder_layers": layers})
    return m


def make_model(window: int, implementation: str = "cpu", layers: int = 2, seed: int = 0) -> Transformer:
    return Transformer(model_config(window, implementation, layers), rngs=nnx.Rngs(seed))


def close(actual, desired, atol):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(desired), atol=atol, rtol=0)


def cached_logits(model: Transformer, src, tgt, beams: int = 1) -> np.ndarray:
    """Step-by-step cached decoding fed the reference targets: [B, T, vocab] (beam 0 of each sentence)."""
    state = model.prepare_memory(model.encode(src), src)
    batch, length = tgt.shape
    cache = model.init_cache(batch, length, beams)
    previous = jnp.full((batch,), START_ID, jnp.int32)
    stepped = []
    for t in range(length):
        logits, cache = model.decode_step(jnp.repeat(previous, beams), state, cache)
        logits = logits.reshape(batch, beams, -1)
        for j in range(1, beams):  # every hypothesis continued the same prefix
            close(logits[:, j], logits[:, 0], atol=1e-5)
        stepped.append(logits[:, 0])
        previous = tgt[:, t]
    return np.asarray(jnp.stack(stepped, axis=1))


# --- r ≥ the length: full attention ---------------------------------------------------------------------------------


@pytest.mark.parametrize("implementation", ["cpu", "xla"])
def test_window_at_least_the_length_equals_full_attention(implementation):
    full, wide = make_model(0, implementation), make_model(SRC.shape[1], implementation)  # same seed, same params
    close(wide(SRC, TGT), full(SRC, TGT), atol=1e-6)  # training forward (no dropout key: dropout off)
    close(wide(**PACKED), full(**PACKED), atol=1e-6)
    memory = full.encode(SRC)
    close(wide.encode(SRC), memory, atol=1e-6)
    close(wide.decode(TGT, memory, SRC), full.decode(TGT, memory, SRC), atol=1e-6)  # teacher forcing
    real = np.asarray(TGT != 0)
    close(cached_logits(wide, SRC, TGT)[real], cached_logits(full, SRC, TGT)[real], atol=1e-6)


# --- small r: cached decoding = teacher forcing -----------------------------------------------------------------------


@pytest.mark.parametrize("window,beams", [(1, 1), (2, 1), (2, 3)])
def test_cached_decoding_matches_teacher_forcing_with_a_window(window, beams):
    model = make_model(window, seed=1)
    teacher = np.asarray(model(SRC, TGT))
    real = np.asarray(TGT != 0)
    close(cached_logits(model, SRC, TGT, beams)[real], teacher[real], atol=1e-5)
    # ... and the window does restrict: full attention gives other logits.
    full = np.asarray(make_model(0, seed=1)(SRC, TGT))
    assert np.abs(full[real] - teacher[real]).max() > 1e-3


def test_cached_decoding_matches_blocked_teacher_forcing_on_long_sentences():
    """60 target positions with r = 2: teacher forcing takes the blocked path (BandMask), decoding the cache."""
    src = jnp.asarray((np.arange(2 * 60).reshape(2, 60) % 50) + 3, jnp.int32).at[0, 50:].set(0)
    tgt = jnp.asarray((np.arange(2 * 60).reshape(2, 60) * 7 % 50) + 3, jnp.int32).at[1, 55:].set(0)
    model = make_model(2, seed=2)
    assert isinstance(self_attention_mask((tgt != 0).astype(jnp.int32), jnp.zeros_like(tgt), 2), BandMask)
    real = np.asarray(tgt != 0)
    close(cached_logits(model, src, tgt)[real], np.asarray(model(src, tgt))[real], atol=1e-5)


# --- the weights: a distribution over exactly the allowed keys --------------------------------------------------------


def expected_mask(segments, positions, window, causal) -> np.ndarray:
    """By loops: same sentence, not padding, |Δposition| ≤ r, and not the future when causal. [B, L, L]."""
    seg, pos = np.asarray(segments), np.asarray(positions)
    batch, length = seg.shape
    out = np.zeros((batch, length, length), bool)
    for b, i, j in itertools.product(range(batch), range(length), range(length)):
        out[b, i, j] = (seg[b, i] == seg[b, j] != 0 and abs(pos[b, i] - pos[b, j]) <= window
                        and (not causal or j <= i))
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [1, 2])
@pytest.mark.parametrize("path", ["cpu", "xla"])
def test_weights_sum_to_one_over_the_window_and_are_zero_outside(path, window, causal):
    """Values one-hot per key make the attention output the weights themselves ([B, L, H, S])."""
    batch, length, heads, d_k = *SEG.shape, 2, 8
    q = jax.random.normal(jax.random.key(0), (batch, length, heads, d_k)) * 3
    k = jax.random.normal(jax.random.key(1), (batch, length, heads, d_k)) * 3
    v = jnp.broadcast_to(jnp.eye(length)[None, :, None, :], (batch, length, heads, length))
    mask = self_attention_mask(SEG, POS, window)  # what the model builds (the layers add causal)
    if path == "cpu":
        weights = scaled_dot_product_attention(q, k, v, mask, causal=causal)
    else:
        weights = fused_attention(q, k, v, mask, causal=causal, implementation="xla")
    weights = np.asarray(jnp.swapaxes(weights, 1, 2))  # [B, H, L, S]
    allowed = expected_mask(SEG, POS, window, causal)[:, None]
    allowed = np.broadcast_to(allowed, weights.shape)
    assert np.all(weights[~allowed] == 0.0)  # outside the window, future, other sentence, padding: exactly 0
    live = allowed.any(-1)  # padding queries have no key at all (their output is 0)
    close(weights.sum(-1)[live], np.ones(live.sum()), atol=1e-6)
    assert np.all(weights[allowed] > 0)
    if causal:
        assert np.array_equal(np.asarray(mask & causal_mask(length))[:, 0], expected_mask(SEG, POS, window, True))


def _encoder_out(model, inputs):
    return np.asarray(model.encode(inputs, PACKED["inputs_segmentation"], PACKED["inputs_position"]))


def test_a_token_outside_the_window_does_not_reach_the_query():
    """1-layer encoder, r = 1, packed row 0: columns 0-2 = sentence 1, 3-6 = sentence 2 (positions 0-3)."""
    model = make_model(1, layers=1, seed=2)
    inputs = PACKED["inputs"]
    base = _encoder_out(model, inputs)

    def changed(column):
        return _encoder_out(model, inputs.at[0, column].set(inputs[0, column] + 7))

    # Query column 3 (sentence 2, position 0) sees columns 3, 4 only: not column 2 (one column away, but the
    # other sentence), nor column 5 (position 2); column 4 (position 1) does reach it.
    close(changed(2)[0, 3], base[0, 3], atol=0)
    close(changed(5)[0, 3], base[0, 3], atol=0)
    assert np.abs(changed(4)[0, 3] - base[0, 3]).max() > 1e-3
    # Query column 5 (position 2) sees positions 1-3 (columns 4-6), not position 0 (column 3).
    close(changed(3)[0, 5], base[0, 5], atol=0)
    assert np.abs(changed(6)[0, 5] - base[0, 5]).max() > 1e-3
    # Full attention: column 5 does reach column 3.
    full = make_model(0, layers=1, seed=2)
    assert np.abs(_encoder_out(full, inputs.at[0, 5].set(inputs[0, 5] + 7))[0, 3]
                  - _encoder_out(full, inputs)[0, 3]).max() > 1e-3


def test_decoder_self_attention_window_is_causal_and_restricted():
    """1-layer decoder, r = 1: query i reads decoder inputs i-1, i, i.e. targets i-2, i-1 (shifted right)."""
    model = make_model(1, layers=1, seed=3)
    memory = model.encode(SRC)
    base = np.asarray(model.decode(TGT, memory, SRC))

    def changed(t):
        return np.asarray(model.decode(TGT.at[1, t].set(TGT[1, t] + 7), memory, SRC))

    close(changed(2)[1, 5], base[1, 5], atol=0)  # target 2 = input 3, outside [4, 5]
    close(changed(5)[1, 5], base[1, 5], atol=0)  # target 5 = input 6, the future
    assert np.abs(changed(3)[1, 5] - base[1, 5]).max() > 1e-3  # input 4
    assert np.abs(changed(4)[1, 5] - base[1, 5]).max() > 1e-3  # input 5


def test_negative_window_is_rejected():
    with pytest.raises(ValueError, match="attention_window"):
        make_model(-1)


# --- describe: the FLOPs a window needs -------------------------------------------------------------------------------


def test_describe_flops_drop_with_a_window():
    c = tiny.get_config()
    m = c.model
    m.num_encoder_layers, m.num_decoder_layers = 2, 3
    seq_len, per_key = 32, 2 * m.num_heads * (m.d_k + m.d_v)  # scores + weighted sums, per key
    full = flops_per_target_token(m, seq_len)
    assert describe(c, seq_len)["flops_per_target_token"] == full
    for window in (seq_len, seq_len + 5, 100):
        m.attention_window = window
        assert flops_per_target_token(m, seq_len) == full
    for window in (1, 4, 15, 20):
        m.attention_window = window
        saved = (2 * (seq_len - min(seq_len, 2 * window + 1))  # 2 encoder self-attentions: |i - j| ≤ r
                 + 3 * (seq_len - min(seq_len, window + 1)))  # 3 decoder self-attentions: i - r ≤ j ≤ i
        assert flops_per_target_token(m, seq_len) == full - 3 * per_key * saved  # ×3: training
        assert describe(c, seq_len)["flops_per_target_token"] == full - 3 * per_key * saved
        assert flops_per_target_token(m, seq_len) < full


# --- blocked computation on long rows (BandMask): O(n·r) work, the same numbers --------------------------------------


def _packed_long_rows(length: int, batch: int = 2, seed: int = 0):
    """Long packed rows: sentences of random lengths (segment ids, positions restarting at 0), then padding."""
    rng = np.random.default_rng(seed)
    seg, pos = np.zeros((batch, length), np.int32), np.zeros((batch, length), np.int32)
    for b in range(batch):
        start, sentence = 0, 1
        while start < length - 10:
            n = int(rng.integers(5, 40))
            seg[b, start:start + n], pos[b, start:start + n] = sentence, np.arange(min(n, length - start))
            start, sentence = start + n, sentence + 1
    return jnp.asarray(seg), jnp.asarray(pos)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [1, 5, 16, 23])
def test_banded_attention_equals_the_dense_window_mask(window, causal):
    seg, pos = _packed_long_rows(101)
    rng = np.random.default_rng(window)
    q, k, v = (jnp.asarray(rng.normal(size=(2, 101, 2, 8)), jnp.float32) for _ in range(3))
    band = BandMask(seg, pos, window, max(window, BAND_BLOCK_MIN))
    np.testing.assert_array_equal(np.asarray(band.dense()), expected_mask(seg, pos, window, False)[:, None])
    dense = scaled_dot_product_attention(q, k, v, band.dense(), causal=causal)
    close(banded_attention(q, k, v, band, causal), dense, atol=1e-6)


def test_long_rows_take_the_blocked_path_with_the_same_outputs_and_gradients(monkeypatch):
    """A model with r = 3 on 96-column packed rows: blocked (BandMask) vs the dense mask (forced by making blocks
    larger than the row): logits and every parameter's gradient agree."""
    seg, pos = _packed_long_rows(96, seed=1)
    ids = jnp.where(seg > 0, (jnp.arange(96) % 40 + 3)[None], 0)
    batch = {"inputs": ids, "targets": ids, "inputs_segmentation": seg, "targets_segmentation": seg,
             "inputs_position": pos, "targets_position": pos}
    model = make_model(3)
    assert isinstance(self_attention_mask(seg, pos, 3), BandMask)

    def loss_and_grads():
        graphdef, params = nnx.split(model, nnx.Param)

        def loss(p):
            logits = nnx.merge(graphdef, p)(**batch)
            return jnp.sum(jnp.where(seg[..., None] > 0, jax.nn.log_softmax(logits), 0.0) ** 2) * 1e-4

        return jax.value_and_grad(loss)(params)

    blocked_loss, blocked_grads = loss_and_grads()
    monkeypatch.setattr(attention, "BAND_BLOCK_MIN", 1000)
    assert not isinstance(self_attention_mask(seg, pos, 3), BandMask)
    dense_loss, dense_grads = loss_and_grads()
    close(blocked_loss, dense_loss, atol=1e-5)
    for (path, a), (_, b) in zip(jax.tree_util.tree_leaves_with_path(blocked_grads),
                                 jax.tree_util.tree_leaves_with_path(dense_grads)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6, rtol=0, err_msg=str(path))


def test_blocked_attention_work_grows_linearly_in_the_length():
    """Table 1 row 4: with a fixed r, self-attention's FLOPs (XLA's count of the compiled forward) double when the
    row doubles; with the dense mask they quadruple."""

    def flops(length: int, window: int) -> float:
        q = jnp.zeros((1, length, 4, 64), jnp.float32)
        seg, pos = jnp.ones((1, length), jnp.int32), jnp.arange(length)[None]

        def attend(q):
            mask = self_attention_mask(seg, pos, window)
            if isinstance(mask, BandMask):
                return banded_attention(q, q, q, mask)
            return scaled_dot_product_attention(q, q, q, mask)

        return jax.jit(attend).lower(q).compile().cost_analysis()["flops"]

    assert 1.8 < flops(1024, 4) / flops(512, 4) < 2.2
    assert 3.6 < flops(1024, 0) / flops(512, 0) < 4.4
