"""Tests for beam search, greedy search and sampling (§6.1) against scripted step functions and random models."""

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import transformer_jax.decode.beam_search as bs
from transformer_jax.configs import demo
from transformer_jax.decode.beam_search import (
    _beam_search,
    beam_search,
    filter_logits,
    greedy_search,
    length_normalizer,
    sample,
)
from transformer_jax.model.transformer import START_ID, Transformer

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


def exhaustive(sentence, max_len, length_penalty):
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
                out.append((tuple(seq), total / ((5.0 + len(seq)) / 6.0) ** length_penalty))
            else:
                visit(seq, _prefix_hash(h, tok), total)

    visit([], _initial_hash(sentence), 0.0)
    return sorted(out, key=lambda item: -item[1])


def _unpad(seq, length):
    seq = [int(t) for t in seq]
    assert all(t == 0 for t in seq[length:]), seq
    return tuple(seq[:length])


@pytest.mark.parametrize("length_penalty", [0.0, 0.6, 2.0])
def test_beam_matches_exhaustive_search_and_n_best(length_penalty):
    sentences, max_lengths, beam, n_best = [0, 1, 2], [4, 3, 4], 64, 6
    out = beam_search(
        hash_step,
        make_cache(sentences, beam),
        batch_size=3,
        beam_size=beam,
        max_decode_len=5,
        max_lengths=jnp.array(max_lengths),
        length_penalty=length_penalty,
        eos_id=EOS,
        num_best=n_best,
    )
    assert out.sequences.shape == (3, n_best, 5) and out.scores.shape == (3, n_best)
    for b, (sentence, max_len) in enumerate(zip(sentences, max_lengths, strict=True)):
        expected = exhaustive(sentence, max_len, length_penalty)[:n_best]
        got = [_unpad(out.sequences[b, i], int(out.lengths[b, i])) for i in range(n_best)]
        assert got == [seq for seq, _ in expected]
        np.testing.assert_allclose(out.scores[b], [score for _, score in expected], rtol=1e-5)
        assert np.all(np.diff(np.asarray(out.scores[b])) <= 0)  # best first


def peaked_step(tokens, cache):
    """`hash_step` made confident: its argmax gets logit 10, the rest 0, so no side exit beats greedy."""
    logits, cache = hash_step(tokens, cache)
    peaked = jnp.where(logits == logits.max(axis=-1, keepdims=True), 10.0, 0.0)
    return jnp.where(jnp.isfinite(logits), peaked, -jnp.inf), cache


@pytest.mark.parametrize("length_penalty", [0.0, 0.6])
def test_beam_size_one_equals_greedy(length_penalty):
    """Beam size 1 keeps the best EOS side exit of every step too; on a confident model that is greedy."""
    sentences = list(range(6))
    out = beam_search(
        peaked_step,
        make_cache(sentences, 1),
        batch_size=6,
        beam_size=1,
        max_decode_len=7,
        length_penalty=length_penalty,
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
        length_penalty=0.6,
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
    kwargs = {"beam_size": beam, "max_decode_len": 6, "length_penalty": 0.6, "eos_id": EOS}
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
        length_penalty=0.6,
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


@pytest.mark.parametrize("length_penalty", [0.0, 0.6, 2.0])
def test_early_termination_bound_allows_longer_hypotheses(length_penalty):
    """After step 1 the finished <EOS> (score log 0.7 = -0.36) beats the live "2" scored at its current length
    (log 0.29 / lp(2) = -0.91 for α = 2), yet "2"×8 reaches log 0.29 / lp(8) = -0.26: stopping needs lp(max)."""
    out = beam_search(
        long_wins_step,
        {"step": jnp.zeros((2,), jnp.int32)},
        batch_size=2,
        beam_size=1,
        max_decode_len=8,
        max_lengths=jnp.array([8, 4]),
        length_penalty=length_penalty,
        eos_id=EOS,
    )
    long_wins = [length_penalty == 2.0, False]  # sentence 1 (max 4): log 0.29 / lp(4) = -0.55 < -0.36
    for b in range(2):
        expected = [2] * [8, 4][b] if long_wins[b] else [EOS]
        assert _unpad(out.sequences[b, 0], int(out.lengths[b, 0])) == tuple(expected)


@pytest.mark.parametrize("length_penalty", [0.6, 2.0])
def test_jit_and_early_termination_do_not_change_results(length_penalty):
    beam, sentences = 2, list(range(16))
    kwargs = {"batch_size": 16, "beam_size": beam, "max_decode_len": 12, "length_penalty": length_penalty,
              "eos_id": EOS}
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
    if length_penalty == 0.6:  # with α = 2 long hypotheses keep a chance until the end on this model
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
            length_penalty=0.6,
            eos_id=EOS,
            num_best=3,
        )


