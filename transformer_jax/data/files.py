"""The user's text files: UTF-8 lines, aligned parallel files, and a stamp that changes when a file does.

Shared by the sources that read files (:mod:`~transformer_jax.data.translation`'s text and Multi30k sources,
:mod:`~transformer_jax.data.ptb`'s treebanks) and by decoding, which reads its input with :func:`read_lines`.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from transformer_jax.data.corpus import DataError, Pair


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


def file_stamp(path: str | os.PathLike) -> str:
    """Absolute path, size and modification time of a file (its path alone when it cannot be read): part of the
    cache key of the tokenized data read from it, so an edited file is read again."""
    try:
        st = os.stat(path)
        return f"{os.path.abspath(path)}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        return str(path)
