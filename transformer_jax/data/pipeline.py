"""The data pipeline, config → tokenizer → per-host batch iterators (§5.1).

    tokenizer = prepare(config, workdir)                      # once, before training: data, vocab.model, tokens
    tokenizer = build_tokenizer(config, workdir)              # trains <workdir>/vocab.model once, then reuses it
    batches = train_iterator(config, tokenizer, row_multiple=dp * accum,
                             process_index=jax.process_index(), process_count=jax.process_count(),
                             cache_dir=workdir)               # infinite; get_state()/set_state() for resume
    src_texts, ref_texts, dev_batches = eval_data(config, tokenizer, "dev")

Contract with the trainer (global arrays are built there, not here): each training batch is a dict of int32
``[rows / process_count, L]`` numpy arrays (``inputs``, ``targets``, ``*_segmentation``, ``*_position``; pad id 0)
holding this host's contiguous slice of the global ``[rows, L]`` batch; the trainer calls
``jax.make_array_from_process_local_data(sharding, local_array)`` per key with the batch axis sharded over the
data-parallel mesh axes, then splits ``rows`` into ``grad_accum_steps`` micro-batches (``row_multiple`` = data
parallel size × grad_accum_steps makes every split even). Save ``batches.get_state()`` (JSON) with each checkpoint
and call ``set_state`` after restoring: the data position is then exact. ``batches.stats["fill_rate"]`` is the
running share of real tokens. Every host must call these functions (same config → same tokenizer and plan).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from transformer_jax.data.batching import Batch, TokenizedPairs, TrainBatches, eval_batches
from transformer_jax.data.bpe_dropout import BpeDropout
from transformer_jax.data.corpus import DataError, Source
from transformer_jax.data.sources import get_source
from transformer_jax.data.tokenizer import VOCAB_FILENAME, Tokenizer, sample_sentences, temporary_name

logger = logging.getLogger(__name__)

ENCODE_CHUNK = 20_000  # pairs per SentencePiece call (multi-threaded in C++)


def build_tokenizer(config: Any, workdir: str | os.PathLike, source: Source | None = None) -> Tokenizer:
    """Loads ``<workdir>/vocab.model``, or trains it on the training data (both sides) and saves it.

    Training samples ``config.data.tokenizer_sample_size`` sentences (seed ``config.seed``) and builds exactly
    ``config.model.vocab_size`` pieces of type ``config.data.tokenizer_model_type`` (pieces within one script unless
    ``config.data.tokenizer_split_by_script`` is False).

    Raises:
        DataError: a saved vocabulary has another size than ``config.model.vocab_size``, the corpus is too small
            for it, or the training data is bad. Nothing is written unless training succeeded.
    """
    path = Path(workdir) / VOCAB_FILENAME
    vocab_size = int(config.model.vocab_size)
    if path.is_file():
        logger.info("Reusing tokenizer %s", path)
        return Tokenizer.load(path, expected_vocab_size=vocab_size)
    source = source or get_source(config.data)
    sample = sample_sentences(source.pairs("train"), int(config.data.tokenizer_sample_size), int(config.seed))
    tokenizer = Tokenizer.train(sample, vocab_size=vocab_size, model_type=str(config.data.tokenizer_model_type),
                                split_by_unicode_script=bool(config.data.get("tokenizer_split_by_script", True)))
    tokenizer.save(path)
    logger.info("Saved tokenizer (%d pieces) to %s", tokenizer.vocab_size, path)
    return tokenizer


def tokenize_pairs(
    pairs: Iterable[tuple[str, str]], tokenizer: Tokenizer, desc: str = "Tokenizing", chunk: int = ENCODE_CHUNK
) -> TokenizedPairs:
    """Encodes a stream of ``(src, tgt)`` pairs into flat arrays (EOS appended), in multi-threaded chunks."""
    src_chunks, tgt_chunks = [], []
    for srcs, tgts in tqdm(_chunks(pairs, chunk), desc=desc, unit=f"×{chunk} pairs", disable=None):
        src_chunks.append(tokenizer.encode_flat(srcs))
        tgt_chunks.append(tokenizer.encode_flat(tgts))
    return TokenizedPairs.from_chunks(src_chunks, tgt_chunks)


def _chunks(pairs: Iterable[tuple[str, str]], size: int) -> Iterator[tuple[list[str], list[str]]]:
    srcs: list[str] = []
    tgts: list[str] = []
    for src, tgt in pairs:
        srcs.append(src)
        tgts.append(tgt)
        if len(srcs) == size:
            yield srcs, tgts
            srcs, tgts = [], []
    if srcs:
        yield srcs, tgts


PREPARED_FILE = "data_prepared.json"  # written last by prepare(): what hosts other than process 0 wait for


def prepare(config: Any, workdir: str | os.PathLike) -> Tokenizer:
    """Everything a run's data needs before its first step, done once: the source's splits downloaded and prepared
    (tensorflow-datasets downloads and converts WMT14), the vocabulary trained (``vocab.model``) and the training pairs
    tokenized (``tokens-train-*.npz``). Records it last in ``<workdir>/data_prepared.json`` (:func:`prepared_key`),
    or the error that stopped it, for the hosts that wait (train/trainer.py: they do so outside any collective).

    `transformer-jax train --prepare_only` runs it alone, before a multi-host job; a training start runs it on
    process 0 when it has not been done.
    """
    marker = Path(workdir) / PREPARED_FILE
    try:
        tokenizer = build_tokenizer(config, workdir)
        tokenized_split(config, tokenizer, "train", workdir)
        for split in ("dev", "test"):
            get_source(config.data).load(split)
        record = {"key": prepared_key(config, tokenizer)}
    except DataError as e:
        record = {"error": str(e)}
        _write_json(marker, record)
        raise
    _write_json(marker, record)
    return tokenizer


def prepared_key(config: Any, tokenizer: Tokenizer) -> str:
    """What the prepared data depends on: the source (its files, splits' cache keys) and the vocabulary."""
    source = get_source(config.data)
    return hashlib.sha256("|".join([*map(source.cache_key, ("train", "dev", "test")), tokenizer.fingerprint])
                          .encode()).hexdigest()[:16]


def read_prepared(workdir: str | os.PathLike) -> dict | None:
    """``data_prepared.json`` of ``workdir`` ({"key"} or {"error"}), None while there is none."""
    try:
        with open(Path(workdir) / PREPARED_FILE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_json(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)


def tokenized_split(
    config: Any, tokenizer: Tokenizer, split: str, cache_dir: str | os.PathLike | None = None
) -> TokenizedPairs:
    """The tokenized pairs of ``split``, cached as ``<cache_dir>/tokens-<split>-<hash>.npz`` when given.

    The cache key covers the source, its files and the tokenizer; the cache file is renamed into place only when
    complete, so a killed run never leaves a partial one.
    """
    source = get_source(config.data)
    path = None
    if cache_dir:
        key = hashlib.sha256(f"{source.cache_key(split)}|{tokenizer.fingerprint}".encode()).hexdigest()[:16]
        path = Path(cache_dir) / f"tokens-{split}-{key}.npz"
        if path.is_file():
            logger.info("Reusing tokenized %s data %s", split, path)
            return TokenizedPairs.load(str(path))
    data = tokenize_pairs(source.pairs(split), tokenizer, desc=f"Tokenizing {split}")
    data.num_skipped_empty = source.num_skipped_empty.get(split, 0)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temporary_name(path)
        data.save(str(tmp))
        os.replace(tmp, path)
    return data


def train_iterator(
    config: Any,
    tokenizer: Tokenizer,
    row_multiple: int = 1,
    process_index: int = 0,
    process_count: int = 1,
    cache_dir: str | os.PathLike | None = None,
) -> TrainBatches:
    """The infinite training batch iterator of this host (§5.1: ~``tokens_per_batch`` tokens per side per step).

    Args:
        config: the run config (``config.data.*``, ``config.seed``).
        tokenizer: from :func:`build_tokenizer`.
        row_multiple: data-parallel size × grad_accum_steps; global rows per batch are a multiple of it.
        process_index, process_count: ``jax.process_index()``, ``jax.process_count()``.
        cache_dir: where to cache the tokenized training data (e.g. the workdir); None = no cache.
    """
    _check_vocab(config, tokenizer)
    data = tokenized_split(config, tokenizer, "train", cache_dir)
    d = config.data
    resample = None
    rate = float(d.get("bpe_dropout", 0.0))
    if rate:
        if str(d.tokenizer_model_type) != "bpe":
            raise DataError(f"config.data.bpe_dropout={rate} needs a BPE vocabulary, but "
                            f"config.data.tokenizer_model_type is {d.tokenizer_model_type!r}.")
        pairs = list(tqdm(get_source(d).pairs("train"), desc="BPE-dropout: reading the training texts", disable=None))
        resample = BpeDropout(pairs, tokenizer, rate, int(config.seed), int(d.max_length), data,
                              sides=str(d.get("bpe_dropout_sides", "both")))
    return TrainBatches(
        data,
        tokens_per_batch=int(d.tokens_per_batch),
        max_length=int(d.max_length),
        num_length_buckets=int(d.num_length_buckets),
        seed=int(config.seed),
        row_multiple=int(row_multiple),
        process_index=int(process_index),
        process_count=int(process_count),
        pack=bool(d.pack),
        window=int(d.shuffle_buffer),
        resample=resample,
    )


def eval_data(
    config: Any, tokenizer: Tokenizer, split: str = "dev", batch_size: int | None = None
) -> tuple[list[str], list[str], list[Batch]]:
    """The dev or test split: ``(source texts, reference texts, batches)``; texts in the split's order, batches
    grouped by length (each row's ``index`` is its sentence's position in the split).

    Batches come from :func:`~transformer_jax.data.batching.eval_batches` (``batch_size`` defaults to
    ``config.decode.batch_size``; sentences over ``config.model.max_len`` tokens are truncated, never dropped).
    """
    if split == "train":
        raise DataError("eval_data is for 'dev' or 'test'; use train_iterator for training data.")
    _check_vocab(config, tokenizer)
    pairs = get_source(config.data).load(split)
    src_texts = [s for s, _ in pairs]
    ref_texts = [t for _, t in pairs]
    src_ids = tokenizer.encode_batch(src_texts)
    tgt_ids = tokenizer.encode_batch(ref_texts)
    if batch_size is None:
        batch_size = int(config.decode.batch_size) if "decode" in config else 64
    batches = eval_batches(list(zip(src_ids, tgt_ids)), batch_size=batch_size, max_len=int(config.model.max_len))
    return src_texts, ref_texts, batches


def _check_vocab(config: Any, tokenizer: Tokenizer) -> None:
    if tokenizer.vocab_size != int(config.model.vocab_size):
        raise DataError(
            f"The tokenizer has {tokenizer.vocab_size} pieces but config.model.vocab_size is {config.model.vocab_size}."
        )


def pipeline_summary(batches: TrainBatches) -> dict[str, Any]:
    """A JSON-able description of the training data (for the run's log): sizes, shapes, dropped pairs."""
    lengths = np.maximum(batches.data.src_lengths, batches.data.tgt_lengths)
    return {
        "pairs": len(batches.data),
        "pairs_kept": len(batches.valid_ids),
        "dropped_too_long": batches.num_dropped_too_long,
        "skipped_empty": batches.data.num_skipped_empty,
        "mean_length": float(lengths.mean()) if len(lengths) else 0.0,
        "shapes": batches.shapes,
    }
