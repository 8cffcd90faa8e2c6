"""Tests for the shared SentencePiece vocabulary (§3.4, §5.1): fixed special ids, lossless round trip, reuse, errors."""

import gzip
import io
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm

from transformer_jax.configs import base
from transformer_jax.data import pipeline
from transformer_jax.data.sources import DataError, read_lines
from transformer_jax.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer, sample_sentences

MULTI30K = Path(__file__).resolve().parents[1] / "../shared/data/multi30k"  # always there (CI too): no fallback

# Text that SentencePiece's defaults (nmt_nfkc, remove_extra_whitespaces) would change, and "▁" (its space symbol).
TRICKY = [
    "…",
    "½",
    "ﬁ",
    "™",
    "ＡＢＣ１２３",
    "a\u00a0b",
    "  two  leading and trailing  ",
    "tab\there",
    "e\u0301",
    "\u00e9",
    "漢字とひらがな",
    "🤖👍🏽",
    "“quotes” – dashes —",
    "a\u200db 👩\u200d💻",
    " ",
    "  ",
    "\x00\x1b[0m\x7f\r\x85\u2028\u3000",
    "\ufeffbom\u200b",
    "▁",
    " a ▁b▁ ",
    "\ue000_▁\ue000\ue000",
    "\ue000",
    "</s><pad><unk> ⁇ ",
]


def corpus():
    """Multi30k's dev set, both languages."""
    lines = []
    for lang in ("en", "de"):
        with gzip.open(MULTI30K / f"val.{lang}.gz", "rt", encoding="utf-8") as f:
            lines += f.read().splitlines()
    return lines


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.train(sample_sentences(zip(corpus(), corpus()[::-1]), 4000, seed=0), vocab_size=1000)


def test_special_ids(tokenizer):
    assert (PAD_ID, EOS_ID, UNK_ID, BOS_ID) == (0, 1, 2, -1)
    assert PAD_ID != UNK_ID
    assert tokenizer.vocab_size == 1000
    assert tokenizer.id_to_piece(PAD_ID) == "<pad>" and tokenizer.id_to_piece(EOS_ID) == "</s>"


def test_round_trip_and_eos(tokenizer):
    for text in ("A man in an orange hat.", "Zwei junge weiße Männer.", "Ünïcödé ✓ 🤖 漢字", ""):
        ids = tokenizer.encode(text)
        assert ids[-1] == EOS_ID and EOS_ID not in ids[:-1] and PAD_ID not in ids
        assert UNK_ID not in ids  # byte fallback: nothing is lost
        assert tokenizer.decode(ids) == text
    assert tokenizer.encode("") == [EOS_ID]


@pytest.fixture(scope="module")
def tricky_tokenizer():
    """A tokenizer that saw the tricky strings in training (own pieces rather than byte fallback)."""
    return Tokenizer.train(sample_sentences(zip(corpus(), corpus()[::-1]), 2000, seed=0) + TRICKY * 50, 1000)


@pytest.mark.parametrize("seen", [False, True], ids=["unseen", "seen"])
def test_any_text_round_trips(tokenizer, tricky_tokenizer, seen):
    tok = tricky_tokenizer if seen else tokenizer
    lost = [(text, tok.decode(tok.encode(text))) for text in TRICKY if tok.decode(tok.encode(text)) != text]
    assert lost == []
    assert all(UNK_ID not in ids for ids in tok.encode_batch(TRICKY))
    assert tok.decode_batch(tok.encode_batch(TRICKY)) == TRICKY
    flat, lengths = tok.encode_flat(TRICKY)
    assert tok.decode_batch(np.split(flat, np.cumsum(lengths)[:-1])) == TRICKY
    assert tok.encode("e\u0301") != tok.encode("\u00e9")  # NFD and NFC stay apart


def test_multi30k_round_trips(tokenizer):
    """Every line of every Multi30k file (58k train lines take about a second: no need to sample)."""
    for split in ("train", "val", "test_2016_flickr"):
        for lang in ("en", "de"):
            lines = list(read_lines(MULTI30K / f"{split}.{lang}.gz"))
            decoded = tokenizer.decode_batch(tokenizer.encode_batch(lines))
            lost = [(line, out) for line, out in zip(lines, decoded) if line != out]
            assert not lost, f"{split}.{lang}: {len(lost)} of {len(lines)} lines change, e.g. {lost[:3]}"


