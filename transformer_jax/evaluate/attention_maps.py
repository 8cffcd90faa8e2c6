"""The attention weights of one sentence, as arrays and as figures (§3.2, the paper's Figures 3–5).

The weights come from the model's own attention code: `Transformer.attention_weights` runs one teacher-forced
forward pass (dropout off) in which every `MultiHeadAttention` records softmax(QKᵀ/√d_k) (§3.2.1) per head::

    att = sentence_attention(config, graphdef, params, tokenizer, "The man has seen the dog.")  # target: beam
    save_npz(att, "out/weights.npz")
    plot_grid(att, "cross", layers=[1, 2], heads=[1, 2, 3, 4], path="out/cross.png")        # Figure 5 style
    plot_lines(att, "encoder", layer=2, heads=[1, 2, 3, 4], path="out/lines.png")            # Figure 3 style

Three kinds of attention (§3.2.3): ``encoder`` self-attention (source × source), ``decoder`` masked
self-attention (target × target) and ``cross``, encoder-decoder attention (target × source). Arrays are float32
[layers, heads, queries, keys]; masked keys (the future, padding) hold exactly 0 and each query row sums to 1.
Decoder and cross-attention query t is the position that predicts target piece t; its input is target piece t-1
(START at t = 0), so those rows, and the decoder's key columns, are labelled with the decoder's input pieces
``<s>, t1, …`` (:attr:`SentenceAttention.query_pieces`). Layers and heads are numbered from 1 in the figures, as in
the paper ("layer 5 of 6"); the arrays are indexed from 0.
"""

import dataclasses
import functools
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx

from transformer_jax.data.tokenizer import EOS_ID, Tokenizer
from transformer_jax.decode.translate import make_decode_fn

KINDS = ("encoder", "decoder", "cross")
TITLES = {"encoder": "Encoder self-attention", "decoder": "Decoder masked self-attention",
          "cross": "Encoder-decoder attention"}
START_PIECE = "<s>"  # the label of the decoder's first input (START_ID, which is PAD)


@dataclasses.dataclass
class SentenceAttention:
    """One sentence pair's ids, pieces and every head's attention weights ({kind: float32 [L, H, Q, K]})."""

    source_ids: list[int]
    target_ids: list[int]
    source_pieces: list[str]
    target_pieces: list[str]
    weights: dict[str, np.ndarray]

    @property
    def query_pieces(self) -> list[str]:
        """The decoder's input pieces: ``<s>`` then the target shifted right (the labels of decoder positions)."""
        return [START_PIECE, *self.target_pieces[:-1]]

    def labels(self, kind: str) -> tuple[list[str], list[str]]:
        """(query labels, key labels) of ``kind``'s maps."""
        return {"encoder": (self.source_pieces, self.source_pieces),
                "decoder": (self.query_pieces, self.query_pieces),
                "cross": (self.query_pieces, self.source_pieces)}[kind]


def pieces(tokenizer: Tokenizer, ids: list[int]) -> list[str]:
    """The tokenizer's piece string of every id (``▁`` marks a word start; EOS is ``</s>``)."""
    return [tokenizer.id_to_piece(i) for i in ids]


def encode(tokenizer: Tokenizer, text: str) -> list[int]:
    """Source or target ids of ``text`` exactly as decoding builds them (`Translator.translate`): EOS appended."""
    return tokenizer.encode_batch([text])[0]


def decoded_target(config: ml_collections.ConfigDict, graphdef: nnx.GraphDef, params: dict,
                   source: list[int]) -> list[int]:
    """The run's own output ids for ``source`` (``config.decode``'s search: beam 4, α 0.6 by default, §6.1), up to
    and including EOS (without one when the search stopped at its maximum length)."""
    decode_fn = make_decode_fn(config, graphdef)
    ids = np.asarray(decode_fn(params, jnp.asarray([source], jnp.int32), jax.random.PRNGKey(config.seed)))
    ids = ids[0].tolist()
    return ids[:ids.index(EOS_ID) + 1] if EOS_ID in ids else [i for i in ids if i > 0]


