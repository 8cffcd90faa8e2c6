"""Beam search with the GNMT length penalty (§6.1), greedy search and sampling, in pure JAX.

The paper decodes with "beam search with a beam size of 4 and length penalty α = 0.6", a maximum output
length of input length + 50, and "terminate[s] early when possible" (§6.1). This module implements that
search model-agnostically: the model is seen only through a cached step function

    step_fn(tokens: int32[B*K], cache) -> (logits: float32[B*K, V], new_cache)

and row b*K + j is hypothesis j of sentence b. When beams are re-ranked, ``reorder_fn(cache, parent)`` makes
hypothesis j continue ``parent[b, j]``; by default every leaf of ``cache`` has leading dimension B*K and its rows
are gathered, while the Transformer (``Transformer.reorder_cache``) keeps its keys/values in place and moves only
a small ancestry table. Per-sentence constants (encoder memory, cross-attention K/V) are closed over by
``step_fn``. The first call receives ``start_id`` (PAD = 0, as in tensor2tensor). Everything runs inside one
``jax.lax.while_loop`` with static shapes and no host syncs, so the functions are jittable (wrap them in
``jax.jit`` with ``step_fn`` and the sizes closed over).

Conventions shared by all three decoders:
  * ``sequences`` hold the tokens after the start token, EOS included, 0-padded after EOS.
  * ``lengths`` count those tokens, EOS included (the |Y| of the length penalty).
  * ``max_lengths[b]`` (clipped to ``[1, max_decode_len]``) is sentence b's maximum output length; a
    hypothesis that reaches it is finished there and returned whole (without EOS), never dropped.
  * An optional `Constraint` (not in the paper; e.g. parsing's well-formed trees, config.decode.tree_constraint)
    masks the tokens a hypothesis may take next: the mask sets log-probabilities to -inf before the top-k, so the
    scores of the hypotheses it keeps are the model's own, unnormalised over the allowed tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

StepFn = Callable[[jax.Array, Any], tuple[jax.Array, Any]]
ReorderFn = Callable[[Any, jax.Array], Any]  # (cache, parent int32[B, K]) -> cache


class Constraint(NamedTuple):
    """Which tokens each hypothesis may take next (transformer_jax/parsing/constraint.py is one).

    Attributes:
        state: a pytree whose leaves have one row per hypothesis (beam search: [B*K, ...], row b*K + j is
            hypothesis j of sentence b, reordered with `gather_rows`; greedy search and sampling: [B, ...]).
        allowed: ``(state, budget int32[rows]) -> bool[rows, V]``, ``budget`` being the output positions left
            after the token taken now (max length - tokens so far - 1).
        advance: ``(state, tokens int32[rows]) -> state`` once each hypothesis took its token.
    """

    state: Any
    allowed: Callable[[Any, jax.Array], jax.Array]
    advance: Callable[[Any, jax.Array], Any]

_NEG_INF = float("-inf")  # impossible / empty slots; log-probs and scores are compared, never subtracted


class BeamOutput(NamedTuple):
    """Result of `beam_search`, best hypothesis first.

    Attributes:
        sequences: int32[B, num_best, max_decode_len], tokens after the start token, EOS included, 0-padded.
        scores: float32[B, num_best], length-penalised log-probabilities (-inf for an empty slot).
        lengths: int32[B, num_best], number of tokens incl. EOS (0 for an empty slot).
    """

    sequences: jax.Array
    scores: jax.Array
    lengths: jax.Array


def length_normalizer(length: jax.Array, length_penalty: float) -> jax.Array:
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^α, which a hypothesis's log-probability is divided by in beam search (§6.1:
    "length penalty α = 0.6").

    Args:
        length: number of output tokens, EOS included (int or float array).
        length_penalty: the exponent α (config.decode.length_penalty); 0 disables the penalty.

    Returns:
        float32 array of the same shape.
    """
    return ((5.0 + jnp.asarray(length, jnp.float32)) / 6.0) ** length_penalty


