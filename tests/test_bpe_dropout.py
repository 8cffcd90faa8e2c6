"""Tests for BPE-dropout (Provilkov et al., 2020; data/bpe_dropout.py): lossless samples that are a function of
(seed, epoch), a new segmentation each epoch, aligned pairs, the max_length fallback and exact resume."""

import gzip
from pathlib import Path

import numpy as np
import pytest

from transformer_jax.configs import base
from transformer_jax.data import pipeline
from transformer_jax.data.batching import TrainBatches
from transformer_jax.data.bpe_dropout import BpeDropout
from transformer_jax.data.sources import DataError
from transformer_jax.data.tokenizer import Tokenizer, sample_sentences

MULTI30K = Path(__file__).resolve().parents[1] / "../shared/data/multi30k"


def read(lang, n=600):
    with gzip.open(MULTI30K / f"val.{lang}.gz", "rt", encoding="utf-8") as f:
        return f.read().splitlines()[:n]


@pytest.fixture(scope="module")
def texts():
    return list(zip(read("en"), read("de")))


@pytest.fixture(scope="module")
def tokenizer(texts):
    return Tokenizer.train(sample_sentences(texts, 2000, seed=0), vocab_size=1000)


def dropout(texts, tokenizer, rate=0.1, seed=0, max_length=128):
    data = pipeline.tokenize_pairs(texts, tokenizer)
    return BpeDropout(texts, tokenizer, rate, seed, max_length, data), data


def test_samples_are_lossless_and_a_function_of_seed(texts, tokenizer):
    src = [s for s, _ in texts]
    plain = tokenizer.encode_flat(src)
    a = tokenizer.encode_flat(src, bpe_dropout=0.1, seed=7)
    b = tokenizer.encode_flat(src, bpe_dropout=0.1, seed=8)
    assert np.array_equal(a[0], tokenizer.encode_flat(src, bpe_dropout=0.1, seed=7)[0])  # reseeded every call
    assert not np.array_equal(a[0], b[0])
    assert a[1].sum() > plain[1].sum() * 1.05  # skipped merges: more, shorter pieces
    for flat, lengths in (a, b):
        assert tokenizer.decode_batch(np.split(flat, np.cumsum(lengths)[:-1])) == src  # the same text
    assert np.array_equal(tokenizer.encode_flat(src, bpe_dropout=0.0, seed=7)[0], plain[0])


def test_epochs_differ_pairs_stay_aligned(texts, tokenizer):
    resample, plain = dropout(texts, tokenizer)
    e0, e1 = resample(0), resample(1)
    assert np.array_equal(resample(0).tgt, e0.tgt)
    assert not np.array_equal(e0.src, e1.src) and not np.array_equal(e0.tgt, e1.tgt)
    for data in (e0, e1):
        assert len(data) == len(plain)
        for i in (0, 17, len(texts) - 1):
            src, tgt = data.pair(i)
            assert (tokenizer.decode(src), tokenizer.decode(tgt)) == texts[i]


@pytest.mark.parametrize("sides", ["source", "target"])
def test_one_side_only(texts, tokenizer, sides):
    plain = pipeline.tokenize_pairs(texts, tokenizer)
    data = BpeDropout(texts, tokenizer, 0.1, 0, 128, plain, sides=sides)(3)
    same, sampled = ("tgt", "src") if sides == "source" else ("src", "tgt")
    assert np.array_equal(getattr(data, same), getattr(plain, same))
    assert len(getattr(data, sampled)) > len(getattr(plain, sampled))
    assert [tuple(tokenizer.decode(x) for x in data.pair(i)) for i in range(len(data))] == texts
    with pytest.raises(DataError, match="bpe_dropout_sides must be one of both, source, target"):
        BpeDropout(texts, tokenizer, 0.1, 0, 128, plain, sides="src")


