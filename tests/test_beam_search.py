"""Tests for beam search, greedy search and sampling (§6.1) against scripted step functions."""

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax.decode.beam_search import _beam_search, beam_search, filter_logits, greedy_search, sample

EOS = 1
VOCAB = 4  # 0 = PAD (never emitted), 1 = EOS, 2 and 3 = words
PRIME = 1009
TABLE = np.random.RandomState(0).randn(PRIME, VOCAB).astype(np.float32) * 2.0
TABLE[:, 0] = -np.inf  # PAD is impossible: exercises -inf log-probabilities


def _prefix_hash(h, token):
    """Running hash of the tokens chosen so far (the cache leaf that makes logits depend on the prefix)."""
    return (h * 31 + token + 1) % PRIME


def _initial_hash(sentence):
    return (sentence * 577 + 3) % PRIME


def make_cache(sentence_ids, copies):
    """Cache rows for each sentence, repeated `copies` times (beam size): per-hypothesis hash + constant."""
    sid = jnp.repeat(jnp.asarray(sentence_ids, jnp.int32), copies)  # [B*K]
    return {"hash": _initial_hash(sid), "sentence": sid}


def hash_step(tokens, cache):
    """Scripted model: logits are a fixed random function of (sentence, whole prefix) via the hash leaf.

    The start token (0) leaves the hash unchanged, so the first logits depend on the sentence only. A wrong
    cache reorder in beam search feeds the wrong prefix hash, hence wrong logits.
    """
    h = jnp.where(tokens == 0, cache["hash"], _prefix_hash(cache["hash"], tokens))
    logits = jnp.asarray(TABLE)[h]  # [B*K, V]
    return logits, {"hash": h, "sentence": cache["sentence"]}


def never_eos_step(tokens, cache):
    """Scripted model that never emits EOS (EOS logit -inf); the preferred word depends on the sentence."""
    del tokens
    row = jnp.array([-jnp.inf, -jnp.inf, 1.0, 0.0], jnp.float32)
    logits = jnp.where((cache["sentence"] % 2 == 1)[:, None], row[jnp.array([0, 1, 3, 2])], row)
    return jnp.broadcast_to(logits, (cache["sentence"].shape[0], VOCAB)), cache


def exhaustive(sentence, max_len, alpha):
    """All (sequence, score) with EOS termination or max length, scored in float64, best first."""
    out = []

    def log_probs(h):
        row = TABLE[h].astype(np.float64)
        finite = row[1:]
        return row - (finite.max() + math.log(np.exp(finite - finite.max()).sum()))

    def visit(prefix, h, logp):
        lp = log_probs(h)
        for tok in range(1, VOCAB):
            seq, total = [*prefix, tok], logp + lp[tok]
            if tok == EOS or len(seq) == max_len:
                out.append((tuple(seq), total / ((5.0 + len(seq)) / 6.0) ** alpha))
            else:
                visit(seq, _prefix_hash(h, tok), total)

    visit([], _initial_hash(sentence), 0.0)
    return sorted(out, key=lambda item: -item[1])


def _unpad(seq, length):
    seq = [int(t) for t in seq]
    assert all(t == 0 for t in seq[length:]), seq
    return tuple(seq[:length])


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_beam_matches_exhaustive_search_and_n_best(alpha):
    sentences, max_lengths, beam, n_best = [0, 1, 2], [4, 3, 4], 64, 6
    out = beam_search(
        hash_step,
        make_cache(sentences, beam),
        batch_size=3,
        beam_size=beam,
        max_decode_len=5,
        max_lengths=jnp.array(max_lengths),
        alpha=alpha,
        eos_id=EOS,
        num_best=n_best,
    )
    assert out.sequences.shape == (3, n_best, 5) and out.scores.shape == (3, n_best)
    for b, (sentence, max_len) in enumerate(zip(sentences, max_lengths, strict=True)):
        expected = exhaustive(sentence, max_len, alpha)[:n_best]
        got = [_unpad(out.sequences[b, i], int(out.lengths[b, i])) for i in range(n_best)]
        assert got == [seq for seq, _ in expected]
        np.testing.assert_allclose(out.scores[b], [score for _, score in expected], rtol=1e-5)
        assert np.all(np.diff(np.asarray(out.scores[b])) <= 0)  # best first