def _max_lengths(max_lengths: jax.Array | None, batch_size: int, max_decode_len: int) -> jax.Array:
    """Per-sentence maximum output length, int32[B], clipped to [1, max_decode_len]."""
    if max_lengths is None:
        return jnp.full((batch_size,), max_decode_len, jnp.int32)
    return jnp.clip(jnp.asarray(max_lengths, jnp.int32).reshape(batch_size), 1, max_decode_len)


def gather_rows(cache: Any, parent: jax.Array) -> Any:
    """The default ``reorder_fn``: gathers every cache leaf's leading B*K rows by parent beam (int32[B, K])."""
    batch, beams = parent.shape
    flat_index = ((jnp.arange(batch, dtype=jnp.int32) * beams)[:, None] + parent).reshape(batch * beams)
    return jax.tree.map(lambda x: x if x.ndim == 0 else jnp.take(x, flat_index, axis=0), cache)


class _BeamState(NamedTuple):
    step: jax.Array  # int32[]: tokens generated so far by every live hypothesis
    live_tokens: jax.Array  # int32[B, K]: last token of each live hypothesis (fed to step_fn)
    live_logprobs: jax.Array  # float32[B, K]: sorted descending; -inf = dead slot
    live_seqs: jax.Array  # int32[B, K, L]
    finished_scores: jax.Array  # float32[B, K]: sorted descending; -inf = empty slot
    finished_seqs: jax.Array  # int32[B, K, L]
    finished_lengths: jax.Array  # int32[B, K]
    cache: Any  # leaves [B*K, ...]
    constraint_state: Any  # the Constraint's state, leaves [B*K, ...] (None without one)


def _can_stop(s: _BeamState, max_len: jax.Array, length_penalty: float, num_best: int) -> jax.Array:
    """Whether each sentence's ``num_best`` best hypotheses are final, bool[B] (the early termination of §6.1).

    A live hypothesis with log-probability s ≤ 0 after t tokens finishes with some length n in [t + 1, max_len]
    and a log-probability s' ≤ s, so its score is s' / lp(n) ≤ s / lp(n) ≤ s / max(lp(t + 1), lp(max_len)):
    lp is monotonic in n, so its largest value over the range is at an end (lp(max_len) for α ≥ 0, the other
    end for α < 0). When the best live bound is ≤ the ``num_best``-th finished score, no later candidate can
    enter the first ``num_best`` (a tie keeps the older finished hypothesis), so they are final. For
    ``num_best = 1`` that compares with the best finished score (tensor2tensor's ``stop_early``); for
    ``num_best = K``, with the worst of the K. A sentence with no live hypothesis left is final too.
    """
    best_live = s.live_logprobs[:, 0]  # [B] (sorted)
    lp_max = jnp.maximum(length_normalizer(s.step + 1, length_penalty),
                         length_normalizer(max_len, length_penalty))  # [B]
    bound = best_live / lp_max  # [B]: best score any live hypothesis can still reach
    last_kept = s.finished_scores[:, num_best - 1]  # [B] (sorted); -inf until num_best hypotheses finished
    return (best_live == _NEG_INF) | (jnp.isfinite(last_kept) & (bound <= last_kept))


