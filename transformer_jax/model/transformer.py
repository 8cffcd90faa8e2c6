"""The Transformer (§3, Figure 1): encoder, decoder, and cached step-by-step decoding.

API (DESIGN.md "Contracts"):
  ``encode(inputs) → memory``; teacher-forced ``decode(targets, memory) → logits``;
  ``prepare_memory(memory, inputs) → state`` (cross-attention K/V computed once per sentence);
  ``init_cache(batch, max_len, beams) → cache``; ``decode_step(tokens, state, cache) → (logits, cache)``;
  ``reorder_cache(cache, parent) → cache``. The cache is an explicit pytree; beams share their sentence's rows
  and re-ranking moves only an ancestry table, never the keys and values.

Packed rows: ``*_segmentation`` (1, 2, … per sentence, 0 = padding) and ``*_position`` (restarting at 0 per
sentence) keep attention inside a sentence and restart positions; without them a row is one sentence and
padding is where the token id is 0. The decoder input is the target shifted right per sentence, starting
from id 0 (PAD doubles as the start symbol, as in tensor2tensor).
"""

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx

from transformer_jax.model.attention import BandMask, Mask, band_or_dense_mask, beam_cache_mask, padding_mask
from transformer_jax.model.dropout import dropout, fold, with_generator
from transformer_jax.model.embedding import Embedding, PositionalEncoding
from transformer_jax.model.layers import DecoderLayer, EncoderLayer, LayerNorm
from transformer_jax.model.precision import compute_dtype

START_ID = 0  # the decoder's first input (PAD): see the module docstring.


def _segments_and_positions(ids: jax.Array, segmentation: jax.Array | None,
                            position: jax.Array | None) -> tuple[jax.Array, jax.Array]:
    if segmentation is None:
        segmentation = (ids != 0).astype(jnp.int32)
    if position is None:
        position = jnp.broadcast_to(jnp.arange(ids.shape[1], dtype=jnp.int32), ids.shape)
    return segmentation, position


def self_attention_mask(segmentation: jax.Array, position: jax.Array, window: int) -> Mask | BandMask:
    """Self-attention mask of a stack, built once per forward: `padding_mask` (padding, packed sentences) and,
    with ``model.attention_window`` r > 0, `window_mask` (restricted self-attention: |i - j| ≤ r by position
    within the sentence) — as a `BandMask` on rows long enough for blocked attention to save work. The decoder
    layers add the causal mask (§3.2.3)."""
    if window > 0:
        return band_or_dense_mask(segmentation, position, window)
    return padding_mask(segmentation, segmentation)


def shift_right(targets: jax.Array, position: jax.Array) -> jax.Array:
    """Decoder inputs: target token t-1 at step t, and START_ID where a sentence begins (position 0)."""
    shifted = jnp.pad(targets, ((0, 0), (1, 0)))[:, :-1]
    return jnp.where(position == 0, START_ID, shifted)


