"""The two attention implementations (model/attention.py) compute the same function, on every mask kind.

"cpu" is the einsum path tuned for XLA:CPU; "xla" is ``jax.nn.dot_product_attention`` (the accelerator path,
with its XLA implementation so that it runs here; "cudnn" is the same call with cuDNN's kernel on a GPU). Same
parameters, same inputs: outputs and gradients (parameters and inputs) agree to 1e-5 with padding, causal,
packed-segment and cross-attention masks, d_k ≠ d_v, and through cached decoding. Float32, tiny shapes.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.configs import tiny
from transformer_jax.model import attention
from transformer_jax.model.attention import MultiHeadAttention, attention_implementation, padding_mask
from transformer_jax.model.precision import compute_dtype
from transformer_jax.model.transformer import START_ID, Transformer

D = 32
# Padding (row 0), two packed segments + padding (row 1), three packed segments (row 2).
SEGMENTS = jnp.array([[1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 2, 2, 2, 2, 0], [1, 1, 2, 2, 2, 3, 3, 3]], jnp.int32)
MEMORY_SEGMENTS = jnp.array([[1, 1, 1, 0, 0, 0], [1, 1, 2, 2, 2, 0], [1, 2, 2, 3, 3, 3]], jnp.int32)

# name: (query segments, key segments, causal) — the masks the model builds (transformer.py, layers.py).
MASKS = {
    "padding": (SEGMENTS[:1].repeat(3, 0), SEGMENTS[:1].repeat(3, 0), False),  # encoder self-attention
    "causal": (SEGMENTS[:1].repeat(3, 0), SEGMENTS[:1].repeat(3, 0), True),  # decoder self-attention
    "packed": (SEGMENTS, SEGMENTS, False),  # packed encoder self-attention
    "packed_causal": (SEGMENTS, SEGMENTS, True),  # packed decoder self-attention
    "cross": (SEGMENTS, MEMORY_SEGMENTS, False),  # packed encoder-decoder attention (L ≠ S)
}


def close(actual, desired, atol=1e-5):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(desired), atol=atol, rtol=0)


def mha_pair(d_k: int, d_v: int) -> tuple[MultiHeadAttention, MultiHeadAttention]:
    """The same parameters (same seed) behind each implementation; biases non-zero so that they are checked."""
    pair = []
    for implementation in ("cpu", "xla"):
        mha = MultiHeadAttention(D, 4, d_k, d_v, use_bias=True, dropout_rate=0.0, dtype=jnp.float32,
                                 rngs=nnx.Rngs(0), implementation=implementation)
        for i, name in enumerate(("b_q", "b_k", "b_v", "b_o")):
            bias = getattr(mha, name)
            bias[...] = 0.5 * jax.random.normal(jax.random.key(10 + i), bias[...].shape)
        pair.append(mha)
    return pair[0], pair[1]


def value_and_grads(mha: MultiHeadAttention, x_q, x_kv, mask, causal, cotangent):
    """Σ out · cotangent over every position (padding queries included) and its gradients w.r.t. params, inputs."""
    graphdef, params = nnx.split(mha)

    def f(params, x_q, x_kv):
        out = nnx.merge(graphdef, params)(x_q, x_kv, mask, causal=causal)
        return (out * cotangent).sum(), out

    (_, out), grads = jax.value_and_grad(f, argnums=(0, 1, 2), has_aux=True)(params, x_q, x_kv)
    return out, grads


@pytest.mark.parametrize("d_k,d_v", [(8, 8), (4, 8), (8, 4)])
@pytest.mark.parametrize("kind", list(MASKS))
def test_fused_and_einsum_attention_agree_with_gradients(kind, d_k, d_v):
    q_segments, k_segments, causal = MASKS[kind]
    mask = padding_mask(q_segments, k_segments)
    x_q = jax.random.normal(jax.random.key(1), (3, q_segments.shape[1], D))
    x_kv = x_q if k_segments is q_segments else jax.random.normal(jax.random.key(2), (3, k_segments.shape[1], D))
    cotangent = jax.random.normal(jax.random.key(3), x_q.shape)
    cpu, xla = mha_pair(d_k, d_v)
    out_cpu, grads_cpu = value_and_grads(cpu, x_q, x_kv, mask, causal, cotangent)
    out_xla, grads_xla = value_and_grads(xla, x_q, x_kv, mask, causal, cotangent)
    close(out_xla, out_cpu)
    for g_xla, g_cpu in zip(jax.tree.leaves(grads_xla), jax.tree.leaves(grads_cpu), strict=True):
        close(g_xla, g_cpu)
    # Control: the data are sensitive to the mask (so a dropped mask fails above): attending everywhere differs.
    loose = cpu(x_q, x_kv, jnp.ones_like(mask))
    assert jnp.abs(loose - out_cpu).max() > 1e-2


def tiny_model(implementation: str, **overrides) -> Transformer:
    m = tiny.get_config().model
    m.update({"vocab_size": 50, "num_heads": 4, "d_k": 8, "d_v": 8, "num_encoder_layers": 2,
              "num_decoder_layers": 2, "max_len": 16, "attention_implementation": implementation, **overrides})
    return Transformer(m, rngs=nnx.Rngs(0))


SRC = jnp.array([[5, 6, 7, 8, 9, 0], [10, 11, 12, 0, 0, 0]], jnp.int32)
TGT = jnp.array([[13, 14, 15, 16, 17, 0], [18, 19, 20, 21, 22, 23]], jnp.int32)
PACKED = {  # two sentences per row, positions restarting at 0, trailing padding
    "inputs": jnp.array([[5, 6, 7, 8, 9, 10, 0, 0], [11, 12, 13, 14, 15, 16, 17, 18]], jnp.int32),
    "inputs_segmentation": jnp.array([[1, 1, 1, 2, 2, 2, 0, 0], [1, 1, 1, 1, 1, 2, 2, 2]], jnp.int32),
    "inputs_position": jnp.array([[0, 1, 2, 0, 1, 2, 0, 0], [0, 1, 2, 3, 4, 0, 1, 2]], jnp.int32),
    "targets": jnp.array([[19, 20, 21, 22, 23, 24, 25, 0], [26, 27, 28, 29, 30, 31, 32, 33]], jnp.int32),
    "targets_segmentation": jnp.array([[1, 1, 1, 1, 2, 2, 2, 0], [1, 1, 2, 2, 2, 2, 2, 2]], jnp.int32),
    "targets_position": jnp.array([[0, 1, 2, 3, 0, 1, 2, 0], [0, 1, 0, 1, 2, 3, 4, 5]], jnp.int32),
}


@pytest.mark.parametrize("norm_position", ["post", "pre"])
@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_model_logits_and_gradients_agree(packed, norm_position):
    """The whole model (encoder, causal decoder, cross-attention) under both implementations, eval and training
    (P_drop on; attention-weight dropout is off, as in the paper)."""
    batch = PACKED if packed else {"inputs": SRC, "targets": TGT}

    def loss(params, graphdef, key):
        logits = nnx.merge(graphdef, params)(**batch, dropout_key=key)
        weights = (batch["targets"] != 0).astype(jnp.float32)
        nll = -jnp.take_along_axis(jax.nn.log_softmax(logits), batch["targets"][..., None], -1)[..., 0]
        return (nll * weights).sum() / weights.sum(), logits

    results = []
    for implementation in ("cpu", "xla"):
        graphdef, params = nnx.split(tiny_model(implementation, norm_position=norm_position))
        eval_logits = nnx.merge(graphdef, params)(**batch)
        (value, logits), grads = jax.value_and_grad(loss, has_aux=True)(params, graphdef, jax.random.key(4))
        results.append((eval_logits, value, logits, grads))
    (eval_cpu, value_cpu, logits_cpu, grads_cpu), (eval_xla, value_xla, logits_xla, grads_xla) = results
    close(eval_xla, eval_cpu)
    close(logits_xla, logits_cpu)
    assert abs(float(value_xla) - float(value_cpu)) < 1e-5
    for (path, g_xla), g_cpu in zip(jax.tree_util.tree_flatten_with_path(grads_xla)[0], jax.tree.leaves(grads_cpu),
                                    strict=True):
        np.testing.assert_allclose(np.asarray(g_xla), np.asarray(g_cpu), atol=1e-5, rtol=0,
                                   err_msg=jax.tree_util.keystr(path))


def cached_logits(model: Transformer, beam_size: int = 1) -> np.ndarray:
    """Step-by-step logits with the KV cache, fed the reference targets (each hypothesis the same)."""
    state = model.prepare_memory(model.encode(SRC), SRC)
    batch, length = TGT.shape
    cache = model.init_cache(batch, length, beam_size)
    previous = jnp.full((batch * beam_size,), START_ID, jnp.int32)
    stepped = []
    for t in range(length):
        logits, cache = model.decode_step(previous, state, cache)
        stepped.append(logits.reshape(batch, beam_size, -1)[:, 0])
        previous = TGT[:, t].repeat(beam_size)
    return np.asarray(jnp.stack(stepped, axis=1))


def test_cached_decoding_agrees_across_implementations_and_with_teacher_forcing():
    """Decoding with the cache keeps the einsum path on every backend; its logits equal the teacher-forced logits
    of the fused path and the cached logits of the einsum model."""
    cpu, xla = tiny_model("cpu"), tiny_model("xla")
    real = np.asarray(TGT != 0)
    stepped_xla = cached_logits(xla, beam_size=2)
    close(stepped_xla[real], np.asarray(xla(SRC, TGT))[real])
    close(stepped_xla, cached_logits(cpu, beam_size=2))


def test_auto_resolves_when_traced(monkeypatch):
    """"auto": the einsum path on CPU; jax.nn.dot_product_attention elsewhere — cuDNN where it takes the operands
    (bfloat16, head size a multiple of 8 up to 128, even lengths with a mask), XLA's otherwise; the compute dtype
    follows. Decided by jax.default_backend() when the model is traced, not when the config is written."""
    q16 = jnp.zeros((2, 6, 4, 64), jnp.bfloat16)
    mask = jnp.ones((2, 1, 6, 6), bool)
    assert attention_implementation("auto", q16, q16, mask) == "cpu"
    assert compute_dtype("auto") == jnp.float32
    for forced in ("cpu", "xla", "cudnn"):
        assert attention_implementation(forced, q16, q16, mask) == forced
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert attention_implementation("auto", q16, q16, mask) == "cudnn"
    assert attention_implementation("auto", q16.astype(jnp.float32), q16, mask) == "xla"  # cuDNN: 16-bit only
    assert attention_implementation("auto", q16[:, :5], q16[:, :5], mask) == "xla"  # odd length with a bias
    assert attention_implementation("auto", q16[..., :60], q16[..., :60], mask) == "xla"  # head size 60
    assert compute_dtype("auto") == jnp.bfloat16
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert attention_implementation("auto", q16, q16, mask) == "xla"
    assert compute_dtype("auto") == jnp.bfloat16
    assert compute_dtype("float32") == jnp.float32  # an explicit dtype is kept

    # Trace time: a model built on "CPU" takes the fused path when traced on an accelerator backend.
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    model = tiny_model("auto", dtype="float32")
    calls = []
    fused = attention.fused_attention
    monkeypatch.setattr(attention, "fused_attention", lambda *a: calls.append(a[-1]) or fused(*a))
    eval_cpu = model(SRC, TGT)
    assert calls == []
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    close(model(SRC, TGT), eval_cpu)
    assert calls == ["xla"] * 6  # float32: XLA's implementation; 2 encoder + 2 × 2 decoder attentions
    calls.clear()
    cached_logits(model)  # cached decoding: the einsum path (encoder aside)
    assert calls == ["xla"] * 2


def test_bad_settings_fail_clearly():
    with pytest.raises(ValueError, match="attention_implementation"):
        tiny_model("flash")
    with pytest.raises(ValueError, match="model.dtype"):
        tiny_model("auto", dtype="bf16")
    with pytest.raises(ValueError, match="attention_dropout_rate"):
        tiny_model("xla", attention_dropout_rate=0.1)
    # "auto" drops attention weights on the einsum path (the only one that forms them), on every backend.
    model = tiny_model("auto", attention_dropout_rate=0.3)
    assert jnp.abs(model(SRC, TGT, dropout_key=jax.random.key(0)) - model(SRC, TGT)).max() > 1e-3