def beam_search(
    step_fn: StepFn,
    cache: Any,
    *,
    batch_size: int,
    beam_size: int,
    max_decode_len: int,
    max_lengths: jax.Array | None = None,
    length_penalty: float,
    eos_id: int,
    start_id: int = 0,
    num_best: int | None = None,
    reorder_fn: ReorderFn = gather_rows,
    constraint: Constraint | None = None,
) -> BeamOutput:
    """Beam search with the GNMT length penalty and early termination (§6.1: beam 4, α = 0.6).

    Each step scores every extension of the K live hypotheses with one ``log_softmax`` (fp32) and keeps the
    top 2K of the K×V candidates with one ``top_k``: 2K guarantees K that do not end, since at most K of
    them (one per beam) are EOS. Candidates ending with EOS or reaching their sentence's maximum length move
    to the finished set (top K by score = log p(Y) / lp(Y), lp(Y) = ((5 + |Y|) / 6)^α, |Y| counting EOS);
    the best K others stay live, and ``reorder_fn`` makes each continue its parent beam.

    Early termination ("terminate early when possible", §6.1): the loop stops once no live hypothesis of any
    sentence can still enter the ``num_best`` returned ones (see `_can_stop`); for the 1-best output of
    translation that is as soon as none can beat the best finished one, as in tensor2tensor's ``stop_early``.
    Stopping early never changes the result.

    With ``beam_size=1`` the live beam follows the greedy path, but the 2 candidates per step also let an
    EOS that is not the argmax finish; the result equals `greedy_search` unless such a side exit outscores
    the greedy path (as in tensor2tensor and the Flax WMT example).

    Args:
        step_fn: cached decoder step, ``(int32[B*K], cache) -> (float32[B*K, V], cache)``.
        cache: the step function's cache (with the default ``reorder_fn``, leaves [B*K, ...]: sentence b's beams
            are rows b*K ... b*K + K - 1).
        batch_size: B.
        beam_size: K.
        max_decode_len: static padded maximum output length L (the shapes).
        max_lengths: optional int32[B] per-sentence maximum output length (e.g. source length + 50).
        length_penalty: the exponent α of the GNMT length penalty (config.decode.length_penalty).
        eos_id: end-of-sentence token id.
        start_id: token fed at the first step (PAD = 0, as in tensor2tensor).
        num_best: hypotheses returned per sentence, ≤ beam_size; default beam_size.
        reorder_fn: ``(cache, parent int32[B, K]) -> cache`` after each re-ranking; default `gather_rows`.
        constraint: optional `Constraint` on the tokens each hypothesis may take (state rows [B*K, ...]); a
            hypothesis left with no allowed token drops out.

    Returns:
        `BeamOutput` with [B, num_best, ...] arrays, best first.
    """
    output, _ = _beam_search(
        step_fn,
        cache,
        batch_size=batch_size,
        beam_size=beam_size,
        max_decode_len=max_decode_len,
        max_lengths=max_lengths,
        length_penalty=length_penalty,
        eos_id=eos_id,
        start_id=start_id,
        num_best=num_best,
        early_stop=True,
        reorder_fn=reorder_fn,
        constraint=constraint,
    )
    return output


