"""Batched translation with a trained model (§6.1): encode once, then beam search / greedy / sampling.

Cross-attention K/V are computed once per sentence (``Transformer.prepare_memory``) and shared by its beams;
the self-attention cache is written in place, and re-ranking beams moves only its ancestry table. Every decoding
setting comes from ``config.decode``; one jitted function is compiled per (batch, source length) shape, and
evaluation batches come in a handful of lengths (powers of two). A parsing run with ``config.decode.tree_constraint``
decodes under `transformer_jax.parsing.constraint` (beyond the paper): every output is a tree over the input's words.
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx
from tqdm import tqdm

from transformer_jax import sharding
from transformer_jax.data.batching import eval_batches
from transformer_jax.data.sources import get_source
from transformer_jax.data.tokenizer import EOS_ID, PAD_ID, Tokenizer
from transformer_jax.decode.beam_search import Constraint, beam_search, greedy_search, sample
from transformer_jax.model.transformer import START_ID
from transformer_jax.parsing.constraint import TreeConstraint


def tree_constraint(config: ml_collections.ConfigDict, tokenizer: Tokenizer) -> TreeConstraint | None:
    """The well-formed-tree constraint of a parsing run with ``config.decode.tree_constraint``, else None.

    An output may use the constituent labels (and, with ``config.data.pos_tags``, the POS tags) of the run's
    treebank (its source's ``tree_symbols``: those of the training trees, or the synthetic grammar's own), spelled as
    its tokenizer spells them.
    """
    if config.get("task", "translation") != "parsing" or not config.decode.get("tree_constraint", False):
        return None
    labels, leaves = get_source(config.data).tree_symbols()
    return TreeConstraint(tokenizer, labels, leaves, eos_id=EOS_ID, pad_id=PAD_ID)


def make_decode_fn(config: ml_collections.ConfigDict, graphdef: nnx.GraphDef, *, forced_length: int | None = None,
                   cache_length: int | None = None, constraint: TreeConstraint | None = None):
    """A jitted ``fn(params, inputs int32[B, S], rng) -> int32[B, T]`` of best output ids (T = S + offset).

    ``constraint`` (`tree_constraint`): each output is a tree over its input's words (their count read from
    ``inputs``).

    For benchmarks (bench/decode_throughput.py, the peers' setting): ``forced_length`` forbids EOS and makes every
    sentence exactly that long; ``cache_length`` replaces the cache length ``min(S + offset, max_len)``.
    """
    d, max_len = config.decode, config.model.max_len

    def decode(params: dict, inputs: jax.Array, rng: jax.Array) -> jax.Array:
        model = nnx.merge(graphdef, params)
        batch_size, src_len = inputs.shape
        max_decode_len = cache_length or min(src_len + d.max_length_offset, max_len)  # §6.1: input length + 50
        max_lengths = (inputs != 0).sum(-1) + d.max_length_offset  # per sentence
        if forced_length is not None:
            max_lengths = jnp.full((batch_size,), forced_length, jnp.int32)
        memory = model.prepare_memory(model.encode(inputs), inputs)  # once per sentence, shared by its beams
        beams = d.beam_size if d.method == "beam" else 1
        cache = model.init_cache(batch_size, max_decode_len, beams)

        def step_fn(tokens, cache):
            logits, cache = model.decode_step(tokens, memory, cache)
            if forced_length is not None:
                logits = logits.at[:, EOS_ID].set(-jnp.inf)  # no hypothesis ends before forced_length
            return logits, cache

        common = dict(batch_size=batch_size, max_decode_len=max_decode_len, max_lengths=max_lengths,
                      eos_id=EOS_ID, start_id=START_ID)
        if constraint is not None:
            state = constraint.init(jnp.repeat(constraint.count_words(inputs), beams))  # [B*beams]
            common["constraint"] = Constraint(state, constraint.allowed, constraint.advance)
        if d.method == "beam":
            return beam_search(step_fn, cache, beam_size=d.beam_size, length_penalty=d.length_penalty, num_best=1,
                               reorder_fn=model.reorder_cache, **common).sequences[:, 0]
        if d.method == "greedy":
            return greedy_search(step_fn, cache, **common)[0]
        if d.method == "sample":
            return sample(step_fn, cache, rng, temperature=d.temperature, top_k=d.top_k, top_p=d.top_p,
                          **common)[0]
        raise ValueError(f"Unknown config.decode.method {d.method!r}; valid: beam, greedy, sample.")

    return jax.jit(decode)


class SentenceTranslation:
    """Plain sentences through an engine's ``translate_batches`` (the JAX :class:`Translator` and the CTranslate2
    engine share it): the same tokenization, length batching and empty-line rule for both."""

    tokenizer: Tokenizer
    config: ml_collections.ConfigDict

    def translate(self, texts: Sequence[str], progress: bool = False) -> list[str]:
        """Translates plain sentences; empty lines give empty lines."""
        ids = self.tokenizer.encode_batch(list(texts))
        batches = eval_batches([(s, s) for s in ids], batch_size=self.config.decode.batch_size,
                               max_len=self.config.model.max_len)
        translations = self.translate_batches(batches, progress)
        return ["" if not text.strip() else out for text, out in zip(texts, translations)]


class Translator(SentenceTranslation):
    """Translates text or evaluation batches with fixed parameters, preserving order."""

    def __init__(self, config: ml_collections.ConfigDict, graphdef: nnx.GraphDef, params: dict,
                 tokenizer: Tokenizer, mesh: jax.sharding.Mesh | None = None):
        self.config, self.params, self.tokenizer = config, params, tokenizer
        self.mesh = mesh
        self.decode_fn = make_decode_fn(config, graphdef, constraint=tree_constraint(config, tokenizer))
        self.rng = jax.random.PRNGKey(config.seed)

    def translate_batches(self, batches: Sequence[dict], progress: bool = False) -> list[str]:
        """Translations of evaluation batches (``inputs`` + ``index``), in the split's order."""
        out: dict[int, str] = {}
        for i, batch in enumerate(tqdm(batches, desc="decode", unit="batch", disable=not progress)):
            inputs = batch["inputs"]
            if self.mesh is not None:
                inputs = sharding.global_eval_batch({"inputs": inputs}, self.mesh)["inputs"]
            ids = sharding.gather_to_host(self.decode_fn(self.params, inputs, jax.random.fold_in(self.rng, i)))
            for row, index in enumerate(batch["index"]):
                if index >= 0:
                    out[int(index)] = self.tokenizer.decode(ids[row].tolist())
        return [out[i] for i in range(len(out))]
