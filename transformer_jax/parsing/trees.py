"""Penn Treebank trees and their linearisation for parsing as sequence-to-sequence (§6.3).

The paper's English constituency parsing task (§6.3, Table 4) follows Vinyals & Kaiser et al. 2015, "Grammar as a
Foreign Language" (GaFL): the input is the sentence's words, the output the tree written as a token sequence by a
depth-first traversal (GaFL, Figure 2)::

    John has a dog .   →   (S (NP NNP )NP (VP VBZ (NP DT NN )NP )VP . )S        (pos_tags=True)
                       →   (S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S         (pos_tags=False, the default)

* Each constituent opens with ``(LABEL`` and closes with ``)LABEL`` (the closing bracket repeats the label, GaFL
  Figure 2); a POS tag stands for its word, and the words themselves are not part of the output.
* POS tags: GaFL's experiments replace every POS tag by ``XX`` (POS tags are not scored by the parsing F1), so
  ``pos_tags=False`` is the default. Every tag becomes ``XX``, punctuation included (the ``.`` in GaFL's Figure 2
  is the tag of the tagged variant). ``XX`` leaves are given back their tags for scoring (:func:`delinearize`
  ``tags=``), because EVALB finds punctuation by its tag.

Normalisation (:func:`normalize`) is the usual preparation of WSJ trees for training; each choice is one that
EVALB (COLLINS.prm, :mod:`transformer_jax.evaluate.evalb`) makes when scoring, so the model learns exactly what
is scored:

* the PTB's unlabelled outer bracket ``( (S ...) )`` (and a ``TOP``/``ROOT`` root, as tgrep and later tools
  write it; EVALB's COLLINS.prm deletes ``TOP``) is dropped when it has a single child;
* empty elements (``-NONE-`` preterminals: traces, null complementisers ``0``, ``*U*``, ``*EXP*`` ...) are removed,
  and so is every constituent left with no words (EVALB README §7.1);
* function tags and co-indices are stripped from phrase labels: ``NP-SBJ-1`` → ``NP``, ``PP-LOC=2`` → ``PP``
  (EVALB README §7.2 cuts a non-terminal label at its first ``-`` or ``=``). A label that starts with ``-``
  (``-NONE-``, ``-LRB-``, ``-RRB-``) is kept whole; POS tags are left as they are (EVALB leaves them too, and PTB
  tags such as ``PRP$`` carry no function tags).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

XX = "XX"  # GaFL's single normalised POS tag
NONE = "-NONE-"  # the PTB's empty-element tag
ROOT_LABELS = ("", "TOP", "ROOT")  # unary root brackets dropped by normalize

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_MRG_HEADER = re.compile(r"^\*x\*.*$", re.MULTILINE)  # the copyright banner of some LDC .mrg files
_FUNCTION_TAG = re.compile(r"[-=]")


class TreeError(ValueError):
    """Malformed bracketed text or a token sequence that is not a tree; the message says where."""


@dataclass(frozen=True, slots=True)
class Tree:
    """An immutable constituency tree: a label and children; a POS tag (preterminal) has one word (a str) as child.

    Every other node's children are Trees. ``Tree("NP", (Tree("DT", ("the",)), Tree("NN", ("dog",))))``.
    """

    label: str
    children: tuple[Tree | str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.children, tuple):
            object.__setattr__(self, "children", tuple(self.children))
        words = sum(isinstance(child, str) for child in self.children)
        if words and len(self.children) != 1:
            raise TreeError(
                f"({self.label} ...) mixes words and constituents or has several words; a word must "
                "be the only child of its POS tag."
            )

    @property
    def is_preterminal(self) -> bool:
        """Whether this node is a POS tag over one word."""
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def preterminals(self) -> list[Tree]:
        """The POS-tag nodes, left to right."""
        if self.is_preterminal:
            return [self]
        return [node for child in self.children for node in child.preterminals()]

    def leaves(self) -> list[str]:
        """The words, left to right."""
        return [node.children[0] for node in self.preterminals()]

    def tags(self) -> list[str]:
        """The POS tags, left to right."""
        return [node.label for node in self.preterminals()]

    def __str__(self) -> str:
        return to_bracketed(self)


def read_trees(text: str) -> list[Tree]:
    """Reads every tree of Penn Treebank bracketed text (an LDC ``.mrg`` file, one tree per line, or any layout).

    Trees may span lines; the ``.mrg`` outer bracket without a label is kept as a root labelled ``""``
    (:func:`normalize` drops it). Lines starting with ``*x*`` (the copyright banner of some LDC files) are skipped.

    Raises:
        TreeError: unbalanced brackets, a word outside any bracket, or a node with several words; the message
            names the tree number and line.
    """
    text = _MRG_HEADER.sub("", text)
    trees: list[Tree] = []
    stack: list[tuple[list[str | None], list[Tree | str]]] = []  # open brackets: ([label or None], children)
    tree_start = 0

    def fail(message: str, position: int) -> TreeError:
        return TreeError(f"tree {len(trees) + 1} (line {text.count(chr(10), 0, position) + 1}): {message}")

    for match in _TOKEN.finditer(text):
        token, position = match.group(), match.start()
        if token == "(":
            if not stack:
                tree_start = position
            elif stack[-1][0][0] is None:  # "( (" : the open bracket has no label
                stack[-1][0][0] = ""
            stack.append(([None], []))
        elif token == ")":
            if not stack:
                raise fail("')' without a matching '('.", position)
            (label,), children = stack.pop()
            try:
                node = Tree(label or "", tuple(children))
            except TreeError as e:
                raise fail(str(e), position) from None
            (stack[-1][1] if stack else trees).append(node)
        elif not stack:
            raise fail(f"{token!r} outside any bracket.", position)
        elif stack[-1][0][0] is None:
            stack[-1][0][0] = token
        else:
            stack[-1][1].append(token)
    if stack:
        raise fail(f"{len(stack)} bracket(s) not closed at the end of the text.", tree_start)
    return trees


def to_bracketed(tree: Tree) -> str:
    """The tree on one line in Penn Treebank / EVALB form: ``(S (NP (NNP John)) (VP (VBZ has) ...) (. .))``."""
    if tree.is_preterminal:
        return f"({tree.label} {tree.children[0]})"
    return f"({tree.label} {' '.join(map(to_bracketed, tree.children))})" if tree.children else f"({tree.label})"


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` → ``NP``, ``NP=2`` → ``NP`` (EVALB README §7.2); ``-NONE-``, ``-LRB-``, ``-RRB-`` stay."""
    return label if label.startswith("-") else _FUNCTION_TAG.split(label, maxsplit=1)[0]