def _beam_search(
    step_fn: StepFn,
    cache: Any,
    *,
    batch_size: int,
    beam_size: int,
    max_decode_len: int,
    max_lengths: jax.Array | None,
    length_penalty: float,
    eos_id: int,
    start_id: int,
    num_best: int | None,
    early_stop: bool,
    reorder_fn: ReorderFn = gather_rows,
    constraint: Constraint | None = None,
) -> tuple[BeamOutput, jax.Array]:
    """`beam_search`, also returning the number of steps run; ``early_stop=False`` runs every step (tests)."""
    b_size, k, length = batch_size, beam_size, max_decode_len
    num_best = k if num_best is None else num_best
    if not 1 <= num_best <= k:
        raise ValueError(f"num_best must be in [1, beam_size={k}], got {num_best}")
    if k < 1 or length < 1 or b_size < 1:
        raise ValueError(f"batch_size, beam_size and max_decode_len must be ≥ 1, got {b_size}, {k}, {length}")
    max_len = _max_lengths(max_lengths, b_size, length)  # [B]

    def cond_fn(s: _BeamState) -> jax.Array:
        keep_going = s.step < length
        return keep_going & ~jnp.all(_can_stop(s, max_len, length_penalty, num_best)) if early_stop else keep_going

    def body_fn(s: _BeamState) -> _BeamState:
        logits, new_cache = step_fn(s.live_tokens.reshape(b_size * k), s.cache)  # [B*K, V]
        vocab = logits.shape[-1]
        log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1).reshape(b_size, k, vocab)
        if constraint is not None:  # tokens a hypothesis may not take are impossible (scores stay the model's)
            budget = jnp.repeat(max_len - s.step - 1, k)  # [B*K]: positions left after this token
            allowed = constraint.allowed(s.constraint_state, budget).reshape(b_size, k, vocab)
            log_probs = jnp.where(allowed, log_probs, _NEG_INF)
        log_probs = log_probs + s.live_logprobs[:, :, None]  # [B, K, V]
        # 2K candidates: even if K of them end with EOS, K live ones remain.
        num_cand = min(2 * k, k * vocab)  # 2K unless the vocabulary is tiny
        cand_logprobs, cand_index = jax.lax.top_k(log_probs.reshape(b_size, k * vocab), num_cand)  # [B, 2K]
        cand_beam = cand_index // vocab  # [B, 2K] parent beam
        cand_token = (cand_index % vocab).astype(jnp.int32)  # [B, 2K]
        cand_len = s.step + 1
        ends = (cand_token == eos_id) | (cand_len >= max_len)[:, None]  # [B, 2K]

        # Live: best K candidates that do not end (top_k output is already sorted).
        live_cand = jnp.where(ends, _NEG_INF, cand_logprobs)  # [B, 2K]
        live_logprobs, live_sel = jax.lax.top_k(live_cand, k)  # [B, K]
        live_parent = jnp.take_along_axis(cand_beam, live_sel, axis=1)  # [B, K]
        live_tokens = jnp.take_along_axis(cand_token, live_sel, axis=1)  # [B, K]
        live_seqs = jnp.take_along_axis(s.live_seqs, live_parent[:, :, None], axis=1)  # [B, K, L]
        live_seqs = jax.lax.dynamic_update_slice(live_seqs, live_tokens[:, :, None], (0, 0, s.step))
        cache = reorder_fn(new_cache, live_parent)
        constraint_state = s.constraint_state
        if constraint is not None:
            constraint_state = constraint.advance(gather_rows(constraint_state, live_parent),
                                                  live_tokens.reshape(b_size * k))

        # Finished: merge the K kept with the 2K candidates by score; only the winners' sequences are built.
        cand_scores = jnp.where(ends, cand_logprobs / length_normalizer(cand_len, length_penalty),
                                _NEG_INF)  # [B, 2K]
        merged = jnp.concatenate([s.finished_scores, cand_scores], axis=1)  # [B, 3K]
        finished_scores, fin_sel = jax.lax.top_k(merged, k)  # [B, K]; ties prefer the older finished ones
        from_cand = fin_sel >= k  # [B, K]
        cand_sel = jnp.maximum(fin_sel - k, 0)
        parent = jnp.take_along_axis(cand_beam, cand_sel, axis=1)  # [B, K]
        token = jnp.take_along_axis(cand_token, cand_sel, axis=1)  # [B, K]
        # Rows 0..K-1: the old finished; rows K..2K-1: the live prefixes (parents of candidates).
        source = jnp.concatenate([s.finished_seqs, s.live_seqs], axis=1)  # [B, 2K, L]
        source_row = jnp.where(from_cand, k + parent, fin_sel)  # [B, K]
        finished_seqs = jnp.take_along_axis(source, source_row[:, :, None], axis=1)  # [B, K, L]
        column = jnp.where(from_cand, token, finished_seqs[:, :, s.step])  # old finished have 0 here
        finished_seqs = jax.lax.dynamic_update_slice(finished_seqs, column[:, :, None], (0, 0, s.step))
        old_lengths = jnp.take_along_axis(s.finished_lengths, jnp.minimum(fin_sel, k - 1), axis=1)
        finished_lengths = jnp.where(from_cand, cand_len, old_lengths)
        finished_lengths = jnp.where(jnp.isfinite(finished_scores), finished_lengths, 0)

        return _BeamState(
            step=s.step + 1,
            live_tokens=live_tokens,
            live_logprobs=live_logprobs,
            live_seqs=live_seqs,
            finished_scores=finished_scores,
            finished_seqs=finished_seqs,
            finished_lengths=finished_lengths,
            cache=cache,
            constraint_state=constraint_state,
        )

    # Only beam 0 is live at first, so the K initial (identical) hypotheses do not fill the beam with copies.
    init = _BeamState(
        step=jnp.zeros((), jnp.int32),
        live_tokens=jnp.full((b_size, k), start_id, jnp.int32),
        live_logprobs=jnp.tile(jnp.array([0.0] + [_NEG_INF] * (k - 1), jnp.float32), (b_size, 1)),
        live_seqs=jnp.zeros((b_size, k, length), jnp.int32),
        finished_scores=jnp.full((b_size, k), _NEG_INF, jnp.float32),
        finished_seqs=jnp.zeros((b_size, k, length), jnp.int32),
        finished_lengths=jnp.zeros((b_size, k), jnp.int32),
        cache=cache,
        constraint_state=None if constraint is None else constraint.state,
    )
    final = jax.lax.while_loop(cond_fn, body_fn, init)
    # Every hypothesis finishes by its max length, so the finished set is complete; empty slots (fewer than
    # num_best possible outputs) keep score -inf, length 0 and zero tokens.
    output = BeamOutput(
        sequences=final.finished_seqs[:, :num_best],
        scores=final.finished_scores[:, :num_best],
        lengths=final.finished_lengths[:, :num_best],
    )
    return output, final.step