def attention_weights(graphdef: nnx.GraphDef, params: dict, source: list[int],
                      target: list[int]) -> dict[str, np.ndarray]:
    """Every layer's and head's weights for one pair, from `Transformer.attention_weights` (teacher-forced, no
    dropout): {kind: float32 [layers, heads, queries, keys]}."""
    maps = _forward(graphdef, params, jnp.asarray([source], jnp.int32), jnp.asarray([target], jnp.int32))
    return {kind: np.stack([np.asarray(jax.device_get(w))[0] for w in maps[kind]]) for kind in KINDS}


@functools.partial(jax.jit, static_argnums=0)
def _forward(graphdef: nnx.GraphDef, params: dict, source: jax.Array, target: jax.Array) -> dict:
    """`Transformer.attention_weights` compiled once (run op by op, uncompiled, it is much slower)."""
    return nnx.merge(graphdef, params).attention_weights(source, target)


def sentence_attention(config: ml_collections.ConfigDict, graphdef: nnx.GraphDef, params: dict,
                       tokenizer: Tokenizer, sentence: str, target: str | None = None) -> SentenceAttention:
    """The weights for ``sentence`` translated as ``target`` (None: the run's own output, `decoded_target`)."""
    source_ids = encode(tokenizer, sentence)
    target_ids = (encode(tokenizer, target) if target is not None
                  else decoded_target(config, graphdef, params, source_ids))
    return SentenceAttention(source_ids, target_ids, pieces(tokenizer, source_ids), pieces(tokenizer, target_ids),
                             attention_weights(graphdef, params, source_ids, target_ids))


def save_npz(att: SentenceAttention, path: str) -> str:
    """Writes the weights (``encoder``, ``decoder``, ``cross``: float32 [L, H, Q, K]), the ids and the pieces
    (``source_pieces``, ``target_pieces``, ``query_pieces``: unicode arrays, no pickle needed) to ``path``."""
    np.savez_compressed(
        path, **att.weights, source_ids=np.asarray(att.source_ids, np.int32),
        target_ids=np.asarray(att.target_ids, np.int32), source_pieces=np.asarray(att.source_pieces, dtype=str),
        target_pieces=np.asarray(att.target_pieces, dtype=str), query_pieces=np.asarray(att.query_pieces, dtype=str))
    return path


# ------------------------------------------------------------------------------------------------------- figures

def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _font_size(inches_per_piece: float) -> float:
    """Tick labels as tall as about 3/4 of a cell, between 3.5 and 9 points: legible for 60-piece sentences."""
    return float(np.clip(0.75 * 72 * inches_per_piece, 3.5, 9.0))


