"""A plain-numpy Transformer forward pass written from the paper (§3), for tests/test_reference_forward.py and
tests/test_dropout_sites.py. It calls nothing of transformer_jax: only the parameter names and shapes are shared
(``nnx.to_pure_dict(nnx.state(model, nnx.Param))``), and two conventions of the model that the paper leaves open:

* the decoder input is the target shifted right with id 0 (PAD) as the start symbol, per sentence;
* a query that may attend to nothing (a padding position) gets attention weights of exactly 0.

Everything is float64. The knobs ``embed_scale``, ``pe_base``, ``key_scale``, ``residual`` and ``causal_offset``
exist to show that the comparison notices when one paper ingredient changes (the paper's values are defaults).
"""

import numpy as np


def sinusoids(length: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """§3.5: PE(pos, 2i) = sin(pos / base^(2i/d_model)), PE(pos, 2i+1) = cos(pos / base^(2i/d_model))."""
    pe = np.zeros((length, d_model))
    for pos in range(length):
        for i in range(0, d_model, 2):
            angle = pos / base ** (i / d_model)  # i is "2i" of the paper
            pe[pos, i] = np.sin(angle)
            if i + 1 < d_model:
                pe[pos, i + 1] = np.cos(angle)
    return pe


def layer_norm(x: np.ndarray, p: dict, epsilon: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * p["scale"] + p["bias"]


def softmax_masked(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Softmax over the last axis with -inf at illegal connections (§3.2.3); fully masked rows give zeros."""
    logits = np.where(mask, logits, -np.inf)
    top = logits.max(-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(mask, np.exp(logits - top), 0.0)
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def multi_head_attention(p: dict, x_q: np.ndarray, x_kv: np.ndarray, mask: np.ndarray,
                         key_scale: str = "sqrt_dk") -> np.ndarray:
    """§3.2.2: Concat(head_1..head_h) W^O with head_i = softmax(Q_i K_iᵀ / √d_k) V_i.

    x_q [B, L, D], x_kv [B, S, D], mask bool [B, L, S]. W^Q, W^K: [D, h, d_k]; W^V: [D, h, d_v]; W^O: [h, d_v, D].
    """
    q = np.einsum("bld,dhk->bhlk", x_q, p["w_q"]) + p["b_q"][None, :, None, :]
    k = np.einsum("bsd,dhk->bhsk", x_kv, p["w_k"]) + p["b_k"][None, :, None, :]
    v = np.einsum("bsd,dhv->bhsv", x_kv, p["w_v"]) + p["b_v"][None, :, None, :]
    d_k = q.shape[-1]
    scale = {"sqrt_dk": 1 / np.sqrt(d_k), "dk": 1 / d_k, "none": 1.0}[key_scale]
    weights = softmax_masked(np.einsum("bhlk,bhsk->bhls", q, k) * scale, mask[:, None])
    heads = np.einsum("bhls,bhsv->bhlv", weights, v)
    return np.einsum("bhlv,hvd->bld", heads, p["w_o"]) + p["b_o"]


def feed_forward(p: dict, x: np.ndarray) -> np.ndarray:
    """§3.3: FFN(x) = max(0, x W1 + b1) W2 + b2."""
    return np.maximum(0.0, x @ p["w_1"] + p["b_1"]) @ p["w_2"] + p["b_2"]


def _mask(q_segments: np.ndarray, k_segments: np.ndarray) -> np.ndarray:
    """[B, L, S]: a query sees keys of its own sentence, never padding (segment 0)."""
    return (q_segments[:, :, None] == k_segments[:, None, :]) & (k_segments[:, None, :] != 0)


def forward(params: dict, m, inputs: np.ndarray, targets: np.ndarray, inputs_segmentation=None,
            targets_segmentation=None, inputs_position=None, targets_position=None, *, embed_scale: bool = True,
            pe_base: float = 10000.0, key_scale: str = "sqrt_dk", residual: bool = True, causal_offset: int = 0
            ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Teacher-forced logits [B, T, vocab] and the tensors §5.4 drops out, by name.

    ``params``: the model's pure dict of parameters; ``m``: its model config (norm_position, positional,
    share_embeddings, layer_norm_epsilon, d_model). The second result maps "encoder_embeddings",
    "decoder_embeddings" (embeddings × √d_model + PE) and "encoder_{i}_self_attention", "encoder_{i}_ffn",
    "decoder_{i}_self_attention", "decoder_{i}_cross_attention", "decoder_{i}_ffn" (sublayer outputs, before the
    residual add) to their values, in the order the forward pass computes them.
    """
    p = _as_numpy(params)
    inputs, targets = np.asarray(inputs), np.asarray(targets)
    d_model, eps = m.d_model, m.layer_norm_epsilon
    pre = m.norm_position == "pre"
    if m.share_embeddings:
        src_table = tgt_table = out_table = p["embedding"]["table"]
    else:
        src_table, tgt_table = p["source_embedding"]["table"], p["target_embedding"]["table"]
        out_table = p["output_projection"]["table"]
    src_seg = (inputs != 0).astype(int) if inputs_segmentation is None else np.asarray(inputs_segmentation)
    tgt_seg = (targets != 0).astype(int) if targets_segmentation is None else np.asarray(targets_segmentation)
    src_pos = np.broadcast_to(np.arange(inputs.shape[1]), inputs.shape) if inputs_position is None \
        else np.asarray(inputs_position)
    tgt_pos = np.broadcast_to(np.arange(targets.shape[1]), targets.shape) if targets_position is None \
        else np.asarray(targets_position)

    def positions(side: str, pos: np.ndarray) -> np.ndarray:
        if m.positional == "learned":
            return p[f"{side}_positions"]["table"][pos]
        if m.positional == "none":
            return 0.0
        return sinusoids(int(pos.max()) + 1, d_model, pe_base)[pos]

    scale = np.sqrt(d_model) if embed_scale else 1.0  # §3.4
    sites: dict[str, np.ndarray] = {}

    def sublayer(layer: dict, site: str, name: str, x: np.ndarray, fn) -> np.ndarray:
        """§3.1 LayerNorm(x + Sublayer(x)) (post-LN, the paper) or x + Sublayer(LayerNorm(x)) (pre-LN)."""
        norm = layer[f"{name}_residual"]["norm"]
        out = fn(layer[name], layer_norm(x, norm, eps) if pre else x)
        sites[f"{site}_{name}"] = out
        if pre:
            return x + out
        return layer_norm(x + out if residual else out, norm, eps)

    # Encoder (§3.1).
    x = src_table[inputs] * scale + positions("source", src_pos)
    sites["encoder_embeddings"] = x
    self_mask = _mask(src_seg, src_seg)
    for i in range(m.num_encoder_layers):
        layer, site = p["encoder_layers"][i], f"encoder_{i}"
        x = sublayer(layer, site, "self_attention", x,
                     lambda q, y: multi_head_attention(q, y, y, self_mask, key_scale))
        x = sublayer(layer, site, "ffn", x, feed_forward)
    memory = layer_norm(x, p["encoder_norm"], eps) if pre else x

    # Decoder (§3.1): inputs are the targets shifted right (0 = start) within each sentence.
    shifted = np.pad(targets, ((0, 0), (1, 0)))[:, :-1]
    decoder_inputs = np.where(tgt_pos == 0, 0, shifted)
    y = tgt_table[decoder_inputs] * scale + positions("target", tgt_pos)
    sites["decoder_embeddings"] = y
    length = targets.shape[1]
    causal = np.tril(np.ones((length, length), bool), k=causal_offset)[None]  # §3.2.3: position i sees ≤ i
    dec_mask = _mask(tgt_seg, tgt_seg) & causal
    cross_mask = _mask(tgt_seg, src_seg)
    for i in range(m.num_decoder_layers):
        layer, site = p["decoder_layers"][i], f"decoder_{i}"
        y = sublayer(layer, site, "self_attention", y,
                     lambda q, z: multi_head_attention(q, z, z, dec_mask, key_scale))
        y = sublayer(layer, site, "cross_attention", y,
                     lambda q, z: multi_head_attention(q, z, memory, cross_mask, key_scale))
        y = sublayer(layer, site, "ffn", y, feed_forward)
    if pre:
        y = layer_norm(y, p["decoder_norm"], eps)
    return y @ out_table.T, sites  # §3.4: the pre-softmax projection x Eᵀ


def _as_numpy(tree):
    if isinstance(tree, dict):
        return {k: _as_numpy(v) for k, v in tree.items()}
    return np.asarray(tree, np.float64)