def test_normalising_vocabulary_warns_on_load(tmp_path, caplog):
    writer = io.BytesIO()  # SentencePiece's defaults: nmt_nfkc, remove_extra_whitespaces (an older vocab.model)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus()),
        model_writer=writer,
        vocab_size=400,
        pad_id=PAD_ID,
        eos_id=EOS_ID,
        unk_id=UNK_ID,
        bos_id=BOS_ID,
        byte_fallback=True,
        minloglevel=2,
    )
    Tokenizer(writer.getvalue()).save(tmp_path / "old.model")
    with caplog.at_level("WARNING"):
        old = Tokenizer.load(tmp_path / "old.model")
    assert "normalises text" in caplog.text and old.decode(old.encode("a  …")) == "a ..."
    caplog.clear()
    with caplog.at_level("WARNING"):
        Tokenizer.train(corpus(), vocab_size=400).save(tmp_path / "new.model")
        Tokenizer.load(tmp_path / "new.model")
    assert "normalises text" not in caplog.text


def test_decode_stops_at_eos_and_drops_pad(tokenizer):
    ids = tokenizer.encode("a man")
    assert tokenizer.decode([PAD_ID, *ids[:-1], PAD_ID, EOS_ID, *tokenizer.encode("junk")]) == "a man"
    assert tokenizer.decode(np.asarray(ids + [0, 0], np.int32)) == "a man"
    assert tokenizer.decode_batch([ids, [EOS_ID]]) == ["a man", ""]


def test_encode_batch_and_flat_agree(tokenizer):
    texts = ["a man runs", "", "die Straße"]
    batch = tokenizer.encode_batch(texts)
    assert batch == [tokenizer.encode(t) for t in texts]
    flat, lengths = tokenizer.encode_flat(texts)
    assert lengths.tolist() == [len(b) for b in batch] and flat.tolist() == [i for ids in batch for i in ids]


def test_sample_is_deterministic_and_covers_both_sides():
    pairs = [(f"en{i}", f"de{i}") for i in range(1000)]
    a, b = sample_sentences(pairs, 300, seed=1), sample_sentences(pairs, 300, seed=1)
    assert a == b and len(a) == len(set(a)) == 300 and a != sample_sentences(pairs, 300, seed=2)
    assert any(s.startswith("en") for s in a) and any(s.startswith("de") for s in a)
    assert sorted(sample_sentences(pairs[:10], 300, seed=0)) == sorted(s for p in pairs[:10] for s in p)


def test_too_small_corpus_suggests_a_size():
    with pytest.raises(DataError, match=r"vocab_size=5000.*<= \d+"):
        Tokenizer.train(["a tiny corpus", "ein kleines Korpus"] * 10, vocab_size=5000)


def test_build_tokenizer_trains_once_and_reuses(tmp_path, tokenizer):
    config = base.get_config()
    config.data.source, config.data.train_files = "text", f"{tmp_path}/x.en,{tmp_path}/x.de"
    config.model.vocab_size = 1000
    tokenizer.save(tmp_path / "vocab.model")  # a workdir with a vocabulary: no data is read
    loaded = pipeline.build_tokenizer(config, tmp_path)
    assert loaded.model_proto == tokenizer.model_proto and loaded.fingerprint == tokenizer.fingerprint
    config.model.vocab_size = 2000
    with pytest.raises(DataError, match="1000 pieces but config.model.vocab_size is 2000"):
        pipeline.build_tokenizer(config, tmp_path)
    with pytest.raises(DataError, match="File not found"):  # no vocabulary, no data: nothing is written
        pipeline.build_tokenizer(config, tmp_path / "fresh")
    assert not (tmp_path / "fresh" / "vocab.model").exists()


def test_split_by_script_off_makes_each_tree_bracket_one_piece():
    """config.data.tokenizer_split_by_script: SentencePiece keeps letters and punctuation apart unless it is off, so
    the parser's "(NP" is two pieces by default and one without the split (the parsing demo's shorter targets)."""
    trees = ["(S (NP XX XX )NP (VP XX (NP XX )NP )VP XX )S", "(S (NP XX )NP (VP XX (PP XX (NP XX XX )NP )PP )VP )S"] * 200
    pieces = {}
    for split in (True, False):
        tokenizer = Tokenizer.train(trees, vocab_size=275, split_by_unicode_script=split)
        pieces[split] = [tokenizer.id_to_piece(i) for i in tokenizer.encode(trees[0])[:-1]]
        assert tokenizer.decode(tokenizer.encode(trees[1])) == trees[1]
    assert pieces[True][:2] == ["▁(", "S"] and not any(p[1:2] in "()" and p[2:] for p in pieces[True])
    assert {"▁(NP", "▁)NP"} <= set(pieces[False]) and len(pieces[False]) < len(pieces[True])