class _SeqState(NamedTuple):
    step: jax.Array  # int32[]
    tokens: jax.Array  # int32[B]: last token
    seqs: jax.Array  # int32[B, L]
    finished: jax.Array  # bool[B]
    lengths: jax.Array  # int32[B]
    cache: Any  # leaves [B, ...]
    constraint_state: Any  # the Constraint's state, leaves [B, ...] (None without one)


def _sequential_decode(
    step_fn: StepFn,
    cache: Any,
    choose: Callable[[jax.Array, jax.Array], jax.Array],
    *,
    batch_size: int,
    max_decode_len: int,
    max_lengths: jax.Array | None,
    eos_id: int,
    start_id: int,
    constraint: Constraint | None,
) -> tuple[jax.Array, jax.Array]:
    """One-hypothesis-per-sentence decoding loop; ``choose(logits [B, V] fp32, step) -> int32[B]`` (tokens the
    ``constraint`` does not allow have logit -inf)."""
    max_len = _max_lengths(max_lengths, batch_size, max_decode_len)  # [B]

    def cond_fn(s: _SeqState) -> jax.Array:
        return (s.step < max_decode_len) & ~jnp.all(s.finished)

    def body_fn(s: _SeqState) -> _SeqState:
        logits, cache = step_fn(s.tokens, s.cache)  # [B, V]
        logits = logits.astype(jnp.float32)
        if constraint is not None:
            logits = jnp.where(constraint.allowed(s.constraint_state, max_len - s.step - 1), logits, _NEG_INF)
        token = choose(logits, s.step).astype(jnp.int32)  # [B]
        token = jnp.where(s.finished, 0, token)  # 0-pad after EOS
        seqs = jax.lax.dynamic_update_slice(s.seqs, token[:, None], (0, s.step))
        ends = ~s.finished & ((token == eos_id) | (s.step + 1 >= max_len))
        lengths = jnp.where(ends, s.step + 1, s.lengths)
        constraint_state = s.constraint_state if constraint is None else constraint.advance(s.constraint_state, token)
        return _SeqState(s.step + 1, token, seqs, s.finished | ends, lengths, cache, constraint_state)

    init = _SeqState(
        step=jnp.zeros((), jnp.int32),
        tokens=jnp.full((batch_size,), start_id, jnp.int32),
        seqs=jnp.zeros((batch_size, max_decode_len), jnp.int32),
        finished=jnp.zeros((batch_size,), bool),
        lengths=jnp.zeros((batch_size,), jnp.int32),
        cache=cache,
        constraint_state=None if constraint is None else constraint.state,
    )
    final = jax.lax.while_loop(cond_fn, body_fn, init)
    return final.seqs, final.lengths