def peaked_step(tokens, cache):
    """`hash_step` made confident: its argmax gets logit 10, the rest 0, so no side exit beats greedy."""
    logits, cache = hash_step(tokens, cache)
    peaked = jnp.where(logits == logits.max(axis=-1, keepdims=True), 10.0, 0.0)
    return jnp.where(jnp.isfinite(logits), peaked, -jnp.inf), cache


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_size_one_equals_greedy(alpha):
    """Beam size 1 keeps the best EOS side exit of every step too; on a confident model that is greedy."""
    sentences = list(range(6))
    out = beam_search(
        peaked_step,
        make_cache(sentences, 1),
        batch_size=6,
        beam_size=1,
        max_decode_len=7,
        alpha=alpha,
        eos_id=EOS,
    )
    seqs, lengths = greedy_search(peaked_step, make_cache(sentences, 1), batch_size=6, max_decode_len=7, eos_id=EOS)
    np.testing.assert_array_equal(out.sequences[:, 0], seqs)
    np.testing.assert_array_equal(out.lengths[:, 0], lengths)
    assert np.any(np.asarray(lengths) < 7) and np.any(np.asarray(lengths) > 1)  # the test is not vacuous


def test_never_eos_returns_whole_hypothesis_at_per_sentence_max_length():
    max_lengths = jnp.array([3, 5])
    out = beam_search(
        never_eos_step,
        make_cache([0, 1], 4),
        batch_size=2,
        beam_size=4,
        max_decode_len=6,
        max_lengths=max_lengths,
        alpha=0.6,
        eos_id=EOS,
        num_best=1,
    )
    np.testing.assert_array_equal(out.lengths[:, 0], [3, 5])
    np.testing.assert_array_equal(out.sequences[:, 0], [[2, 2, 2, 0, 0, 0], [3, 3, 3, 3, 3, 0]])
    assert np.all(np.isfinite(out.scores))
    seqs, lengths = greedy_search(
        never_eos_step, make_cache([0, 1], 1), batch_size=2, max_decode_len=6, max_lengths=max_lengths, eos_id=EOS
    )
    np.testing.assert_array_equal(lengths, [3, 5])
    np.testing.assert_array_equal(seqs, out.sequences[:, 0])


def test_batch_order_preserved():
    beam, sentences = 3, [5, 2, 7]
    kwargs = {"beam_size": beam, "max_decode_len": 6, "alpha": 0.6, "eos_id": EOS}
    batched = beam_search(hash_step, make_cache(sentences, beam), batch_size=3, **kwargs)
    for b, sentence in enumerate(sentences):
        single = beam_search(hash_step, make_cache([sentence], beam), batch_size=1, **kwargs)
        np.testing.assert_array_equal(batched.sequences[b], single.sequences[0])
        np.testing.assert_allclose(batched.scores[b], single.scores[0], rtol=1e-6)
    assert len({tuple(np.asarray(batched.sequences[b, 0])) for b in range(3)}) > 1  # sentences differ


def test_cache_is_reordered_by_beam_index():
    """With a hash leaf that accumulates the chosen tokens, the cache must follow each hypothesis's parent."""
    beam = 4
    out = beam_search(
        hash_step,
        make_cache([3], beam),
        batch_size=1,
        beam_size=beam,
        max_decode_len=6,
        alpha=0.6,
        eos_id=EOS,
    )
    for i in range(beam):
        seq = _unpad(out.sequences[0, i], int(out.lengths[0, i]))
        h, total = _initial_hash(3), 0.0
        for tok in seq:  # rescoring the returned hypothesis along its own prefix gives the reported score
            row = TABLE[h].astype(np.float64)[1:]
            total += TABLE[h][tok] - (row.max() + math.log(np.exp(row - row.max()).sum()))
            h = _prefix_hash(h, tok)
        np.testing.assert_allclose(float(out.scores[0, i]), total / ((5.0 + len(seq)) / 6.0) ** 0.6, rtol=1e-5)


def long_wins_step(tokens, cache):
    """EOS first with p = 0.7; else word 2 (p = 0.29) then 2 forever with p ≈ 1: with α = 2 the long one wins."""
    first = jnp.log(jnp.array([0.0, 0.7, 0.29, 0.01]))
    after_2 = jnp.log(jnp.array([0.0, 1e-4, 1.0 - 2e-4, 1e-4]))
    after_3 = jnp.log(jnp.array([0.0, 1.0 - 2e-4, 1e-4, 1e-4]))
    logits = jnp.where((tokens == 2)[:, None], after_2, after_3)
    logits = jnp.where((cache["step"] == 0)[:, None], first, logits)
    return logits, {"step": cache["step"] + 1}


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_early_termination_bound_allows_longer_hypotheses(alpha):
    """After step 1 the finished <EOS> (score log 0.7 = -0.36) beats the live "2" scored at its current length
    (log 0.29 / lp(2) = -0.91 for α = 2), yet "2"×8 reaches log 0.29 / lp(8) = -0.26: stopping needs lp(max)."""
    out = beam_search(
        long_wins_step,
        {"step": jnp.zeros((2,), jnp.int32)},
        batch_size=2,
        beam_size=1,
        max_decode_len=8,
        max_lengths=jnp.array([8, 4]),
        alpha=alpha,
        eos_id=EOS,
    )
    long_wins = [alpha == 2.0, False]  # sentence 1 (max 4): log 0.29 / lp(4) = -0.55 < -0.36
    for b in range(2):
        expected = [2] * [8, 4][b] if long_wins[b] else [EOS]
        assert _unpad(out.sequences[b, 0], int(out.lengths[b, 0])) == tuple(expected)


