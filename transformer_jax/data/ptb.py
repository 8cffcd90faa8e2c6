"""Penn Treebank WSJ as (sentence, linearised tree) pairs for constituency parsing (§6.3).

The paper trains on the WSJ portion of the Penn Treebank (about 40K sentences) with the standard split: sections
02–21 train (39,832 trees), 22 development (1,700), 23 test (2,416). The treebank is licensed by the LDC and never
downloaded: point ``config.data.data_dir`` at your copy, the folder that holds ``wsj/00`` … ``wsj/24`` (e.g.
``treebank_3/parsed/mrg``) or the numbered section folders themselves, each with ``wsj_NNNN.mrg`` files (``.MRG``
too). Each pair is ``(words, linearize(tree))`` of the normalised tree
(:func:`transformer_jax.parsing.trees.normalize`: no empty elements or function tags), so the input has the
words of the tree, without traces.

Two sources follow :mod:`transformer_jax.data.corpus` (``Source._raw_pairs``, :class:`DataError`):

* ``ptb`` (:class:`PtbSource`) — the LDC folder in ``config.data.data_dir``;
* ``trees`` (:class:`TreesSource`) — the user's bracketed-tree files ``config.data.{train,dev,test}_files`` (one
  path each, one tree per line as in the usual ``02-21.10way.clean`` files; ``.gz`` ok).

``config.data.pos_tags`` (default False) writes POS tags instead of Vinyals et al.'s ``XX`` in the output.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from transformer_jax.data.corpus import SPLITS, DataError, Pair, Source, config_value, synthetic_kwargs
from transformer_jax.data.files import file_stamp, read_lines
from transformer_jax.parsing.trees import Tree, TreeError, linearize, normalize, read_trees

WSJ_SPLITS: dict[str, tuple[int, ...]] = {"train": tuple(range(2, 22)), "dev": (22,), "test": (23,)}
_SECTION = re.compile(r"\d\d")


def find_sections(root: str | os.PathLike) -> dict[int, Path]:
    """The WSJ section folders under ``root`` (``root/wsj/NN`` or ``root/NN``), by section number.

    Raises:
        DataError: ``root`` is not a folder, or holds no numbered section folders.
    """
    root = Path(os.path.expanduser(str(root)))
    if not root.is_dir():
        raise DataError(f"Penn Treebank folder not found: {root}")
    for base in (root / "wsj", root / "WSJ", root):
        if base.is_dir():
            sections = {int(p.name): p for p in base.iterdir() if p.is_dir() and _SECTION.fullmatch(p.name)}
            if sections:
                return sections
    raise DataError(f"{root}: no WSJ section folders; expected {root}/wsj/00 … 24 (or {root}/00 … 24) of .mrg files.")


def split_files(root: str | os.PathLike, split: str) -> list[Path]:
    """The ``.mrg`` files of ``split`` ("train": sections 02–21, "dev": 22, "test": 23), in treebank order.

    Raises:
        DataError: an unknown split, a missing section (all are named), or a section without ``.mrg`` files.
    """
    if split not in WSJ_SPLITS:
        raise DataError(f"Unknown split {split!r}; valid: {', '.join(SPLITS)}.")
    sections = find_sections(root)
    missing = [f"{s:02d}" for s in WSJ_SPLITS[split] if s not in sections]
    if missing:
        raise DataError(f"{root}: WSJ section(s) {', '.join(missing)} of the {split} split not found.")
    files: list[Path] = []
    for s in WSJ_SPLITS[split]:
        found = sorted(p for p in sections[s].iterdir() if p.suffix.lower() == ".mrg" and p.is_file())
        if not found:
            raise DataError(f"{sections[s]}: no .mrg files in WSJ section {s:02d}.")
        files += found
    return files


def read_tree_file(path: str | os.PathLike) -> list[Tree]:
    """The trees of a bracketed file (``.mrg``, or one tree per line; ``.gz`` ok), as read (not normalised).

    Raises:
        DataError: a missing or non-UTF-8 file, or an unreadable tree (the message names file, tree and line).
    """
    text = "\n".join(read_lines(path))
    try:
        return read_trees(text)
    except TreeError as e:
        raise DataError(f"{path}: {e}") from None


def read_tree_files(paths: Iterable[str | os.PathLike]) -> Iterator[tuple[str, Tree]]:
    """The trees of bracketed files in order, as read, each with where it is ("<file>, tree <n>") for messages."""
    for path in paths:
        for number, tree in enumerate(read_tree_file(path), start=1):
            yield f"{path}, tree {number}", tree


def ptb_split_trees(root: str | os.PathLike, split: str) -> Iterator[Tree]:
    """The trees of a WSJ split as read (e.g. the gold trees for EVALB), file by file."""
    for _, tree in read_tree_files(split_files(root, split)):
        yield tree


def normalized_trees(paths: Iterable[str | os.PathLike]) -> Iterator[Tree]:
    """The `normalize`d trees of bracketed files; a tree with no word left is a DataError naming its file and number."""
    for where, tree in read_tree_files(paths):
        normalized = normalize(tree)
        if normalized is None:
            raise DataError(f"{where}: no word is left after removing -NONE- elements.")
        yield normalized


class TreebankSource(Source):
    """A source of constituency trees (§6.3): pairs are ``(words, linearize(tree))`` of the normalised trees.

    Subclasses implement :meth:`_trees`; :meth:`gold_trees` gives the same trees for scoring (EVALB needs their
    POS tags, which the linearised output replaces by ``XX``). ``config.data.pos_tags`` (default False) keeps
    POS tags in the output instead.
    """

    def _trees(self, split: str) -> Iterator[Tree]:
        """The normalised trees of ``split``, in order."""
        raise NotImplementedError

    def _pos_tags(self) -> bool:
        return bool(config_value(self.config, "pos_tags", False))

    def _raw_pairs(self, split: str) -> Iterator[Pair]:
        for number, tree in enumerate(self._trees(split), start=1):
            try:
                yield " ".join(tree.leaves()), linearize(tree, pos_tags=self._pos_tags())
            except TreeError as e:
                raise DataError(f"{self.name}/{split}, tree {number}: {e}") from None

    def gold_trees(self, split: str) -> list[Tree]:
        """The normalised gold trees of ``split`` (with POS tags), in the order of :meth:`pairs`."""
        return list(self._trees(split))

    def cache_key(self, split: str) -> str:
        return json.dumps([super().cache_key(split), self._pos_tags()])


class PtbSource(TreebankSource):
    """Penn Treebank WSJ from the user's LDC copy in ``config.data.data_dir``; splits 02–21 / 22 / 23 (§6.3)."""

    name = "ptb"

    def _root(self) -> str:
        root = str(config_value(self.config, "data_dir", ""))
        if not root:
            raise DataError(
                "The ptb source needs config.data.data_dir = your Penn Treebank folder (the one holding wsj/00 … 24)."
            )
        return root

    def _trees(self, split: str) -> Iterator[Tree]:
        yield from normalized_trees(split_files(self._root(), split))

    def cache_key(self, split: str) -> str:
        return json.dumps([super().cache_key(split), *map(file_stamp, split_files(self._root(), split))])