def plot_grid(att: SentenceAttention, kind: str, layers: list[int], heads: list[int], path: str,
              title: str = "") -> str:
    """Heat maps of ``kind``'s weights, one panel per head (columns) and layer (rows), numbered from 1; queries on
    the y axis, keys on the x axis (pieces rotated 90°); colour: weight from 0 (white) to 1. Decoder and cross
    rows are labelled on the left with the decoder's input piece and on the right with the piece that query
    predicts. Writes ``path``."""
    plt = _pyplot()
    rows, cols = att.labels(kind)
    predicted = att.target_pieces if kind != "encoder" else None
    q, k = len(rows), len(cols)
    unit = min(0.3, max(0.14, 2.5 / max(q, k)), 36 / (len(heads) * k), 30 / (len(layers) * q))  # inches per piece
    fontsize = _font_size(unit)
    right = 0.8 + (0.15 + 0.6 * fontsize / 72 * max(map(len, predicted)) if predicted else 0.0)  # labels, colour bar
    width, height = len(heads) * k * unit * 1.06 + right, len(layers) * q * unit * 1.06 + 0.5  # inches
    fig, axes = plt.subplots(len(layers), len(heads), squeeze=False, figsize=(width, height), gridspec_kw=dict(
        left=0.0, right=1 - right / width, bottom=0.0, top=1 - 0.5 / height, wspace=0.06, hspace=0.06))
    for r, layer in enumerate(layers):
        for c, head in enumerate(heads):
            ax = axes[r, c]
            image = ax.imshow(att.weights[kind][layer - 1, head - 1], cmap="Blues", vmin=0.0, vmax=1.0,
                              interpolation="nearest")
            bottom, left = r == len(layers) - 1, c == 0  # pieces on the outer panels only
            ax.set_xticks(range(k) if bottom else [], cols if bottom else [], rotation=90, fontsize=fontsize)
            ax.set_yticks(range(q) if left else [], rows if left else [], fontsize=fontsize)
            ax.tick_params(length=0)
            if predicted and c == len(heads) - 1:
                outputs = ax.secondary_yaxis("right")
                outputs.set_yticks(range(q), predicted, fontsize=fontsize)
                outputs.tick_params(length=0)
                outputs.set_ylabel("predicts", fontsize=8)
            if r == 0:
                ax.set_title(f"head {head}", fontsize=9)
            if c == 0:
                ax.set_ylabel(f"layer {layer} of {att.weights[kind].shape[0]}" + (" (decoder input)" if predicted
                                                                                    else ""), fontsize=9)
    fig.colorbar(image, cax=fig.add_axes((1 - 0.6 / width, 0.1, 0.15 / width, 0.8 - 0.5 / height)), label="weight")
    fig.suptitle(title or f"{TITLES[kind]} (rows: queries, columns: keys)", fontsize=10, y=1 - 0.1 / height)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_lines(att: SentenceAttention, kind: str, layer: int, heads: list[int], path: str,
               title: str = "") -> str:
    """The paper's Figure 3 view of one layer: queries in the left column, keys in the right, a line from each
    query to each key with opacity ∝ weight, one colour per head (``heads``, numbered from 1). Writes ``path``."""
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Patch

    plt = _pyplot()
    left, right = att.labels(kind)
    n = max(len(left), len(right))
    step = 0.22  # inches per piece
    fig, ax = plt.subplots(figsize=(6.0, n * step + 1.6))
    y_left = -np.arange(len(left)) * (n - 1) / max(len(left) - 1, 1)  # both columns span the same height
    y_right = -np.arange(len(right)) * (n - 1) / max(len(right) - 1, 1)
    colours = plt.get_cmap("tab10" if max(heads) <= 10 else "tab20")
    weights = att.weights[kind][layer - 1]
    for head in heads:
        w = weights[head - 1]
        qs, ks = np.nonzero(w > 0.01)  # fainter lines are invisible: fewer segments to draw
        segments = np.stack([np.stack([np.zeros(len(qs)), y_left[qs]], -1),
                             np.stack([np.ones(len(qs)), y_right[ks]], -1)], 1)
        rgba = np.tile(np.asarray(colours(head - 1)), (len(qs), 1))
        rgba[:, 3] = np.clip(w[qs, ks], 0.0, 1.0)
        ax.add_collection(LineCollection(segments, colors=rgba, linewidths=1.5))
    for x, ys, labels, align in ((-0.03, y_left, left, "right"), (1.03, y_right, right, "left")):
        for y, label in zip(ys, labels):
            ax.text(x, y, label, ha=align, va="center", fontsize=8)
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylim(-(n - 1) - 0.7, 0.7)
    ax.axis("off")
    if len(heads) > 1:
        ax.legend(handles=[Patch(color=colours(h - 1), label=f"head {h}") for h in heads], loc="upper center",
                  bbox_to_anchor=(0.5, 0.0), ncol=min(len(heads), 8), fontsize=7, frameon=False)
    head_text = f"head {heads[0]}" if len(heads) == 1 else "all heads"
    ax.set_title(title or f"{TITLES[kind]}, layer {layer} of {att.weights[kind].shape[0]}, {head_text}\n"
                          "(left: queries, right: keys; opacity ∝ weight)", fontsize=9)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def write_all(att: SentenceAttention, out: str, layers: list[int], heads: list[int], lines_kind: str,
              lines_layer: int, lines_heads: list[int]) -> dict[str, str]:
    """Writes ``encoder.png``, ``decoder.png``, ``cross.png`` (grids of ``layers`` × ``heads``), ``lines.png``
    (``lines_kind`` at ``lines_layer``) and ``weights.npz`` into ``out``; returns {name: path}."""
    os.makedirs(out, exist_ok=True)
    files = {kind: plot_grid(att, kind, layers, heads, os.path.join(out, f"{kind}.png")) for kind in KINDS}
    files["lines"] = plot_lines(att, lines_kind, lines_layer, lines_heads, os.path.join(out, "lines.png"))
    files["weights"] = save_npz(att, os.path.join(out, "weights.npz"))
    return files