@pytest.mark.parametrize("alpha", [0.6, 2.0])
def test_jit_and_early_termination_do_not_change_results(alpha):
    beam, sentences = 2, list(range(16))
    kwargs = {"batch_size": 16, "beam_size": beam, "max_decode_len": 12, "alpha": alpha, "eos_id": EOS}
    kwargs.update(start_id=0, num_best=2)

    @jax.jit
    def run(cache, max_lengths):
        return _beam_search(hash_step, cache, max_lengths=max_lengths, early_stop=True, **kwargs)

    max_lengths = jnp.array([12, 9, 12, 11, 10, 12, 8, 12] * 2)
    (early, steps_early) = run(make_cache(sentences, beam), max_lengths)
    (full, steps_full) = _beam_search(
        hash_step, make_cache(sentences, beam), max_lengths=max_lengths, early_stop=False, **kwargs
    )
    eager = beam_search(hash_step, make_cache(sentences, beam), max_lengths=max_lengths, **kwargs)
    for a, b in [(early, full), (early, eager)]:
        np.testing.assert_array_equal(a.sequences, b.sequences)
        np.testing.assert_array_equal(a.lengths, b.lengths)
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-6)
    assert int(steps_full) == 12
    if alpha == 0.6:  # with α = 2 long hypotheses keep a chance until the end on this model
        assert int(steps_early) < 12  # early termination happened


def test_sample_top_k_one_and_tiny_top_p_equal_greedy():
    sentences = list(range(4))
    seqs, lengths = greedy_search(hash_step, make_cache(sentences, 1), batch_size=4, max_decode_len=8, eos_id=EOS)
    run = functools.partial(
        sample, hash_step, make_cache(sentences, 1), jax.random.key(0), batch_size=4, max_decode_len=8, eos_id=EOS
    )
    for options in [{"top_k": 1}, {"top_p": 1e-6}, {"temperature": 0.0}]:
        got_seqs, got_lengths = run(**options)
        np.testing.assert_array_equal(got_seqs, seqs)
        np.testing.assert_array_equal(got_lengths, lengths)


def test_sample_draws_valid_sequences():
    seqs, lengths = jax.jit(
        lambda key: sample(
            hash_step,
            make_cache(list(range(8)), 1),
            key,
            batch_size=8,
            max_decode_len=6,
            eos_id=EOS,
            temperature=1.5,
            top_k=2,
        )
    )(jax.random.key(1))
    for seq, length in zip(np.asarray(seqs), np.asarray(lengths), strict=True):
        assert 1 <= length <= 6 and np.all(seq[:length] > 0) and np.all(seq[length:] == 0)
        assert length == 6 or seq[length - 1] == EOS


def test_filter_logits():
    logits = jnp.log(jnp.array([[0.5, 0.3, 0.15, 0.05]]))
    np.testing.assert_array_equal(np.isfinite(filter_logits(logits, top_k=2)), [[True, True, False, False]])
    np.testing.assert_array_equal(np.isfinite(filter_logits(logits, top_p=0.7)), [[True, True, False, False]])
    np.testing.assert_array_equal(np.isfinite(filter_logits(logits, top_p=0.5)), [[True, False, False, False]])
    np.testing.assert_array_equal(np.isfinite(filter_logits(logits, top_p=0.96)), [[True] * 4])


def test_bad_num_best():
    with pytest.raises(ValueError, match="num_best"):
        beam_search(
            hash_step,
            make_cache([0], 2),
            batch_size=1,
            beam_size=2,
            max_decode_len=3,
            alpha=0.6,
            eos_id=EOS,
            num_best=3,
        )


def test_exhaustive_helper_counts_all_sequences():
    # 3^3 prefixes of words then EOS-or-word at max length 4, plus the shorter EOS-terminated ones.
    assert len(exhaustive(0, 4, 0.6)) == sum(2**n for n in range(3)) + 2**3 * 3
    assert len(set(itertools.chain(seq for seq, _ in exhaustive(0, 4, 0.6)))) == len(exhaustive(0, 4, 0.6))
