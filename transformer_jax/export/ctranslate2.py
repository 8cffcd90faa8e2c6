"""A trained Transformer as a CTranslate2 model: parameters → ``ctranslate2.specs.TransformerSpec`` (§3).

CTranslate2 (the C++ engine fairseq, OpenNMT and Marian users export to) builds a model from a specification and
quantizes it at save time; this module fills that specification from our parameters, as its own converters
(``ctranslate2/converters/marian.py``, ``fairseq.py``) do from theirs. The mapping, by section of the paper:

* §3.1 encoder and decoder stacks of N layers; each sublayer wrapped as LayerNorm(x + Sublayer(x)) (post-LN,
  ``pre_norm=False``) or, with ``model.norm_position = "pre"``, x + Sublayer(LayerNorm(x)) with a final
  LayerNorm per stack (``pre_norm=True``: CTranslate2's pre-norm layer is the same function). Our
  ``<sublayer>_residual.norm`` is CTranslate2's ``<sublayer>.layer_norm``; ε is ``model.layer_norm_epsilon``.
* §3.2.2 multi-head attention: W^Q, W^K, W^V ([d_model, h, d_k]) become [h·d_k, d_model] matrices (CTranslate2
  stores linear weights output-major and splits the h·d_k outputs into h contiguous heads, as we do); the
  self-attention's three are fused into one, the encoder-decoder attention's W^K and W^V into one; W^O
  ([h, d_v, d_model]) becomes [d_model, h·d_v]. CTranslate2 scales queries by 1/√(head size) (§3.2.1) and has one
  head size for queries, keys and values: d_k = d_v is required, d_k ≠ d_model/h is passed as ``head_dim``.
* §3.3 the feed-forward network max(0, xW₁ + b₁)W₂ + b₂ (ReLU), W₁ and W₂ transposed.
* §3.4 embeddings multiplied by √d_model (``scale_embeddings``); one matrix for the source and target embeddings
  and the pre-softmax projection (CTranslate2 stores it once, as aliases) or three with ``share_embeddings=False``;
  no bias on the projection.
* §3.5 positions: our own table (sinusoidal with sines and cosines interleaved as the paper writes them, or the
  learned one of Table 3 row E; zeros for ``positional = "none"``), so nothing depends on CTranslate2's layout.
* §5.1 the shared SentencePiece vocabulary: its pieces, in id order, are both vocabularies; the decoder starts
  from PAD (id 0, our start symbol) and every source sentence ends with EOS (``add_source_eos``).

What CTranslate2 cannot express is refused with :class:`NotExpressible`, one line saying why: d_k ≠ d_v (Table 3
rows B) and restricted self-attention (``model.attention_window`` > 0, §4). ctranslate2 is an optional extra:
:func:`require` says how to install it.
"""

import os
import shutil
import tempfile
from collections.abc import Mapping

import jax
import ml_collections
import numpy as np

from transformer_jax.data.tokenizer import EOS_ID, PAD_ID, UNK_ID, Tokenizer
from transformer_jax.export import QUANTIZATIONS
from transformer_jax.model.embedding import sinusoidal_table

INSTALL = 'pip install -e ".[ctranslate2]"'


class NotExpressible(ValueError):
    """A model configuration CTranslate2's Transformer cannot compute (the message says which field and why)."""


def require():
    """The ``ctranslate2`` module; raises ImportError (one line naming the extra to install) when it is missing."""
    try:
        import ctranslate2
    except ImportError:
        raise ImportError(f"CTranslate2 is not installed; install the optional extra: {INSTALL}") from None
    return ctranslate2


def check_expressible(m: ml_collections.ConfigDict) -> None:
    """Raises :class:`NotExpressible` unless CTranslate2's Transformer computes the model ``m`` (config.model)."""
    if int(m.d_k) != int(m.d_v):
        raise NotExpressible(f"d_k = {m.d_k} ≠ d_v = {m.d_v} (Table 3 rows B): CTranslate2's attention has one head "
                             "size for queries, keys and values.")
    if int(m.get("attention_window", 0)) > 0:
        raise NotExpressible(f"model.attention_window = {m.attention_window} (restricted self-attention, §4): "
                             "CTranslate2's encoder attends to every position.")
    if m.norm_position not in ("post", "pre"):
        raise NotExpressible(f"model.norm_position = {m.norm_position!r}: only 'post' and 'pre' have a mapping.")