def normalize(tree: Tree) -> Tree | None:
    """The tree prepared for training as described in the module docstring; None when no word is left."""
    while tree.label in ROOT_LABELS and len(tree.children) == 1 and isinstance(tree.children[0], Tree):
        tree = tree.children[0]
    return _without_empty_elements(tree)


def _without_empty_elements(tree: Tree) -> Tree | None:
    if tree.is_preterminal:
        return None if tree.label == NONE else tree
    children = tuple(kept for child in tree.children if (kept := _without_empty_elements(child)) is not None)
    return Tree(strip_function_tags(tree.label), children) if children else None


def linearize(tree: Tree, pos_tags: bool = False) -> str:
    """The tree as GaFL's space-separated output tokens (module docstring); words are left out.

    Args:
        tree: a normalised tree (:func:`normalize`).
        pos_tags: write each POS tag (True) or ``XX`` for every tag (False, GaFL's main setting).

    Raises:
        TreeError: a constituent without a label or without children, or a tag that reads as a bracket.
    """
    tokens: list[str] = []

    def visit(node: Tree) -> None:
        if node.is_preterminal:
            if pos_tags and (not node.label or node.label[0] in "()"):
                raise TreeError(f"POS tag {node.label!r} cannot be written as an output token.")
            tokens.append(node.label if pos_tags else XX)
            return
        if not node.label or not node.children:
            raise TreeError(f"cannot linearise the constituent {to_bracketed(node)!r} (normalise the tree first).")
        tokens.append(f"({node.label}")
        for child in node.children:
            visit(child)
        tokens.append(f"){node.label}")

    visit(tree)
    return " ".join(tokens)


def delinearize(
    tokens: str, words: Sequence[str], *, tags: Sequence[str] | None = None, pos_tags: bool = False
) -> Tree:
    """The tree that :func:`linearize` wrote as ``tokens``, with ``words`` put back on its leaf slots in order.

    A leaf slot is ``XX`` (``pos_tags=False``) or any token that is not a bracket (``pos_tags=True``: the tag).
    A bare ``)`` closes the innermost constituent. The root must be a constituent, not a bare POS tag.
    ``linearize`` → ``delinearize`` is the identity on normalised trees (with ``tags=tree.tags()`` when the tags
    were written as ``XX``).

    Args:
        tags: POS tags for the leaves (e.g. the gold tags, so that EVALB can delete punctuation); default: the
            leaf-slot tokens themselves.

    Raises:
        TreeError: the tokens are not exactly one well-formed tree over ``words`` (see :func:`repair` for a
            tree in every case).
    """
    if tags is not None and len(tags) != len(words):
        raise ValueError(f"{len(tags)} tags for {len(words)} words.")
    stack: list[tuple[str, list[Tree]]] = []
    roots: list[Tree] = []
    n = 0
    for token in tokens.split():
        if token.startswith("(") and len(token) > 1:
            stack.append((token[1:], []))
        elif token.startswith(")"):
            if not stack:
                raise TreeError(f"{token!r} closes nothing.")
            label, children = stack.pop()
            if token != ")" and token[1:] != label:
                raise TreeError(f"{token!r} closes '({label}'.")
            if not children:
                raise TreeError(f"empty constituent '({label}'.")
            (stack[-1][1] if stack else roots).append(Tree(label, tuple(children)))
        elif token == XX or (pos_tags and token != "("):
            if n == len(words):
                raise TreeError(f"more leaf slots than the {len(words)} words.")
            (stack[-1][1] if stack else roots).append(Tree(tags[n] if tags is not None else token, (words[n],)))
            n += 1
        else:
            raise TreeError(f"stray token {token!r}.")
    if stack:
        raise TreeError(f"{len(stack)} constituent(s) not closed.")
    if n != len(words):
        raise TreeError(f"{n} leaf slots for {len(words)} words.")
    if len(roots) != 1:
        raise TreeError(f"{len(roots)} top-level nodes; a tree has one root.")
    if roots[0].is_preterminal:
        raise TreeError("a POS tag is not a parse: the root must be a constituent.")
    return roots[0]


def tree_symbols(linearized: Iterable[str], pos_tags: bool = False) -> tuple[list[str], list[str]]:
    """The constituent labels and the leaf symbols of linearised trees (e.g. a run's training targets), sorted.

    Leaf symbols are ``[XX]`` unless ``pos_tags`` (then every token that is not a bracket: the POS tags seen).
    """
    labels: set[str] = set()
    tags: set[str] = set()
    for line in linearized:
        for token in line.split():
            if token[0] in "()":
                if len(token) > 1:
                    labels.add(token[1:])
            elif pos_tags:
                tags.add(token)
    return sorted(labels), sorted(tags) if pos_tags else [XX]
