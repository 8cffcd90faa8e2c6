"""Data sources: aligned (source, target) sentence pairs for the train / dev / test splits (§5.1).

The paper trains on WMT 2014 English→German (4.5M pairs, dev newstest2013, test newstest2014) and English→French
(36M pairs). ``config.data.source`` names one entry of :data:`SOURCES`; every source yields ``(src, tgt)`` string
pairs translating ``config.data.source_lang`` → ``config.data.target_lang``:

* ``wmt14_ende`` / ``wmt14_enfr`` — tensorflow-datasets ``wmt14_translate`` ("de-en" / "fr-en"); dev is the
  tfds "validation" split (newstest2013), test the "test" split (newstest2014). Works without TensorFlow.
* ``multi30k_ende`` — Multi30k task 1 raw files, from ``config.data.data_dir`` or downloaded (sha256-checked).
* ``text`` — the user's aligned files ``config.data.{train,dev,test}_files = "src_path,tgt_path"`` (``.gz`` ok).
* ``synthetic`` — the built-in offline corpus, :func:`transformer_jax.data.synthetic.generate_splits`.
* ``ptb`` / ``trees`` / ``synthetic_parse`` — constituency parsing (§6.3): sentences and their linearised trees,
  :mod:`transformer_jax.data.ptb`.

Bad input raises one :class:`DataError` with a message that names the file and line. Empty lines are skipped (and
counted in :attr:`Source.num_skipped_empty`) in training data only: dev/test are never filtered (and outputs are put
back in the split's order), so an empty source line is still translated and outputs line up with the references.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import os
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

logger = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
Pair = tuple[str, str]


class DataError(ValueError):
    """Bad input data or data configuration; the message says what and where."""


class Source:
    """Base class: aligned sentence pairs of one translation task.

    Subclasses implement :meth:`_raw_pairs`; callers use :meth:`pairs` (a stream) or :meth:`load` (a list).

    Attributes:
        num_skipped_empty: per split, training pairs skipped because one side was empty (after the stream ended).
    """

    name: ClassVar[str] = ""
    languages: ClassVar[tuple[str, ...]] = ()  # languages the source has; () = any (user files)

    def __init__(self, data_config: Any):
        self.config = data_config
        self.source_lang = str(_get(data_config, "source_lang", "en"))
        self.target_lang = str(_get(data_config, "target_lang", "de"))
        if self.languages and (
            {self.source_lang, self.target_lang} - set(self.languages) or self.source_lang == self.target_lang
        ):
            raise DataError(
                f"Source {self.name!r} translates between {' and '.join(self.languages)}; got "
                f"source_lang={self.source_lang!r}, target_lang={self.target_lang!r}."
            )
        self.num_skipped_empty: dict[str, int] = {}

    def _raw_pairs(self, split: str) -> Iterator[Pair]:
        raise NotImplementedError

    def cache_key(self, split: str) -> str:
        """A string that changes whenever the pairs of ``split`` may change (for caching tokenized data)."""
        fields = ("source", "source_lang", "target_lang", "data_dir")
        return json.dumps({"split": split, **{f: str(_get(self.config, f, "")) for f in fields}}, sort_keys=True)

    def pairs(self, split: str) -> Iterator[Pair]:
        """Yields the ``(src, tgt)`` pairs of ``split`` ("train" | "dev" | "test"), whitespace-stripped.

        Training pairs with an empty side are skipped and counted; dev/test pairs are all kept, in order.
        """
        if split not in SPLITS:
            raise DataError(f"Unknown split {split!r}; valid: {', '.join(SPLITS)}.")
        skipped = 0
        for src, tgt in self._raw_pairs(split):
            src, tgt = src.strip(), tgt.strip()
            if split == "train" and (not src or not tgt):
                skipped += 1
                continue
            yield src, tgt
        self.num_skipped_empty[split] = skipped
        if skipped:
            logger.warning("%s/%s: skipped %d training pairs with an empty side.", self.name, split, skipped)

    def load(self, split: str) -> list[Pair]:
        """Returns all pairs of ``split`` as a list (see :meth:`pairs`)."""
        return list(self.pairs(split))


def _get(config: Any, field: str, default: Any = None) -> Any:
    value = getattr(config, field, default)
    return default if value is None else value


# ----------------------------------------------------------------------------------------------------------------
# Files.


def read_lines(path: str | os.PathLike) -> Iterator[str]:
    """Yields the lines of a UTF-8 text file (``.gz`` decompressed; ``-`` = standard input), without the line break.

    Only ``\n`` (or ``\r\n``) ends a line (not the other characters ``str.splitlines`` splits on, which would shift
    aligned lines); a UTF-8 byte-order mark is not part of the first line.

    Raises:
        DataError: the file is missing, or a line is not valid UTF-8 (the message names file and line number).
    """
    stdin = str(path) == "-"
    path = Path(path)
    if not stdin and (not path.exists() or path.is_dir()):  # (a device or a pipe is readable: /dev/stdin, <(...))
        raise DataError(f"File not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    lineno = 0
    try:
        with contextlib.nullcontext(sys.stdin.buffer) if stdin else opener(path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):
                if lineno == 1:
                    raw = raw.removeprefix(b"\xef\xbb\xbf")
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    name = "stdin" if stdin else path
                    raise DataError(f"{name}, line {lineno}: invalid UTF-8 ({e.reason} at byte {e.start}).") from None
                yield line.removesuffix("\n").removesuffix("\r")
    except (OSError, EOFError) as e:  # e.g. a truncated or non-gzip .gz file
        raise DataError(f"{path}: cannot read after line {lineno} ({e}).") from None


def read_parallel(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> Iterator[Pair]:
    """Yields aligned lines of two parallel files.

    Raises:
        DataError: the files have different line counts (both files and both counts are named), or see
            :func:`read_lines`. Both files are checked to exist before anything is yielded.
    """
    for p in (src_path, tgt_path):
        if not Path(p).is_file():
            raise DataError(f"File not found: {p}")
    src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
    n = 0
    for src in src_lines:
        tgt = next(tgt_lines, None)
        if tgt is None:
            n_src = n + 1 + sum(1 for _ in src_lines)
            raise _mismatch(src_path, n_src, tgt_path, n)
        n += 1
        yield src, tgt
    rest = sum(1 for _ in tgt_lines)
    if rest:
        raise _mismatch(src_path, n, tgt_path, n + rest)


def _mismatch(src_path: Any, n_src: int, tgt_path: Any, n_tgt: int) -> DataError:
    return DataError(f"Parallel files are not aligned: {src_path} has {n_src} lines but {tgt_path} has {n_tgt} lines.")


def _file_stamp(path: str | os.PathLike) -> str:
    try:
        st = os.stat(path)
        return f"{os.path.abspath(path)}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        return str(path)


# ----------------------------------------------------------------------------------------------------------------
# Sources.


class TextSource(Source):
    """The user's aligned files: ``config.data.{train,dev,test}_files = "src_path,tgt_path"`` (``.gz`` ok)."""

    name = "text"

    def _files(self, split: str) -> tuple[str, str]:
        field = f"{split}_files"
        spec = str(_get(self.config, field, ""))
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
        return json.dumps([super().cache_key(split), *map(_file_stamp, self._files(split))])


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
        data_dir = str(_get(self.config, "data_dir", ""))
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
        data_dir = str(_get(self.config, "data_dir", "")) or None
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