def flat_params(params) -> dict[str, np.ndarray]:
    """``{"encoder_layers/0/self_attention/w_q": float32 array, ...}`` of a parameter tree, copied to the host
    (CTranslate2 quantizes the arrays it is given in place)."""
    def name(path) -> str:
        return "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)
    return {name(path): np.array(jax.device_get(x), np.float32)
            for path, x in jax.tree_util.tree_flatten_with_path(params)[0]}


def _matrix(w: np.ndarray, inputs: int) -> np.ndarray:
    """Our [*in, *out] weight (the first ``inputs`` axes are inputs) as CTranslate2's [out, in] matrix."""
    rows = int(np.prod(w.shape[:inputs]))
    return np.ascontiguousarray(w.reshape(rows, -1).T)


def _set_linear(spec, p: Mapping[str, np.ndarray], weight: str, bias: str, inputs: int = 1) -> None:
    spec.weight = _matrix(p[weight], inputs)
    if bias in p:
        spec.bias = p[bias].reshape(-1)


def _set_fused(spec, p: Mapping[str, np.ndarray], names: str) -> None:
    """One CTranslate2 linear computing several of W^Q, W^K, W^V at once (their outputs concatenated)."""
    spec.weight = np.concatenate([_matrix(p[f"w_{n}"], 1) for n in names])
    if f"b_{names[0]}" in p:
        spec.bias = np.concatenate([p[f"b_{n}"].reshape(-1) for n in names])


def _set_layer_norm(spec, p: Mapping[str, np.ndarray], scope: str) -> None:
    spec.gamma, spec.beta = p[f"{scope}/scale"], p[f"{scope}/bias"]


