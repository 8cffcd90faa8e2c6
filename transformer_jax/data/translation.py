"""The translation sources (§5.1): pairs of (source sentence, target sentence) in ``config.data``'s languages.

The paper trains on WMT 2014 English→German (4.5M pairs, dev newstest2013, test newstest2014) and English→French
(36M pairs). Each source translates ``config.data.source_lang`` → ``config.data.target_lang``:

* ``wmt14_ende`` / ``wmt14_enfr`` — tensorflow-datasets ``wmt14_translate`` ("de-en" / "fr-en"); dev is the
  tfds "validation" split (newstest2013), test the "test" split (newstest2014). Works without TensorFlow.
* ``multi30k_ende`` — Multi30k task 1 raw files, from ``config.data.data_dir`` or downloaded (sha256-checked).
* ``text`` — the user's aligned files ``config.data.{train,dev,test}_files = "src_path,tgt_path"`` (``.gz`` ok).
* ``synthetic`` — the built-in offline corpus, :func:`transformer_jax.data.synthetic.generate_splits`.

:mod:`transformer_jax.data.sources` registers them by name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from transformer_jax.data.corpus import DataError, Pair, Source, config_value, synthetic_kwargs
from transformer_jax.data.files import file_stamp, read_parallel

logger = logging.getLogger(__name__)


class TextSource(Source):
    """The user's aligned files: ``config.data.{train,dev,test}_files = "src_path,tgt_path"`` (``.gz`` ok)."""

    name = "text"

    def _files(self, split: str) -> tuple[str, str]:
        field = f"{split}_files"
        spec = str(config_value(self.config, field, ""))
        parts = [p.strip() for p in spec.split(",")]
        if len(parts) != 2 or not all(parts):
            raise DataError(
                f"The text source needs config.data.{field} = 'src_path,tgt_path' "
                f"({self.source_lang}→{self.target_lang}); got {spec!r}."
            )
        return parts[0], parts[1]

    def _raw_pairs(self, split: str) -> Iterator[Pair]:
        yield from read_parallel(*self._files(split))

    def cache_key(self, split: str) -> str:
        return json.dumps([super().cache_key(split), *map(file_stamp, self._files(split))])