def test_exhaustive_helper_counts_all_sequences():
    # 3^3 prefixes of words then EOS-or-word at max length 4, plus the shorter EOS-terminated ones.
    assert len(exhaustive(0, 4, 0.6)) == sum(2**n for n in range(3)) + 2**3 * 3
    assert len(set(itertools.chain(seq for seq, _ in exhaustive(0, 4, 0.6)))) == len(exhaustive(0, 4, 0.6))


# --- early termination on random models: stopping never changes the output, and the tests can tell ---

RANDOM_VOCAB, RANDOM_LEN, RANDOM_BATCH = 6, 10, 2


def random_tables(seed, count):
    """``count`` random logit functions of the prefix, [count, PRIME, RANDOM_VOCAB] (row = prefix hash).

    Each has its own sharpness and EOS bias, and a random share of its rows is nearly certain of one token (EOS
    or a word): the near-zero log-probabilities keep live bounds tight against the finished scores, so a stop
    rule that ends even slightly too early changes some outputs (see `test_too_aggressive_stop_rules_are_caught`).
    """
    rng = np.random.RandomState(seed)
    tables = rng.randn(count, PRIME, RANDOM_VOCAB) * rng.uniform(0.5, 4.0, (count, 1, 1))
    tables[:, :, EOS] += rng.uniform(-3.0, 1.0, (count, 1))
    peaked = rng.rand(count, PRIME) < rng.uniform(0.3, 0.9, (count, 1))  # [count, PRIME]
    token = rng.randint(1, RANDOM_VOCAB, (count, PRIME))
    tables[np.arange(count)[:, None], np.arange(PRIME), token] += peaked * rng.uniform(4.0, 12.0, (count, PRIME))
    tables[:, :, 0] = -np.inf  # PAD
    max_lengths = rng.randint(1, RANDOM_LEN + 1, (count, RANDOM_BATCH)).astype(np.int32)
    return tables.astype(np.float32), max_lengths


def run_random(tables, max_lengths, *, beam, length_penalty, num_best, early_stop, stop_at=None):
    """`_beam_search` of every random table (vmapped: one compilation, each its own loop count).

    The constant cache leaf ``stop_at`` ([count], default 0) lets a test's stop rule read a per-table step.
    """
    stop_at = jnp.zeros(len(tables), jnp.int32) if stop_at is None else jnp.asarray(stop_at, jnp.int32)

    def one(table, max_length, stop):
        def step(tokens, cache):
            h = jnp.where(tokens == 0, cache["hash"], _prefix_hash(cache["hash"], tokens))
            return table[h], {**cache, "hash": h}

        cache = make_cache(range(RANDOM_BATCH), beam)
        cache["stop_at"] = jnp.full((RANDOM_BATCH * beam,), stop)
        return _beam_search(
            step,
            cache,
            batch_size=RANDOM_BATCH,
            beam_size=beam,
            max_decode_len=RANDOM_LEN,
            max_lengths=max_length,
            length_penalty=length_penalty,
            eos_id=EOS,
            start_id=0,
            num_best=num_best,
            early_stop=early_stop,
        )

    return jax.jit(jax.vmap(one))(jnp.asarray(tables), jnp.asarray(max_lengths), stop_at)


