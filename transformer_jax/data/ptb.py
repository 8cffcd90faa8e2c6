"""Penn Treebank WSJ as (sentence, linearised tree) pairs for constituency parsing (§6.3).

The paper trains on the WSJ portion of the Penn Treebank (about 40K sentences) with the standard split: sections
02–21 train (39,832 trees), 22 development (1,700), 23 test (2,416). The treebank is licensed by the LDC and never
downloaded: point ``config.data.data_dir`` at your copy, the folder that holds ``wsj/00`` … ``wsj/24`` (e.g.
``treebank_3/parsed/mrg``) or the numbered section folders themselves, each with ``wsj_NNNN.mrg`` files (``.MRG``
too). Each pair is ``(words, linearize(tree))`` of the normalised tree
(:func:`transformer_jax.parsing.trees.normalize`: no empty elements or function tags), so the input has the
words of the tree, without traces.

Two sources follow :mod:`transformer_jax.data.corpus` (``Source._raw_pairs``, :class:`DataError`):

* ``ptb`` (:class:`PtbSource`) — a folder of ``.mrg`` files in ``config.data.data_dir``, split as
  ``config.data.ptb_split`` says (:func:`split_files`): ``wsj`` (the default) takes WSJ's sections from the LDC
  folder; ``ratio:80,10,10`` splits any folder's ``.mrg`` files (e.g. NLTK's 199-file WSJ sample) by file, in name
  order, in those proportions; ``list:PATH`` reads which files go where from a text file of ``SPLIT GLOB`` lines;
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
from transformer_jax.parsing.trees import XX, Tree, TreeError, linearize, normalize, read_trees, tree_symbols

WSJ_SPLITS: dict[str, tuple[int, ...]] = {"train": tuple(range(2, 22)), "dev": (22,), "test": (23,)}
_SECTION = re.compile(r"\d\d")


def _folder(root: str | os.PathLike) -> Path:
    """``root`` with ``~`` expanded; a DataError when it is not a folder."""
    folder = Path(os.path.expanduser(str(root)))
    if not folder.is_dir():
        raise DataError(f"Penn Treebank folder not found: {folder}")
    return folder


def find_sections(root: str | os.PathLike) -> dict[int, Path]:
    """The WSJ section folders under ``root`` (``root/wsj/NN`` or ``root/NN``), by section number.

    Raises:
        DataError: ``root`` is not a folder, or holds no numbered section folders.
    """
    root = _folder(root)
    for base in (root / "wsj", root / "WSJ", root):
        if base.is_dir():
            sections = {int(p.name): p for p in base.iterdir() if p.is_dir() and _SECTION.fullmatch(p.name)}
            if sections:
                return sections
    raise DataError(f"{root}: no WSJ section folders; expected {root}/wsj/00 … 24 (or {root}/00 … 24) of .mrg files.")


def split_files(root: str | os.PathLike, split: str, rule: str = "wsj") -> list[Path]:
    """The ``.mrg`` files of ``split`` under ``root`` as ``rule`` (``config.data.ptb_split``) assigns them, in order.

    * ``wsj`` — WSJ's sections: "train" 02–21, "dev" 22, "test" 23 (§6.3), each section's files in name order.
    * ``ratio:A,B,C`` — every ``.mrg`` file under ``root`` (any depth) in path order, cut by file into train, dev and
      test in the proportions A:B:C; contiguous, as WSJ's sections are, so an article never straddles two splits.
    * ``list:PATH`` — a text file whose lines are ``SPLIT GLOB [GLOB …]`` (globs relative to ``root``, ``#``
      comments): the files each split's globs match, in path order.

    Raises:
        DataError: an unknown split or rule, a missing section (all are named), a section or split without ``.mrg``
            files, or a list that puts one file in two splits.
    """
    if split not in WSJ_SPLITS:
        raise DataError(f"Unknown split {split!r}; valid: {', '.join(SPLITS)}.")
    kind, _, argument = str(rule).partition(":")
    if kind == "wsj" and not argument:
        return _wsj_files(root, split)
    if kind == "ratio":
        return _ratio_files(root, split, argument)
    if kind == "list" and argument:
        return _listed_files(root, split, argument)
    raise DataError(f"config.data.ptb_split={rule!r}: expected wsj, ratio:A,B,C (e.g. ratio:80,10,10) or list:PATH.")


def _is_mrg(path: Path) -> bool:
    return path.suffix.lower() == ".mrg" and path.is_file()


def _wsj_files(root: str | os.PathLike, split: str) -> list[Path]:
    sections = find_sections(root)
    missing = [f"{s:02d}" for s in WSJ_SPLITS[split] if s not in sections]
    if missing:
        raise DataError(f"{root}: WSJ section(s) {', '.join(missing)} of the {split} split not found.")
    files: list[Path] = []
    for s in WSJ_SPLITS[split]:
        found = sorted(p for p in sections[s].iterdir() if _is_mrg(p))
        if not found:
            raise DataError(f"{sections[s]}: no .mrg files in WSJ section {s:02d}.")
        files += found
    return files


def _ratio_files(root: str | os.PathLike, split: str, ratio: str) -> list[Path]:
    try:
        shares = [float(x) for x in ratio.split(",")]
    except ValueError:
        shares = []
    if len(shares) != len(SPLITS) or min(shares) <= 0:
        raise DataError(f"config.data.ptb_split=ratio:{ratio}: expected three positive shares, e.g. ratio:80,10,10.")
    files = sorted(p for p in _folder(root).rglob("*") if _is_mrg(p))
    ends = [round(len(files) * sum(shares[: i + 1]) / sum(shares)) for i in range(len(shares))]
    bounds = dict(zip(SPLITS, zip([0, *ends[:-1]], ends)))
    if any(start == end for start, end in bounds.values()):
        raise DataError(f"{root}: {len(files)} .mrg file(s) cannot be split ratio:{ratio} with a file in every split.")
    start, end = bounds[split]
    return files[start:end]


def _listed_files(root: str | os.PathLike, split: str, list_path: str) -> list[Path]:
    folder = _folder(root)
    globs: dict[str, list[str]] = {name: [] for name in SPLITS}
    for number, line in enumerate(read_lines(os.path.expanduser(list_path)), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        name, *patterns = fields
        if name not in globs or not patterns:
            raise DataError(f"{list_path}, line {number}: expected 'SPLIT GLOB …' with SPLIT one of {', '.join(SPLITS)}.")
        globs[name] += patterns
    chosen = {name: {p for g in patterns for p in folder.glob(g) if _is_mrg(p)} for name, patterns in globs.items()}
    for name, files in chosen.items():
        if not files:
            raise DataError(f"{list_path}: no .mrg file under {folder} for the {name} split.")
    for other in SPLITS:
        shared = chosen[split] & chosen[other] if other != split else set()
        if shared:
            raise DataError(f"{list_path}: {min(shared)} is in both the {split} and the {other} split.")
    return sorted(chosen[split])


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


def ptb_split_trees(root: str | os.PathLike, split: str, rule: str = "wsj") -> Iterator[Tree]:
    """The trees of a split (``rule`` as in :func:`split_files`) as read (e.g. the gold trees for EVALB), file by file."""
    for _, tree in read_tree_files(split_files(root, split, rule)):
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

    def tree_symbols(self) -> tuple[list[str], list[str]]:
        """The constituent labels and leaf symbols an output may use (the tree constraint's): those of the training
        targets (:func:`~transformer_jax.parsing.trees.tree_symbols`)."""
        return tree_symbols((target for _, target in self.pairs("train")), self._pos_tags())

    def gold_trees(self, split: str) -> list[Tree]:
        """The normalised gold trees of ``split`` (with POS tags), in the order of :meth:`pairs`."""
        return list(self._trees(split))

    def cache_key(self, split: str) -> str:
        return json.dumps([super().cache_key(split), self._pos_tags()])


class PtbSource(TreebankSource):
    """Penn Treebank ``.mrg`` files in ``config.data.data_dir``: WSJ's sections 02–21 / 22 / 23 of the LDC copy (§6.3),
    or any folder split by ``config.data.ptb_split`` (:func:`split_files`)."""

    name = "ptb"

    def _root(self) -> str:
        root = str(config_value(self.config, "data_dir", ""))
        if not root:
            raise DataError(
                "The ptb source needs config.data.data_dir = your Penn Treebank folder (the one holding wsj/00 … 24)."
            )
        return root

    def _files(self, split: str) -> list[Path]:
        return split_files(self._root(), split, str(config_value(self.config, "ptb_split", "wsj")))

    def _trees(self, split: str) -> Iterator[Tree]:
        yield from normalized_trees(self._files(split))

    def cache_key(self, split: str) -> str:
        return json.dumps([super().cache_key(split), *map(file_stamp, self._files(split))])


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
    empty elements or function tags), so they are used as generated and each split is kept in memory once read.
    """

    name = "synthetic_parse"

    def __init__(self, data_config: object):
        super().__init__(data_config)
        self._splits: dict[str, list[Tree]] = {}  # each split drawn once, when first read

    def _kwargs(self) -> dict:
        return synthetic_kwargs(self.config)

    def _trees(self, split: str) -> Iterator[Tree]:
        if split not in self._splits:
            from transformer_jax.data import synthetic  # lazy: only this source needs it

            pairs = synthetic.one_split(synthetic.generate_parse_splits, split, **self._kwargs())
            self._splits[split] = [tree for _, tree in pairs]
        yield from self._splits[split]

    def tree_symbols(self) -> tuple[list[str], list[str]]:
        """The grammar's own labels and tags (:mod:`transformer_jax.data.synthetic_trees`), without drawing the training
        pairs again."""
        from transformer_jax.data.synthetic_trees import PHRASE_LABELS, POS_TAGS  # lazy, as above

        return sorted(PHRASE_LABELS), sorted(POS_TAGS) if self._pos_tags() else [XX]

    def cache_key(self, split: str) -> str:
        return json.dumps([super().cache_key(split), self._kwargs()], sort_keys=True, default=str)