# Multi30k task 1 (Elliott et al., 2016): 29000 / 1014 / 1000 pairs; checksums of the raw .gz files.
MULTI30K_URL = "https://github.com/multi30k/dataset/raw/master/data/task1/raw/"
MULTI30K_CACHE_DIR = "~/.cache/transformer_jax/multi30k"
MULTI30K_FILES = {"train": "train", "dev": "val", "test": "test_2016_flickr"}
MULTI30K_SHA256 = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download_multi30k(filename: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Returns the cached Multi30k file ``filename``, downloading it (sha256-verified) when absent.

    The file is written to a temporary name and renamed only after its checksum matched, so an interrupted or
    corrupted download never leaves a file behind.
    """
    cache = Path(os.path.expanduser(str(cache_dir or MULTI30K_CACHE_DIR)))
    path = cache / filename
    if path.is_file():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    url = MULTI30K_URL + filename
    tmp = path.with_name(f"{filename}.tmp{os.getpid()}")
    try:
        logger.info("Downloading %s", url)
        with urllib.request.urlopen(url, timeout=60) as response, open(tmp, "wb") as f:
            while chunk := response.read(1 << 20):
                f.write(chunk)
        digest = _sha256(tmp)
        if digest != MULTI30K_SHA256[filename]:
            raise DataError(
                f"Checksum mismatch for {url}: sha256 {digest}, expected {MULTI30K_SHA256[filename]}. "
                "Download the files yourself and set config.data.data_dir."
            )
        os.replace(tmp, path)
    except OSError as e:
        raise DataError(
            f"Could not download {url} ({e}). Without network access, copy the Multi30k task-1 raw files "
            f"({', '.join(MULTI30K_SHA256)}) to a directory and set config.data.data_dir to it."
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
    return path


class Multi30kSource(Source):
    """Multi30k task 1 EN↔DE raw files (train / val / test_2016_flickr), from ``data_dir`` or downloaded."""

    name = "multi30k_ende"
    languages = ("en", "de")

    def _path(self, split: str, lang: str) -> Path:
        filename = f"{MULTI30K_FILES[split]}.{lang}.gz"
        data_dir = str(config_value(self.config, "data_dir", ""))
        if not data_dir:
            return download_multi30k(filename)
        path = Path(os.path.expanduser(data_dir)) / filename
        if not path.is_file() and path.with_suffix("").is_file():  # an uncompressed copy is fine too
            return path.with_suffix("")
        return path

    def _raw_pairs(self, split: str) -> Iterator[Pair]:
        yield from read_parallel(self._path(split, self.source_lang), self._path(split, self.target_lang))


# tfds split names: dev = newstest2013, test = newstest2014.
WMT14_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


class Wmt14Source(Source):
    """WMT 2014 from tensorflow-datasets ``wmt14_translate/<config>`` (§5.1); no TensorFlow needed.

    ``config.data.data_dir`` is the tfds data_dir ("" = tfds' default). The dataset is downloaded and prepared on
    first use when the machine has network access. A preparation that fails (no network, a missing package) is one
    :class:`DataError` naming the URL or the package, and leaves the data_dir as it found it: tfds' partial downloads
    and empty dataset folders of that attempt are removed, so nothing half-written is mistaken for data.
    """

    tfds_config: ClassVar[str] = ""

    def _raw_pairs(self, split: str) -> Iterator[Pair]:
        name = f"wmt14_translate/{self.tfds_config}"
        data_dir = str(config_value(self.config, "data_dir", "")) or None
        try:
            import tensorflow_datasets as tfds
            from tensorflow_datasets.translate import wmt14  # noqa: F401  (registers the builder without TensorFlow)
        except ModuleNotFoundError as e:
            raise DataError(_missing_package(name, e)) from None
        root = Path(os.path.expanduser(data_dir)) if data_dir else Path(tfds.core.constants.DATA_DIR)
        before = _tree(root)
        try:
            ds = tfds.data_source(name, split=WMT14_SPLITS[split], data_dir=data_dir)
        except Exception as e:  # tfds raises many types (network, missing files, ...)
            _remove_new(root, before)
            if isinstance(e, ModuleNotFoundError):
                raise DataError(_missing_package(name, e)) from None
            url = _network_failure(e)
            if url is not None:
                raise DataError(f"Could not download {url} to prepare {name}: no network connection ({_first_line(e)})"
                                f". Prepare it where there is network (the same command), then point config.data.data_dir at "
                                f"the prepared folder.") from None
            raise DataError(
                f"Could not load {name} split {WMT14_SPLITS[split]!r} (data_dir={data_dir}): {_first_line(e)}. It is "
                "downloaded and prepared on first use with network access; or set config.data.data_dir to a prepared one."
            ) from e
        src, tgt = self.source_lang, self.target_lang
        for record in _read_records(ds):
            yield _text(record[src]), _text(record[tgt])


def _missing_package(name: str, error: ModuleNotFoundError) -> str:
    package = (error.name or str(error)).split(".")[0]
    return (f"tensorflow-datasets needs the Python package {package!r} to prepare {name}, and it is not installed: "
            f"pip install {package.replace('_', '-')} (or reinstall transformer_jax, which declares it).")


def _network_failure(error: BaseException) -> str | None:
    """The URL a download failed on for want of a network (DNS, refused, unreachable), else None."""
    import socket

    while error is not None:
        request = getattr(error, "request", None)
        url = getattr(request, "url", None) or getattr(error, "url", None)
        name = type(error).__name__
        if isinstance(error, socket.gaierror | ConnectionError | TimeoutError) or name in (
                "ConnectionError", "NameResolutionError", "MaxRetryError", "NewConnectionError", "URLError"):
            return url or "a tfds download URL"
        error = error.__cause__ or error.__context__
    return None


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


def _tree(root: Path) -> set[Path]:
    """Every path under ``root`` now (tfds' data_dir, its downloads included)."""
    return set(root.rglob("*")) if root.is_dir() else set()


def _remove_new(root: Path, before: set[Path]) -> None:
    """Removes what a failed preparation added under ``root``: new files, then new folders left empty."""
    new = _tree(root) - before
    for path in sorted((p for p in new if not p.is_dir()), reverse=True):
        path.unlink(missing_ok=True)
    for path in sorted((p for p in new if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            path.rmdir()
    if not before and root.is_dir() and not any(root.iterdir()):
        root.rmdir()


def _read_records(ds: Any, chunk: int = 4096) -> Iterator[dict]:
    """Reads a random-access source in order, in chunks where the source supports batched reads."""
    n = len(ds)
    batched = hasattr(ds, "__getitems__")
    for start in range(0, n, chunk):
        keys = list(range(start, min(start + chunk, n)))
        if batched:
            try:
                yield from ds.__getitems__(keys)
                continue
            except TypeError:  # tfds mock data sources do not implement batched reads
                batched = False
        for k in keys:
            yield ds[k]


def _text(value: str | bytes) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"Invalid UTF-8 in a tfds record: {e}") from None
    return str(value)


class Wmt14EnDeSource(Wmt14Source):
    """WMT 2014 English↔German (4.5M pairs; §5.1)."""

    name = "wmt14_ende"
    languages = ("en", "de")
    tfds_config = "de-en"


class Wmt14EnFrSource(Wmt14Source):
    """WMT 2014 English↔French (36M pairs; §5.1)."""

    name = "wmt14_enfr"
    languages = ("en", "fr")
    tfds_config = "fr-en"


class SyntheticSource(Source):
    """The built-in offline EN↔DE corpus (``config.data.synthetic`` = generate_splits keyword arguments)."""

    name = "synthetic"
    languages = ("en", "de")

    def __init__(self, data_config: Any):
        super().__init__(data_config)
        self._splits: dict[str, list[Pair]] = {}  # each split drawn once, when first read

    def _kwargs(self) -> dict[str, Any]:
        return synthetic_kwargs(self.config)

    def _raw_pairs(self, split: str) -> Iterator[Pair]:
        if split not in self._splits:
            from transformer_jax.data import synthetic  # lazy: only this source needs it

            self._splits[split] = synthetic.one_split(synthetic.generate_splits, split, **self._kwargs())
        swap = self.source_lang == "de"  # generate_splits yields (en, de)
        for en, de in self._splits[split]:
            yield (de, en) if swap else (en, de)

    def cache_key(self, split: str) -> str:
        return json.dumps([super().cache_key(split), self._kwargs()], sort_keys=True, default=str)