def synthetic_kwargs(data_config: Any) -> dict[str, Any]:
    """``config.data.synthetic`` as keyword arguments of the synthetic grammar's split generators."""
    kwargs = _get(data_config, "synthetic", {})
    return dict(kwargs.to_dict() if hasattr(kwargs, "to_dict") else kwargs)


class SyntheticSource(Source):
    """The built-in offline EN↔DE corpus (``config.data.synthetic`` = generate_splits keyword arguments)."""

    name = "synthetic"
    languages = ("en", "de")

    def __init__(self, data_config: Any):
        super().__init__(data_config)
        self._splits: dict[str, list[Pair]] | None = None

    def _kwargs(self) -> dict[str, Any]:
        return synthetic_kwargs(self.config)

    def _raw_pairs(self, split: str) -> Iterator[Pair]:
        if self._splits is None:
            from transformer_jax.data import synthetic  # lazy: only this source needs it

            self._splits = synthetic.generate_splits(**self._kwargs())
        swap = self.source_lang == "de"  # generate_splits yields (en, de)
        for en, de in self._splits[split]:
            yield (de, en) if swap else (en, de)

    def cache_key(self, split: str) -> str:
        return json.dumps([super().cache_key(split), self._kwargs()], sort_keys=True, default=str)


SOURCES: dict[str, type[Source]] = {
    cls.name: cls for cls in (Wmt14EnDeSource, Wmt14EnFrSource, Multi30kSource, TextSource, SyntheticSource)
}


def sources() -> dict[str, type[Source]]:
    """Every source by name: :data:`SOURCES` (translation) and the treebank sources of parsing (§6.3:
    ``ptb``, ``trees``, ``synthetic_parse``, in :mod:`transformer_jax.data.ptb`, which builds on this module)."""
    from transformer_jax.data import ptb

    return {**SOURCES, **{cls.name: cls for cls in (ptb.PtbSource, ptb.TreesSource, ptb.SyntheticParseSource)}}


def get_source(data_config: Any) -> Source:
    """Returns the source named by ``data_config.source`` (a key of :func:`sources`).

    Raises:
        DataError: the name is unknown (the message lists the known ones) or the languages do not fit it.
    """
    name, known = str(_get(data_config, "source", "")), sources()
    if name not in known:
        raise DataError(f"Unknown data source {name!r}; known sources: {', '.join(sorted(known))}.")
    return known[name](data_config)
