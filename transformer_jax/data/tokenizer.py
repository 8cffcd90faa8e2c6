"""One SentencePiece vocabulary shared by source and target (§3.4, §5.1).

The paper uses a shared source-target byte-pair encoding of ~37000 tokens for EN-DE (and a 32000 word-piece
vocabulary for EN-FR); one vocabulary is what lets the source embedding, target embedding and pre-softmax
projection share one matrix (§3.4). We train SentencePiece (BPE by default, ``config.data.tokenizer_model_type``)
once per workdir on a shuffled sample of both sides of the training data and save it as ``<workdir>/vocab.model``.

Special ids are fixed (module constants): ``PAD_ID = 0`` (never a real token; padding and the decoder's start
symbol, as in tensor2tensor), ``EOS_ID = 1`` (appended to every encoded sentence), ``UNK_ID = 2`` (unused in
practice: ``byte_fallback`` spells unknown characters as UTF-8 bytes, so nothing is lost) and ``BOS_ID = -1``
(disabled).

Text is lossless: ``decode(encode(x)) == x`` for every UTF-8 line ``x`` (the sacreBLEU references are raw text,
and tensor2tensor's subword encoder of the paper is invertible too). SentencePiece's defaults are not: its
``nmt_nfkc`` normalisation rewrites characters (``…`` → ``...``, ``½`` → ``1⁄2``, ``ﬁ`` → ``fi``, fullwidth →
ASCII, NBSP → space, NFD → NFC) and ``remove_extra_whitespaces`` strips and collapses spaces. We train with
``normalization_rule_name="identity"`` and ``remove_extra_whitespaces=False``; ``add_dummy_prefix`` stays on (the
first word is split like any word after a space, and decoding removes exactly that one added ``▁``, so leading
spaces survive). Tabs and other control characters pass through (as byte pieces when unseen). One character
cannot round-trip through SentencePiece alone: U+2581 ``▁`` is its whitespace symbol and would decode as a
space, so :class:`Tokenizer` escapes it (and the private-use escape character U+E000) before SentencePiece and
unescapes after decoding. A ``vocab.model`` trained before this keeps its own normalisation (it is stored in the
model proto): it still loads, with a warning that it is not lossless (a new workdir trains a lossless one).
"""

from __future__ import annotations

import hashlib
import io
import itertools
import logging
import os
import re
import socket
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import sentencepiece as spm
from tqdm import tqdm

from transformer_jax.data.corpus import DataError

logger = logging.getLogger(__name__)

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
BOS_ID = -1  # disabled: the decoder starts from PAD (tensor2tensor convention)
VOCAB_FILENAME = "vocab.model"
SMALL_CORPUS_SENTENCES = 1_000_000  # below this, cover every character (character_coverage = 1.0)

# SentencePiece writes a space as "▁" (U+2581), so a literal "▁" in the text would come back as a space. We escape
# it as ESC "_", and ESC itself (a private-use character) as ESC ESC, so the escaping is one-to-one.
_META, _ESC = "\u2581", "\ue000"
_ESCAPE = str.maketrans({_ESC: _ESC + _ESC, _META: _ESC + "_"})
_UNESCAPE = re.compile(f"{_ESC}([{_ESC}_])")
_LOSSLESS_PROBE = " …½ﬁ™ＡＢＣ a\u00a0b  e\u0301\tz "  # what nmt_nfkc or remove_extra_whitespaces would change


def _escape(text: str) -> str:
    return text.translate(_ESCAPE) if _ESC in text or _META in text else text


def _unescape(text: str) -> str:
    return _UNESCAPE.sub(lambda m: _ESC if m[1] == _ESC else _META, text) if _ESC in text else text