def test_too_long_samples_fall_back_to_the_plain_segmentation(texts, tokenizer):
    plain = pipeline.tokenize_pairs(texts, tokenizer)
    limit = int(np.percentile(np.maximum(plain.src_lengths, plain.tgt_lengths), 90))
    resample = BpeDropout(texts, tokenizer, 0.3, 0, limit, plain)
    data = resample(0)
    longest = np.maximum(data.src_lengths, data.tgt_lengths)
    fits = np.maximum(plain.src_lengths, plain.tgt_lengths) <= limit
    assert (longest[fits] <= limit).all()
    fell_back = [i for i in np.flatnonzero(fits) if np.array_equal(data.pair(i)[0], plain.pair(i)[0])
                 and np.array_equal(data.pair(i)[1], plain.pair(i)[1])]
    assert fell_back  # at p 0.3 some pairs near the limit only fit unsampled
    assert [tuple(tokenizer.decode(x) for x in data.pair(i)) for i in range(len(data))] == texts


def batches(it, n):
    return [next(it) for _ in range(n)]


def make_iter(resample, plain):
    return TrainBatches(plain, tokens_per_batch=1024, max_length=128, num_length_buckets=2, window=200,
                        resample=resample)


def test_train_batches_resample_each_epoch_and_resume_exactly(texts, tokenizer):
    resample, plain = dropout(texts, tokenizer)
    seen = []

    def spy(epoch):
        seen.append(epoch)
        return resample(epoch)

    it = make_iter(spy, plain)
    first = batches(it, 60)  # several epochs of 600 pairs
    assert it.stats["epoch"] >= 3 and seen == list(range(it.stats["epoch"] + 1))
    targets = np.concatenate([b["targets"][b["targets"] > 0] for b in first])
    assert len(targets) > 3 * plain.tgt_lengths.sum()  # sampled pieces: longer than the plain targets

    whole = make_iter(resample, plain)
    head = batches(whole, 23)
    state = whole.get_state()
    tail = batches(whole, 37)
    resumed = make_iter(resample, plain)
    resumed.set_state(state)
    for a, b in zip(head + tail, first):
        assert all(np.array_equal(a[k], b[k]) for k in a)
    for a, b in zip(batches(resumed, 37), tail):
        assert all(np.array_equal(a[k], b[k]) for k in a)

    plain_batches = batches(make_iter(None, plain), 5)
    assert any(not np.array_equal(a["targets"], b["targets"]) for a, b in zip(plain_batches, first))
    with pytest.raises(DataError, match="seed changed|data"):  # a plain run's state does not resume a sampled one
        make_iter(resample, plain).set_state(make_iter(None, plain).get_state())


def test_train_iterator_wires_the_config(tmp_path, texts, tokenizer):
    dirs = {}
    for split in ("train", "dev"):
        for side, lang in ((0, "en"), (1, "de")):
            path = tmp_path / f"{split}.{lang}"
            path.write_text("".join(p[side] + "\n" for p in texts), encoding="utf-8")
        dirs[split] = f"{tmp_path}/{split}.en,{tmp_path}/{split}.de"
    c = base.get_config()
    c.model.vocab_size = tokenizer.vocab_size
    c.data.update(source="text", train_files=dirs["train"], dev_files=dirs["dev"], tokens_per_batch=1024,
                  max_length=128, num_length_buckets=2, shuffle_buffer=200)
    plain = pipeline.train_iterator(c, tokenizer)
    c.data.bpe_dropout = 0.1
    sampled = pipeline.train_iterator(c, tokenizer)
    a, b = next(plain), next(sampled)
    assert (b["targets"] > 0).sum() > (a["targets"] > 0).sum() * 0.5  # same budget of real tokens a step
    decoded = set()
    for _ in range(10):
        batch = next(sampled)
        for row, seg in zip(batch["targets"], batch["targets_segmentation"]):
            decoded.update(tokenizer.decode(row[seg == s]) for s in range(1, seg.max() + 1))
    assert decoded <= {t for _, t in texts} and len(decoded) > 50
    for bad, match in ((1.0, r"in \[0, 1\)"), (-0.1, r"in \[0, 1\)")):
        c.data.bpe_dropout = bad
        with pytest.raises(DataError, match=match):
            pipeline.train_iterator(c, tokenizer)
    c.data.bpe_dropout, c.data.tokenizer_model_type = 0.1, "unigram"
    with pytest.raises(DataError, match="needs a BPE vocabulary"):
        pipeline.train_iterator(c, tokenizer)