def differing(a, b):
    """bool[count]: the outputs of two `run_random` calls differ (sequences, lengths; scores beyond rounding:
    two compilations may round the length penalty differently in the last bit)."""
    seqs = np.any(np.asarray(a.sequences) != np.asarray(b.sequences), axis=(1, 2, 3))
    lengths = np.any(np.asarray(a.lengths) != np.asarray(b.lengths), axis=(1, 2))
    scores = ~np.all(np.isclose(np.asarray(a.scores), np.asarray(b.scores), rtol=1e-6, atol=0), axis=(1, 2))
    return seqs | lengths | scores


@pytest.mark.parametrize(
    "length_penalty,beam,num_best",
    [(0.6, 4, 1), (0.0, 4, 1), (2.0, 4, 1), (-0.5, 3, 1), (0.6, 1, 1), (0.6, 4, 2), (0.6, 4, 4)]
)
def test_early_stop_equals_the_full_search_on_random_models(length_penalty, beam, num_best):
    tables, max_lengths = random_tables(1, 300)
    kwargs = {"beam": beam, "length_penalty": length_penalty, "num_best": num_best}
    early, steps = run_random(tables, max_lengths, early_stop=True, **kwargs)
    full, full_steps = run_random(tables, max_lengths, early_stop=False, **kwargs)
    assert not np.any(differing(early, full))
    assert np.all(np.asarray(full_steps) == RANDOM_LEN)
    assert np.sum(np.asarray(steps) < np.asarray(max_lengths).max(axis=1)) >= 30  # not vacuous: stops happen
    assert np.all(np.isfinite(np.asarray(early.scores[:, :, 0])))


def _rule_with(bound_fn, slack=0.0):
    """A stop rule like `_can_stop` for num_best = 1 with another bound (fn(state, max_len, length_penalty) -> [B])."""

    def can_stop(s, max_len, length_penalty, num_best):
        best = s.finished_scores[:, 0]
        no_live = s.live_logprobs[:, 0] == -jnp.inf
        return no_live | (jnp.isfinite(best) & (bound_fn(s, max_len, length_penalty) <= best + slack))

    return can_stop


def _bound(s, max_len, length_penalty):  # the correct bound, as in `_can_stop`
    lp_max = jnp.maximum(length_normalizer(s.step + 1, length_penalty), length_normalizer(max_len, length_penalty))
    return s.live_logprobs[:, 0] / lp_max


def _one_step_earlier(s, max_len, length_penalty, num_best):
    """Stops one loop step before the correct rule did (``stop_at``), once every sentence has finished one."""
    early = (s.step >= s.cache["stop_at"][0] - 1) & jnp.all(jnp.isfinite(s.finished_scores[:, 0]))
    return _rule_with(_bound)(s, max_len, length_penalty, num_best) | early


TOO_EARLY = {
    "one step earlier": _one_step_earlier,
    "bound at the next length, not max length": _rule_with(
        lambda s, max_len, length_penalty: s.live_logprobs[:, 0] / length_normalizer(s.step + 1, length_penalty)
    ),
    "slack 0.01": _rule_with(_bound, slack=0.01),
}


@pytest.mark.parametrize("rule", list(TOO_EARLY))
def test_too_aggressive_stop_rules_are_caught(rule, monkeypatch):
    """The comparison of the test above has power: each rule that stops a little too early changes outputs."""
    tables, max_lengths = random_tables(2, 500)
    kwargs = {"beam": 4, "length_penalty": 2.0, "num_best": 1}
    correct, steps = run_random(tables, max_lengths, early_stop=True, **kwargs)
    full, _ = run_random(tables, max_lengths, early_stop=False, **kwargs)
    assert not np.any(differing(correct, full))
    monkeypatch.setattr(bs, "_can_stop", TOO_EARLY[rule])
    wrong, wrong_steps = run_random(tables, max_lengths, early_stop=True, stop_at=steps, **kwargs)
    assert np.any(differing(wrong, full))
    assert np.all(np.asarray(wrong_steps) <= np.asarray(steps))