def _scope(p: Mapping[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The parameters under ``prefix/``, named relative to it."""
    return {k[len(prefix) + 1:]: v for k, v in p.items() if k.startswith(prefix + "/")}


def _set_attention(spec, p: Mapping[str, np.ndarray], self_attention: bool) -> None:
    """§3.2.2: W^Q, W^K, W^V (fused as CTranslate2 computes them) and W^O."""
    if self_attention:
        _set_fused(spec.linear[0], p, "qkv")
    else:
        _set_linear(spec.linear[0], p, "w_q", "b_q")
        _set_fused(spec.linear[1], p, "kv")
    _set_linear(spec.linear[-1], p, "w_o", "b_o", inputs=2)


def _set_ffn(spec, p: Mapping[str, np.ndarray]) -> None:
    """§3.3: FFN(x) = max(0, xW₁ + b₁)W₂ + b₂."""
    _set_linear(spec.linear_0, p, "w_1", "b_1")
    _set_linear(spec.linear_1, p, "w_2", "b_2")


def _set_layer(spec, p: Mapping[str, np.ndarray], decoder: bool) -> None:
    """One §3.1 layer; each sublayer's LayerNorm (before it with pre-LN, after the residual sum with post-LN)."""
    _set_attention(spec.self_attention, _scope(p, "self_attention"), self_attention=True)
    _set_layer_norm(spec.self_attention.layer_norm, p, "self_attention_residual/norm")
    if decoder:
        _set_attention(spec.attention, _scope(p, "cross_attention"), self_attention=False)
        _set_layer_norm(spec.attention.layer_norm, p, "cross_attention_residual/norm")
    _set_ffn(spec.ffn, _scope(p, "ffn"))
    _set_layer_norm(spec.ffn.layer_norm, p, "ffn_residual/norm")


def position_table(m: ml_collections.ConfigDict, p: Mapping[str, np.ndarray], side: str) -> np.ndarray:
    """§3.5: the [max_len, d_model] table added to the ``side`` ("source" or "target") embeddings."""
    if m.positional == "learned":
        return p[f"{side}_positions/table"]
    if m.positional == "sinusoidal":
        return sinusoidal_table(int(m.max_len), int(m.d_model)).copy()  # (a cached array: never handed out)
    return np.zeros((int(m.max_len), int(m.d_model)), np.float32)  # "none": no position signal


def embedding_tables(m: ml_collections.ConfigDict, p: Mapping[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """§3.4: (source embedding, target embedding, pre-softmax projection), one matrix three times when shared."""
    if m.share_embeddings:
        return (p["embedding/table"],) * 3
    return p["source_embedding/table"], p["target_embedding/table"], p["output_projection/table"]


def _set_stack(spec, m: ml_collections.ConfigDict, p: Mapping[str, np.ndarray], side: str) -> None:
    """Embeddings, positions, the layers and (pre-LN) the final LayerNorm of the encoder or the decoder."""
    decoder = side == "target"
    source, target, projection = embedding_tables(m, p)
    embeddings = spec.embeddings if decoder else spec.embeddings[0]
    embeddings.weight = target if decoder else source
    spec.scale_embeddings = bool(m.scale_embeddings)  # × √d_model (§3.4)
    spec.position_encodings.encodings = position_table(m, p, side)
    stack = "decoder" if decoder else "encoder"
    for i, layer in enumerate(spec.layer):
        _set_layer(layer, _scope(p, f"{stack}_layers/{i}"), decoder)
    if m.norm_position == "pre":
        _set_layer_norm(spec.layer_norm, p, f"{stack}_norm")
    if decoder:
        spec.start_from_zero_embedding = False  # the first input is PAD's embedding, as in training
        spec.projection.weight = projection  # logits = x Eᵀ, no bias


def _empty_spec(m: ml_collections.ConfigDict):
    """The TransformerSpec of ``m``'s shape (ReLU, no relative positions), before any weight is set."""
    specs = require().specs
    pre_norm = m.norm_position == "pre"
    head_dim = None if int(m.d_k) * int(m.num_heads) == int(m.d_model) else int(m.d_k)
    if head_dim is None:
        return specs.TransformerSpec.from_config((int(m.num_encoder_layers), int(m.num_decoder_layers)),
                                                 int(m.num_heads), pre_norm=pre_norm)
    encoder = specs.TransformerEncoderSpec(int(m.num_encoder_layers), int(m.num_heads), pre_norm=pre_norm,
                                           head_dim=head_dim)
    decoder = specs.TransformerDecoderSpec(int(m.num_decoder_layers), int(m.num_heads), pre_norm=pre_norm,
                                           head_dim=head_dim)
    return specs.TransformerSpec(encoder, decoder)


def vocabulary(tokenizer: Tokenizer) -> list[str]:
    """§5.1: the shared SentencePiece vocabulary's pieces in id order, the CTranslate2 model's tokens."""
    return [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]


def transformer_spec(config: ml_collections.ConfigDict, params, pieces: list[str]):
    """The ``ctranslate2.specs.TransformerSpec`` of a model: ``config.model``, its parameters, its vocabulary
    (``pieces``: the token of each id, :func:`vocabulary`).

    Raises:
        NotExpressible: a configuration CTranslate2 cannot compute (:func:`check_expressible`).
        ImportError: ctranslate2 is not installed.
    """
    m = config.model
    check_expressible(m)
    spec = _empty_spec(m)
    p = flat_params(params)
    _set_stack(spec.encoder, m, p, "source")
    _set_stack(spec.decoder, m, p, "target")
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    c = spec.config
    c.unk_token, c.eos_token = pieces[UNK_ID], pieces[EOS_ID]
    c.bos_token = c.decoder_start_token = pieces[PAD_ID]  # PAD starts the decoder (tensor2tensor); no BOS
    c.add_source_bos, c.add_source_eos = False, True  # our sources end with EOS
    c.layer_norm_epsilon = float(m.layer_norm_epsilon)
    return spec


def save(spec, out: str, quantization: str = "none") -> None:
    """Validates ``spec``, stores its weights as ``quantization`` and writes the model folder ``out`` (replaced
    whole: written beside it first, so a failure leaves the old one)."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"Unknown quantization {quantization!r}; valid: {', '.join(QUANTIZATIONS)}.")
    spec.validate()
    spec.optimize(quantization=None if quantization == "none" else quantization)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.", dir=parent)
    try:
        spec.save(tmp)
        if os.path.exists(out):
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