class TreesSource(TreebankSource):
    """The user's bracketed trees: ``config.data.{train,dev,test}_files`` = one path each, one tree per line."""

    name = "trees"

    def _file(self, split: str) -> str:
        field = f"{split}_files"
        path = str(config_value(self.config, field, "")).strip()
        if not path or "," in path:
            raise DataError(f"The trees source needs config.data.{field} = one file of bracketed trees; got {path!r}.")
        if not Path(path).is_file():
            raise DataError(f"File not found: {path} (config.data.{field})")
        return path

    def _trees(self, split: str) -> Iterator[Tree]:
        yield from normalized_trees([self._file(split)])

    def cache_key(self, split: str) -> str:
        return json.dumps([super().cache_key(split), file_stamp(self._file(split))])


class SyntheticParseSource(TreebankSource):
    """The offline parsing demo: the synthetic grammar's English sentences and their trees
    (:func:`transformer_jax.data.synthetic.generate_parse_splits`, ``config.data.synthetic`` its arguments).

    The grammar builds its trees as :class:`~transformer_jax.parsing.trees.Tree` objects already in normal form (no
    empty elements or function tags), so they are used as generated and kept in memory after the first call.
    """

    name = "synthetic_parse"

    def __init__(self, data_config: object):
        super().__init__(data_config)
        self._splits: dict[str, list[Tree]] | None = None

    def _kwargs(self) -> dict:
        return synthetic_kwargs(self.config)

    def _trees(self, split: str) -> Iterator[Tree]:
        if self._splits is None:
            from transformer_jax.data import synthetic  # lazy: only this source needs it

            splits = synthetic.generate_parse_splits(**self._kwargs())
            self._splits = {name: [tree for _, tree in pairs] for name, pairs in splits.items()}
        yield from self._splits[split]

    def cache_key(self, split: str) -> str:
        return json.dumps([super().cache_key(split), self._kwargs()], sort_keys=True, default=str)
