"""Deterministic repair of a decoded linearised tree that is not well formed (§6.3).

A sequence-to-sequence parser (Vinyals & Kaiser et al. 2015, "Grammar as a Foreign Language") is free to emit
unbalanced brackets or the wrong number of leaf slots. GaFL report that such outputs are rare and balance them by
adding brackets at the beginning or the end of the tree; EVALB counts a sentence whose words differ from the gold
ones as an error, so every output must become a tree over exactly the input words. The rules, applied left to
right with a stack of open constituents:

1. ``(LABEL`` opens a constituent; a bare ``(`` is dropped.
2. ``)LABEL`` closes the innermost open constituent with that label, closing the ones inside it too; a bare ``)``
   or a label that is not open closes the innermost constituent; a closer with nothing open is dropped.
3. A leaf slot (``XX``, or any non-bracket token with ``pos_tags=True``) takes the next word; once every word is
   placed, further slots are dropped. Any other token is stray and dropped.
4. A constituent that is closed with no children is dropped (it would cover no word).
5. At the end, open constituents are closed innermost first.
6. Words without a slot are attached, in order, as leaves at the end of the root.
7. The root is the single top-level constituent if there is one; otherwise (several top-level nodes, or a bare
   POS tag) all top-level nodes are wrapped in a new ``S`` root (``root_label``; S is the most frequent WSJ root).

A sequence that :func:`~transformer_jax.parsing.trees.delinearize` accepts is returned unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from transformer_jax.parsing.trees import XX, Tree, TreeError, delinearize


def repair(
    tokens: str,
    words: Sequence[str],
    *,
    tags: Sequence[str] | None = None,
    pos_tags: bool = False,
    root_label: str = "S",
) -> tuple[Tree, bool]:
    """A well-formed tree whose leaves are exactly ``words``, and whether ``tokens`` needed repair (module rules).

    Args:
        tokens: the decoded linearised tree (space-separated tokens).
        words: the input sentence.
        tags: POS tags for the leaves, as in :func:`~transformer_jax.parsing.trees.delinearize`.
        pos_tags: whether the output writes POS tags (True) or ``XX`` (False) as leaf slots.
        root_label: the label of a root added over several top-level nodes.
    """
    if not words:
        raise ValueError("An empty sentence has no parse tree.")
    try:
        return delinearize(tokens, words, tags=tags, pos_tags=pos_tags), False
    except TreeError:
        pass

    def leaf(slot: str, n: int) -> Tree:
        return Tree(tags[n] if tags is not None else slot if pos_tags else XX, (words[n],))

    stack: list[tuple[str, list[Tree]]] = []
    top: list[Tree] = []

    def close() -> None:
        label, children = stack.pop()
        if children:  # rule 4
            (stack[-1][1] if stack else top).append(Tree(label, tuple(children)))

    n = 0
    for token in tokens.split():
        if token.startswith("("):
            if len(token) > 1:  # rule 1
                stack.append((token[1:], []))
        elif token.startswith(")"):
            if stack:  # rule 2
                labels = [label for label, _ in stack]
                depth = len(labels) - 1 - labels[::-1].index(token[1:]) if token[1:] in labels else len(labels) - 1
                while len(stack) > depth:
                    close()
        elif (pos_tags or token == XX) and n < len(words):  # rule 3
            (stack[-1][1] if stack else top).append(leaf(token, n))
            n += 1
    while stack:  # rule 5
        close()
    missing = tuple(leaf(XX, k) for k in range(n, len(words)))  # rule 6
    if len(top) == 1 and not top[0].is_preterminal:  # rule 7
        return Tree(top[0].label, top[0].children + missing), True
    return Tree(root_label, (*top, *missing)), True