class Transformer(nnx.Module):
    """Encoder-decoder Transformer (§3) built from ``config.model`` (configs/base.py documents every field)."""

    def __init__(self, m: ml_collections.ConfigDict, *, rngs: nnx.Rngs):
        dtype = compute_dtype(m.dtype)
        self.config = ml_collections.FrozenConfigDict(m)  # hashable: the GraphDef can be a static jit arg
        self.shared = m.share_embeddings
        if self.shared:  # §3.4: one matrix for source, target and pre-softmax projection.
            self.embedding = Embedding(m.vocab_size, m.d_model, scale=m.scale_embeddings, dtype=dtype, rngs=rngs)
        else:
            self.source_embedding = Embedding(m.vocab_size, m.d_model, scale=m.scale_embeddings, dtype=dtype,
                                              rngs=rngs)
            self.target_embedding = Embedding(m.vocab_size, m.d_model, scale=m.scale_embeddings, dtype=dtype,
                                              rngs=rngs)
            self.output_projection = Embedding(m.vocab_size, m.d_model, scale=False, dtype=dtype, rngs=rngs)
        self.source_positions = PositionalEncoding(m.positional, m.max_len, m.d_model, rngs=rngs)
        self.target_positions = PositionalEncoding(m.positional, m.max_len, m.d_model, rngs=rngs)
        self.encoder_layers = nnx.List([EncoderLayer(m, rngs=rngs) for _ in range(m.num_encoder_layers)])
        self.decoder_layers = nnx.List([DecoderLayer(m, rngs=rngs) for _ in range(m.num_decoder_layers)])
        self.pre_ln = m.norm_position == "pre"
        if self.pre_ln:  # pre-LN needs a final normalization of each stack's output.
            self.encoder_norm = LayerNorm(m.d_model, m.layer_norm_epsilon, dtype)
            self.decoder_norm = LayerNorm(m.d_model, m.layer_norm_epsilon, dtype)
        self.dropout_rate = m.dropout_rate
        # where the dropout masks' bits come from (model/dropout.py); folders written before the field: threefry
        self.dropout_rng = str(m.get("dropout_rng", "threefry"))
        with_generator(None, self.dropout_rng)  # rejects an unknown generator here, not at the first training step
        # (run folders written before the field existed have no attention_window: 0 = full, base.py's default)
        self.attention_window = int(m.get("attention_window", 0))
        if self.attention_window < 0:
            raise ValueError(f"model.attention_window must be ≥ 0 (0 = full attention), got {self.attention_window}.")

    def embeddings(self) -> tuple[Embedding, Embedding, Embedding]:
        """(source embedding, target embedding, pre-softmax projection): one module three times when shared."""
        if self.shared:
            return self.embedding, self.embedding, self.embedding
        return self.source_embedding, self.target_embedding, self.output_projection

    def encode(self, inputs: jax.Array, inputs_segmentation: jax.Array | None = None,
               inputs_position: jax.Array | None = None, dropout_key: jax.Array | None = None) -> jax.Array:
        """Encoder stack (§3.1): int [B, S] → memory [B, S, D]. ``dropout_key=None`` means no dropout."""
        dropout_key = with_generator(dropout_key, self.dropout_rng)
        segmentation, position = _segments_and_positions(inputs, inputs_segmentation, inputs_position)
        x = self.source_positions(self.embeddings()[0](inputs), position)
        x = dropout(x, self.dropout_rate, fold(dropout_key, 0))  # §5.4: dropout on embedding + PE sums.
        mask = self_attention_mask(segmentation, position, self.attention_window)
        for i, layer in enumerate(self.encoder_layers):
            x = layer(x, mask, fold(dropout_key, i + 1))
        return self.encoder_norm(x) if self.pre_ln else x

    def decode_hidden(self, targets: jax.Array, memory: jax.Array, inputs: jax.Array,
                      inputs_segmentation: jax.Array | None = None, targets_segmentation: jax.Array | None = None,
                      targets_position: jax.Array | None = None, dropout_key: jax.Array | None = None) -> jax.Array:
        """Teacher-forced decoder stack (§3.1) up to the pre-softmax projection: [B, T, D]."""
        dropout_key = with_generator(dropout_key, self.dropout_rng)
        src_segmentation, _ = _segments_and_positions(inputs, inputs_segmentation, None)
        segmentation, position = _segments_and_positions(targets, targets_segmentation, targets_position)
        y = self.target_positions(self.embeddings()[1](shift_right(targets, position)), position)
        y = dropout(y, self.dropout_rate, fold(dropout_key, 0))
        self_mask = self_attention_mask(segmentation, position, self.attention_window)  # layers add causal
        cross_mask = padding_mask(segmentation, src_segmentation)
        for i, layer in enumerate(self.decoder_layers):
            y = layer(y, memory, self_mask, cross_mask, fold(dropout_key, i + 1))
        return self.decoder_norm(y) if self.pre_ln else y

    def output_table(self) -> jax.Array:
        """The pre-softmax projection's [vocab, D] matrix (§3.4: the shared embedding unless untied)."""
        return self.embeddings()[2].table[...]

    def decode(self, targets: jax.Array, memory: jax.Array, inputs: jax.Array,
               inputs_segmentation: jax.Array | None = None, targets_segmentation: jax.Array | None = None,
               targets_position: jax.Array | None = None, dropout_key: jax.Array | None = None) -> jax.Array:
        """Teacher-forced decoder (§3.1): targets int [B, T] → float32 logits [B, T, vocab]."""
        return self.embeddings()[2].logits(self.decode_hidden(
            targets, memory, inputs, inputs_segmentation, targets_segmentation, targets_position, dropout_key))

    def __call__(self, inputs: jax.Array, targets: jax.Array, inputs_segmentation: jax.Array | None = None,
                 targets_segmentation: jax.Array | None = None, inputs_position: jax.Array | None = None,
                 targets_position: jax.Array | None = None, dropout_key: jax.Array | None = None) -> jax.Array:
        """Full forward pass for training: float32 logits [B, T, vocab]."""
        memory = self.encode(inputs, inputs_segmentation, inputs_position, fold(dropout_key, 0))
        return self.decode(targets, memory, inputs, inputs_segmentation, targets_segmentation, targets_position,
                           fold(dropout_key, 1))

    def attention_weights(self, inputs: jax.Array, targets: jax.Array) -> dict[str, list[jax.Array]]:
        """Every head's attention weights for given sentences, teacher-forced, dropout off (Figures 3–5).

        They come from the model's own attention code: each `MultiHeadAttention` records the softmax weights of
        its forward call (``capture_weights``). Masked positions (padding, the future, other packed sentences,
        outside an ``attention_window``) are exactly 0 and every live query row sums to 1.

        Args:
          inputs: int [B, S] source ids; targets: int [B, T] target ids (EOS included), as in `__call__`.
        Returns:
          {"encoder": per encoder layer [B, H, S, S], "decoder": per decoder layer, masked self-attention
          [B, H, T, T], "cross": per decoder layer, encoder-decoder attention [B, H, T, S]}; float32. Row t of
          the decoder's maps is the query that predicts target t (its input is target t-1, START at t = 0).
        """
        stacks = {"encoder": ("encoder_layers", "self_attention"), "decoder": ("decoder_layers", "self_attention"),
                  "cross": ("decoder_layers", "cross_attention")}
        modules = [getattr(layer, name) for layers, name in stacks.values() for layer in getattr(self, layers)]
        for module in modules:
            module.capture_weights = True
        try:
            _, sown = nnx.capture(self, nnx.Intermediate)(inputs, targets)
        finally:
            for module in modules:
                del module.capture_weights  # back to the class default (False)
        return {kind: [sown[layers][i][name]["attention_weights"].get_value()[0]
                       for i in range(len(getattr(self, layers)))] for kind, (layers, name) in stacks.items()}

    # --- cached decoding (§6.1 beam search drives these) ---

    def prepare_memory(self, memory: jax.Array, inputs: jax.Array) -> dict:
        """Per-sentence constants for decoding: every layer's cross-attention K/V (computed once) and the mask.

        They are shared by the sentence's beams (never tiled to B·K): the K hypotheses are K queries. Keys are
        stored transposed ([B, H, d_k, S]), the layout XLA's CPU dot reads fastest for a few queries.
        """
        cross_kv = [layer.cross_attention.cached_key_value(memory) for layer in self.decoder_layers]
        return {"cross_kv": cross_kv, "mask": padding_mask(jnp.ones((inputs.shape[0], 1), jnp.int32),
                                                           (inputs != 0).astype(jnp.int32))}

    def init_cache(self, batch_size: int, max_len: int, beam_size: int = 1) -> dict:
        """Empty self-attention K/V for ``beam_size`` hypotheses of ``max_len`` steps per sentence.

        ``kv``: per layer (K [B, H, d_k, T·beam] (transposed), V [B, H, T·beam, d_v]), slot j's position τ at
        row (column for K) τ·beam + j;
        ``slots``: int32 [B, beam, T], each hypothesis's ancestry (see `reorder_cache`); ``index``: the step.
        """
        m = self.config
        dtype = compute_dtype(m.dtype)
        rows = max_len * beam_size
        kv = [(jnp.zeros((batch_size, m.num_heads, m.d_k, rows), dtype),
               jnp.zeros((batch_size, m.num_heads, rows, m.d_v), dtype)) for _ in range(m.num_decoder_layers)]
        return {"kv": kv, "slots": jnp.zeros((batch_size, beam_size, max_len), jnp.int32),
                "index": jnp.zeros((), jnp.int32)}

    @staticmethod
    def reorder_cache(cache: dict, parent: jax.Array) -> dict:
        """Beam search re-ranked the hypotheses: hypothesis j now continues ``parent[b, j]`` (int32 [B, K]).

        Only the ancestry table moves ([B, K, T] integers); the keys and values stay where they were written,
        so no step copies the cache (gathering it by beam would move every layer's K/V at every step).
        """
        slots = jnp.take_along_axis(cache["slots"], parent[:, :, None], axis=1)
        return {**cache, "slots": slots}

    def decode_step(self, tokens: jax.Array, memory: dict, cache: dict) -> tuple[jax.Array, dict]:
        """One decoder step: tokens int [B·K] (the previous outputs, START_ID first; K = the cache's beams,
        sentence b's hypotheses at rows b·K … b·K + K - 1) → float32 logits [B·K, vocab]."""
        index = cache["index"]
        batch, beams, _ = cache["slots"].shape
        slots = cache["slots"].at[:, :, index].set(jnp.arange(beams, dtype=jnp.int32))  # each writes its own slot
        tokens = tokens.reshape(batch, beams)
        y = self.target_positions(self.embeddings()[1](tokens), jnp.broadcast_to(index, tokens.shape))
        self_mask = beam_cache_mask(slots, index, self.attention_window)  # the same for every layer
        new_kv = []
        for layer, cross_kv, kv in zip(self.decoder_layers, memory["cross_kv"], cache["kv"]):
            y, layer_kv = layer.step(y, cross_kv, memory["mask"], kv, self_mask, index)
            new_kv.append(layer_kv)
        logits = self.embeddings()[2].logits(self.decoder_norm(y) if self.pre_ln else y)  # [B, K, vocab]
        return logits.reshape(batch * beams, -1), {"kv": new_kv, "slots": slots, "index": index + 1}