def temporary_name(path: Path) -> Path:
    """Where to write ``path`` before renaming it into place: a name no other process picks, on this host or on
    another sharing the folder (containers on several hosts may run with the same PID)."""
    return path.with_name(f"{path.name}.tmp-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


class Tokenizer:
    """A SentencePiece model with the fixed special ids above.

    Args:
        model_proto: the serialized SentencePiece model (the content of a ``.model`` file).
    """

    def __init__(self, model_proto: bytes):
        self._proto = bytes(model_proto)
        self._sp = spm.SentencePieceProcessor(model_proto=self._proto)
        ids = (self._sp.pad_id(), self._sp.eos_id(), self._sp.unk_id(), self._sp.bos_id())
        if ids != (PAD_ID, EOS_ID, UNK_ID, BOS_ID):
            raise DataError(
                f"SentencePiece model has special ids pad/eos/unk/bos = {ids}; this library needs "
                f"{(PAD_ID, EOS_ID, UNK_ID, BOS_ID)}. Train a new one (delete the vocab file)."
            )

    # -- construction ------------------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike, expected_vocab_size: int | None = None) -> Tokenizer:
        """Loads a ``.model`` file; raises :class:`DataError` if its size differs from ``expected_vocab_size``."""
        path = Path(path)
        if not path.is_file():
            raise DataError(f"Tokenizer model not found: {path}")
        tokenizer = cls(path.read_bytes())
        if tokenizer.decode(tokenizer.encode(_LOSSLESS_PROBE)) != _LOSSLESS_PROBE:
            logger.warning(
                "The tokenizer %s normalises text (an older vocabulary): decoded text may differ from the "
                "input (e.g. '…' → '...', spaces collapsed). Use a new workdir for a lossless one.",
                path,
            )
        if expected_vocab_size is not None and tokenizer.vocab_size != expected_vocab_size:
            raise DataError(
                f"The tokenizer {path} has {tokenizer.vocab_size} pieces but config.model.vocab_size is "
                f"{expected_vocab_size}. Use the workdir's vocabulary size, or a new workdir to train a new one."
            )
        return tokenizer

    @classmethod
    def train(
        cls,
        sentences: Iterable[str],
        vocab_size: int,
        model_type: str = "bpe",
        character_coverage: float | None = None,
        num_threads: int | None = None,
        split_by_unicode_script: bool = True,
    ) -> Tokenizer:
        """Trains a shared vocabulary of exactly ``vocab_size`` pieces on ``sentences`` (in memory, no files).

        Args:
            sentences: the (already sampled and shuffled) training sentences of both languages.
            vocab_size: number of pieces, specials and the 256 byte-fallback pieces included.
            model_type: "bpe" (the paper's byte-pair encoding), "unigram", "char" or "word".
            character_coverage: fraction of characters given their own piece (the rest fall back to bytes);
                default 1.0 for small samples, 0.9995 above :data:`SMALL_CORPUS_SENTENCES`.
            num_threads: trainer threads (default: all cores).
            split_by_unicode_script: SentencePiece's rule that no piece spans two scripts (letters and punctuation);
                off, a frequent word such as the parser's ``(NP`` becomes one piece instead of ``▁(`` ``NP``.

        Raises:
            DataError: the sample is too small for ``vocab_size`` (the message suggests a size that fits).
        """
        sentences = sentences if isinstance(sentences, Sequence) else list(sentences)
        sentences = [_escape(s) for s in sentences if s]
        if not sentences:
            raise DataError("Cannot train a tokenizer: the training sample has no non-empty sentences.")
        if character_coverage is None:
            character_coverage = 1.0 if len(sentences) < SMALL_CORPUS_SENTENCES else 0.9995
        writer = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(tqdm(sentences, desc="SentencePiece", unit="sent", disable=None)),
                model_writer=writer,
                vocab_size=vocab_size,
                model_type=model_type,
                pad_id=PAD_ID,
                eos_id=EOS_ID,
                unk_id=UNK_ID,
                bos_id=BOS_ID,
                byte_fallback=True,
                normalization_rule_name="identity",  # lossless text (module docstring): no NFKC rewriting
                remove_extra_whitespaces=False,  # keep leading, trailing and repeated spaces
                add_dummy_prefix=True,  # "▁" before the first word; decode removes exactly this one
                character_coverage=character_coverage,
                input_sentence_size=0,  # the caller sampled already
                shuffle_input_sentence=False,
                num_threads=num_threads or os.cpu_count() or 1,
                split_by_unicode_script=split_by_unicode_script,
                minloglevel=2,
            )
        except RuntimeError as e:
            match = re.search(r"value <= (\d+)", str(e))
            if match:
                limit = int(match.group(1))
                raise DataError(
                    f"The tokenizer sample ({len(sentences)} sentences) is too small for vocab_size={vocab_size}: "
                    f"SentencePiece can build at most {limit} pieces. Set config.model.vocab_size <= {limit} "
                    f"(e.g. {_suggest(limit)}) or train on more data."
                ) from None
            raise DataError(f"SentencePiece training failed for vocab_size={vocab_size}: {e}") from None
        tokenizer = cls(writer.getvalue())
        logger.info("Trained a %s tokenizer with %d pieces on %d sentences.", model_type, vocab_size, len(sentences))
        return tokenizer

    def save(self, path: str | os.PathLike) -> None:
        """Writes the model atomically (a temporary file renamed into place)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temporary_name(path)
        tmp.write_bytes(self._proto)
        os.replace(tmp, path)

    # -- properties --------------------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of pieces (the model's ``vocab_size``)."""
        return self._sp.get_piece_size()

    @property
    def model_proto(self) -> bytes:
        """The serialized model."""
        return self._proto

    @property
    def fingerprint(self) -> str:
        """A short hash of the model, for caches of tokenized data."""
        return hashlib.sha256(self._proto).hexdigest()[:16]

    def id_to_piece(self, token_id: int) -> str:
        """The piece string of ``token_id``."""
        return self._sp.id_to_piece(int(token_id))

    # -- encoding ----------------------------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Encodes one sentence (any text, losslessly); ``EOS_ID`` is appended."""
        return self._sp.encode(_escape(text)) + [EOS_ID]

    def encode_batch(self, texts: Sequence[str], num_threads: int = -1) -> list[list[int]]:
        """Encodes sentences (multi-threaded in C++); ``EOS_ID`` is appended to each."""
        return [ids + [EOS_ID] for ids in self._sp.encode([_escape(t) for t in texts], num_threads=num_threads)]

    def encode_flat(
        self, texts: Sequence[str], num_threads: int = -1, bpe_dropout: float = 0.0, seed: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Encodes sentences into one flat int32 array (each followed by ``EOS_ID``) and their int32 lengths.

        With ``bpe_dropout`` > 0 each merge of the BPE is skipped with that probability (BPE-dropout, Provilkov et
        al., 2020; SentencePiece's sampling of a BPE model): another valid segmentation of the same text, which
        :meth:`decode` turns back into it. The sample is a function of ``seed``: SentencePiece's generator is
        process-wide, so it is reseeded here and the encoding runs on one thread (several threads draw from it in
        no fixed order).
        """
        escaped = [_escape(t) for t in texts]
        if bpe_dropout:
            spm.set_random_generator_seed(int(seed) % 2**32)
            pieces = self._sp.encode(escaped, enable_sampling=True, alpha=float(bpe_dropout), nbest_size=-1,
                                     num_threads=1)
        else:
            pieces = self._sp.encode(escaped, num_threads=num_threads)
        lengths = np.fromiter((len(p) + 1 for p in pieces), dtype=np.int32, count=len(pieces))
        total = int(lengths.sum())
        flat = np.empty(total, dtype=np.int32)
        eos = np.cumsum(lengths, dtype=np.int64) - 1
        is_token = np.ones(total, dtype=bool)
        is_token[eos] = False
        flat[is_token] = np.fromiter(itertools.chain.from_iterable(pieces), dtype=np.int32, count=total - len(pieces))
        flat[eos] = EOS_ID
        return flat, lengths

    def decode(self, ids: Iterable[int]) -> str:
        """Decodes ids up to the first ``EOS_ID`` (excluded); ``PAD_ID`` and negative ids are dropped."""
        out = []
        for i in np.asarray(ids if isinstance(ids, np.ndarray) else list(ids)).reshape(-1).tolist():
            if i == EOS_ID:
                break
            if i > PAD_ID:
                out.append(i)
        return _unescape(self._sp.decode(out))

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        """Decodes each row of ``batch`` with :meth:`decode`."""
        return [self.decode(ids) for ids in batch]


def _suggest(limit: int) -> int:
    """A round vocabulary size not above ``limit`` (multiples of 1000, else of 8)."""
    return limit // 1000 * 1000 if limit >= 2000 else max(8, limit // 8 * 8)


def sample_sentences(pairs: Iterable[tuple[str, str]], sample_size: int, seed: int) -> list[str]:
    """A uniform random sample of ``sample_size`` sentences from both sides of ``pairs``, shuffled.

    One pass (reservoir sampling, Algorithm R), deterministic given ``seed``; when the corpus has fewer
    sentences than ``sample_size`` it is all kept (shuffled).
    """
    if sample_size <= 0:
        raise DataError(f"config.data.tokenizer_sample_size must be positive, got {sample_size}.")
    rng = np.random.default_rng(seed)
    reservoir: list[str] = []
    seen = 0
    chunk: list[str] = []

    def flush() -> None:
        nonlocal seen
        reservoir.extend(chunk[: max(0, sample_size - len(reservoir))])
        start = seen + min(len(chunk), max(0, sample_size - seen))
        rest = chunk[start - seen :]
        if rest:  # item t (0-based) replaces a random slot with probability sample_size / (t + 1)
            slots = rng.integers(0, np.arange(start, start + len(rest)) + 1)
            for slot, s in zip(slots.tolist(), rest):
                if slot < sample_size:
                    reservoir[slot] = s
        seen += len(chunk)
        chunk.clear()

    for src, tgt in tqdm(pairs, desc="Sampling tokenizer data", unit="pair", disable=None):
        chunk.append(src)
        chunk.append(tgt)
        if len(chunk) >= 65536:
            flush()
    flush()
    order = rng.permutation(len(reservoir))
    return [reservoir[i] for i in order.tolist()]
