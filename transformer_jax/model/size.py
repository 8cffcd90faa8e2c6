"""Model size and cost: parameter counts (Table 3's "params" column) and training FLOPs per target token.

FLOPs per target token (training = forward + backward ≈ 3 × forward, as in Kaplan et al., 2020), for one
source token per target token and sentences of ``seq_len`` tokens, counting multiply-adds as 2 FLOPs:

    forward = 2 · (P_enc + P_dec)                       # every projection and FFN matrix (biases ignored)
            + 2 · d_model · vocab                        # pre-softmax projection (§3.4)
            + N_enc · 2 · span_enc · h · (d_k + d_v)     # encoder self-attention scores and weighted sums
            + N_dec · 2 · span_dec · h · (d_k + d_v)     # decoder self-attention (counted unmasked)
            + N_dec · 2 · seq_len · h · (d_k + d_v)      # decoder cross-attention (always full)
    training = 3 · forward

The span is the number of keys a query attends to: seq_len with full attention (``model.attention_window`` 0,
the paper's models). Restricted self-attention with window r > 0 (§4, Table 1 row 4) has span_enc =
min(seq_len, 2r + 1) (|i - j| ≤ r) and span_dec = min(seq_len, r + 1) (i - r ≤ j ≤ i); cross-attention is
unchanged. These are the FLOPs the restriction makes necessary; the implementation masks a full [L, S] score
matrix, so it does not save them.

P_enc / P_dec count only the matrices of the layers (embeddings are lookups, not matmuls).
"""

import math

import jax
import ml_collections
from flax import nnx

from transformer_jax.model.transformer import Transformer


def abstract_model(m: ml_collections.ConfigDict) -> Transformer:
    """The model with shapes only (no memory allocated, no RNG drawn)."""
    return nnx.eval_shape(lambda: Transformer(m, rngs=nnx.Rngs(0)))


def count_parameters(m: ml_collections.ConfigDict) -> dict[str, int]:
    """Parameter counts: ``total``, ``embedding`` (token tables + learned positions) and ``nonembedding``.

    The shared embedding matrix (§3.4) is counted once.
    """
    state = nnx.state(abstract_model(m), nnx.Param)
    total = embedding = 0
    for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
        n = math.prod(leaf.shape)
        total += n
        if any(getattr(p, "key", None) in ("embedding", "source_embedding", "target_embedding", "output_projection",
                                           "source_positions", "target_positions") for p in path):
            embedding += n
    return {"total": total, "embedding": embedding, "nonembedding": total - embedding}


def _layer_matmul_params(m: ml_collections.ConfigDict) -> tuple[int, int]:
    attention = m.d_model * m.num_heads * (2 * m.d_k + 2 * m.d_v)  # W^Q, W^K, W^V, W^O
    ffn = 2 * m.d_model * m.d_ff
    return attention + ffn, 2 * attention + ffn  # encoder layer, decoder layer


def flops_per_target_token(m: ml_collections.ConfigDict, seq_len: int = 32) -> float:
    """Training FLOPs per target token (formula in the module docstring)."""
    enc_layer, dec_layer = _layer_matmul_params(m)
    window = int(m.get("attention_window", 0))
    enc_span = min(seq_len, 2 * window + 1) if window > 0 else seq_len
    dec_span = min(seq_len, window + 1) if window > 0 else seq_len

    def attn(span: int) -> int:
        return 2 * span * m.num_heads * (m.d_k + m.d_v)

    forward = (2 * (m.num_encoder_layers * enc_layer + m.num_decoder_layers * dec_layer)
               + 2 * m.d_model * m.vocab_size
               + m.num_encoder_layers * attn(enc_span) + m.num_decoder_layers * (attn(dec_span) + attn(seq_len)))
    return 3.0 * forward