def greedy_search(
    step_fn: StepFn,
    cache: Any,
    *,
    batch_size: int,
    max_decode_len: int,
    max_lengths: jax.Array | None = None,
    eos_id: int,
    start_id: int = 0,
    constraint: Constraint | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Greedy (argmax) decoding, the beam-size-1 baseline of §6.1; stops once every sentence is finished.

    Args:
        step_fn: cached decoder step, ``(int32[B], cache) -> (float32[B, V], cache)``.
        cache: pytree with leaves [B, ...].
        batch_size: B.
        max_decode_len: static padded maximum output length L.
        max_lengths: optional int32[B] per-sentence maximum output length.
        eos_id: end-of-sentence token id.
        start_id: token fed at the first step.
        constraint: optional `Constraint` on the tokens each sentence may take (state rows [B, ...]).

    Returns:
        (sequences int32[B, L] EOS included and 0-padded, lengths int32[B] incl. EOS).
    """
    return _sequential_decode(
        step_fn,
        cache,
        lambda logits, _: jnp.argmax(logits, axis=-1),
        batch_size=batch_size,
        max_decode_len=max_decode_len,
        max_lengths=max_lengths,
        eos_id=eos_id,
        start_id=start_id,
        constraint=constraint,
    )


def filter_logits(logits: jax.Array, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> jax.Array:
    """Temperature, top-k and nucleus (top-p) filtering of fp32 logits [B, V]; removed entries become -inf.

    top-p keeps the smallest set of most probable tokens whose probability mass reaches ``top_p`` (the most
    probable token is always kept).
    """
    logits = logits / temperature
    if top_k > 0:
        kth = jax.lax.top_k(logits, top_k)[0][:, -1:]  # [B, 1]
        logits = jnp.where(logits < kth, _NEG_INF, logits)
    if top_p < 1.0:
        sorted_logits = jnp.sort(logits, axis=-1)[:, ::-1]  # [B, V] descending
        probs = jax.nn.softmax(sorted_logits, axis=-1)
        mass_before = jnp.cumsum(probs, axis=-1) - probs  # [B, V]: mass of strictly more probable tokens
        kept = jnp.sum(mass_before < top_p, axis=-1, keepdims=True)  # [B, 1] ≥ 1
        threshold = jnp.take_along_axis(sorted_logits, kept - 1, axis=-1)  # [B, 1]
        logits = jnp.where(logits < threshold, _NEG_INF, logits)
    return logits


def sample(
    step_fn: StepFn,
    cache: Any,
    rng: jax.Array,
    *,
    batch_size: int,
    max_decode_len: int,
    max_lengths: jax.Array | None = None,
    eos_id: int,
    start_id: int = 0,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    constraint: Constraint | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Ancestral sampling with temperature, top-k and nucleus (top-p) filtering (not in the paper; for study).

    Args:
        step_fn: cached decoder step, ``(int32[B], cache) -> (float32[B, V], cache)``.
        cache: pytree with leaves [B, ...].
        rng: PRNG key; step t uses ``fold_in(rng, t)``.
        batch_size: B.
        max_decode_len: static padded maximum output length L.
        max_lengths: optional int32[B] per-sentence maximum output length.
        eos_id: end-of-sentence token id.
        start_id: token fed at the first step.
        temperature: logits are divided by it; 0 means greedy.
        top_k: keep only the k most probable tokens (0 = all).
        top_p: keep the smallest most-probable set with mass ≥ top_p (1.0 = all).
        constraint: optional `Constraint` on the tokens each sentence may take (state rows [B, ...]).

    Returns:
        (sequences int32[B, L] EOS included and 0-padded, lengths int32[B] incl. EOS).
    """
    if temperature < 0 or top_k < 0 or not 0.0 < top_p <= 1.0:
        raise ValueError(f"need temperature ≥ 0, top_k ≥ 0, 0 < top_p ≤ 1; got {temperature}, {top_k}, {top_p}")

    def choose(logits: jax.Array, step: jax.Array) -> jax.Array:
        if temperature == 0.0:
            return jnp.argmax(logits, axis=-1)
        filtered = filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p)
        return jax.random.categorical(jax.random.fold_in(rng, step), filtered, axis=-1)

    return _sequential_decode(
        step_fn,
        cache,
        choose,
        batch_size=batch_size,
        max_decode_len=max_decode_len,
        max_lengths=max_lengths,
        eos_id=eos_id,
        start_id=start_id,
        constraint=constraint,
    )