@pytest.mark.parametrize("length_penalty,beam", [(0.6, 4), (2.0, 4), (0.0, 2)])
def test_one_best_stops_no_later_than_the_worst_of_k_rule(length_penalty, beam):
    """num_best = K stops by the worst of the K finished (the rule 1-best used before): same best, more steps."""
    tables, max_lengths = random_tables(3, 300)
    kwargs = {"beam": beam, "length_penalty": length_penalty, "early_stop": True}
    one, steps_one = run_random(tables, max_lengths, num_best=1, **kwargs)
    all_k, steps_k = run_random(tables, max_lengths, num_best=beam, **kwargs)
    np.testing.assert_array_equal(np.asarray(one.sequences), np.asarray(all_k.sequences[:, :, :1]))
    np.testing.assert_array_equal(np.asarray(one.lengths), np.asarray(all_k.lengths[:, :, :1]))
    steps_one, steps_k = np.asarray(steps_one), np.asarray(steps_k)
    assert np.all(steps_one <= steps_k)
    assert np.mean(steps_one < steps_k) > 0.2 and steps_one.sum() < 0.9 * steps_k.sum()


def test_early_stop_equals_the_full_search_on_random_transformers():
    """The same on 16 randomly initialised Transformers (with their in-place cache): logits sharpened and EOS
    favoured by a random amount, so that sentences finish at many lengths and the search stops early."""
    seeds, batch, beam, length = 16, 3, 4, 12
    m = demo.get_config().model
    m.update(
        {
            "vocab_size": 12,
            "d_model": 32,
            "d_ff": 64,
            "num_heads": 4,
            "d_k": 8,
            "d_v": 8,
            "num_encoder_layers": 1,
            "num_decoder_layers": 2,
            "max_len": 16,
        }
    )
    graphdef, _ = nnx.split(Transformer(m, rngs=nnx.Rngs(0)))
    params = jax.tree.map(
        lambda *x: jnp.stack(x), *[nnx.split(Transformer(m, rngs=nnx.Rngs(s)))[1] for s in range(seeds)]
    )
    rng = np.random.RandomState(0)
    inputs = rng.randint(2, 12, (seeds, batch, 6))
    inputs[:, 1, 4:] = 0  # padding
    sharpness, eos_bias = rng.uniform(1.0, 6.0, seeds), rng.uniform(0.0, 3.0, seeds)
    max_lengths = rng.randint(3, length + 1, (seeds, batch))

    def run(early_stop):
        def one(state, inputs, sharpness, eos_bias, max_lengths):
            model = nnx.merge(graphdef, state)
            memory = model.prepare_memory(model.encode(inputs), inputs)

            def step(tokens, cache):
                logits, cache = model.decode_step(tokens, memory, cache)
                return (logits * sharpness).at[:, EOS].add(eos_bias), cache

            return _beam_search(
                step,
                model.init_cache(batch, length, beam),
                batch_size=batch,
                beam_size=beam,
                max_decode_len=length,
                max_lengths=max_lengths,
                length_penalty=0.6,
                eos_id=EOS,
                start_id=START_ID,
                num_best=1,
                early_stop=early_stop,
                reorder_fn=model.reorder_cache,
            )

        args = (inputs, sharpness.astype(np.float32), eos_bias.astype(np.float32), max_lengths.astype(np.int32))
        return jax.jit(jax.vmap(one))(params, *map(jnp.asarray, args))

    (early, steps), (full, _) = run(True), run(False)
    assert not np.any(differing(early, full))
    assert np.sum(np.asarray(steps) < max_lengths.max(axis=1)) >= 4  # not vacuous
