"""Well-formed parser output by construction: which vocabulary pieces may come next in a linearised tree (§6.3).

Not in the paper. The paper's parser (§6.3) decodes linearised trees with plain beam search; the decoder is free to
emit unbalanced brackets or the wrong number of leaf slots, and such outputs are repaired afterwards
(:mod:`transformer_jax.parsing.repair`). This module is a finite-state guard that beam search consults at every
step (``config.decode.tree_constraint``): a hypothesis may only take a piece after which it can still end, within
its length limit, as exactly one tree over exactly the input's ``n`` words, as
:func:`~transformer_jax.parsing.trees.delinearize` requires — ``n`` leaf slots, brackets that balance, each
``)LABEL`` closing the innermost open ``(LABEL``, no constituent without children, one root constituent.

**Pieces and symbols.** The output's *symbols* are ``(LABEL`` and ``)LABEL`` for each constituent label and the
leaf slots (``XX``, or the POS tags with ``pos_tags=True``). SentencePiece encodes each symbol, a whitespace-free
word, independently of its neighbours, as one piece that starts with the word boundary ``▁`` and zero or more
pieces without it: a vocabulary that keeps letters and punctuation apart (SentencePiece's default) writes ``(NP``
as ``▁(`` ``NP``, the parsing demo's (``config.data.tokenizer_split_by_script=False``) as ``▁(NP``, ``XX`` is
``▁XX``, and a rare WSJ label may take several pieces (``▁(`` ``WH`` ``ADJP``). The symbols' piece sequences (each symbol's
``tokenizer.encode``, the segmentation the model was trained on) form a trie; a hypothesis' position in the symbol
being spelled is a trie node, and a node may both end a symbol and continue into a longer one (``(S`` and
``(SBAR`` = ``▁(`` ``S`` ``BAR``), so a symbol is applied to the tree state only when the next symbol (a piece
with ``▁``) or EOS follows. Any other piece (another segmentation of a symbol, a label that no training tree has,
a word piece) is never allowed.

**State** (:class:`TreeState`, one row per hypothesis, fixed shapes): the trie node, the leaf slots emitted, the
stack of open constituents' label ids (at most ``max_depth``), whether the innermost one has no child yet, the
number of pieces needed to close them all, whether the root was opened, and the input's word count.

**Mask** (:meth:`TreeConstraint.allowed`): a piece is allowed when the symbol it starts or continues can be
completed into one that is legal now — a leaf while words remain inside the root; an opening below
``max_depth`` while words remain (none after the root closed); the innermost constituent's own closing once it has
a child, the root's only after the last word — and the shortest completion (the symbol's remaining pieces, one
slot per remaining word, the closing brackets, EOS) fits in the output positions left. EOS is allowed exactly when
the tree is complete. The mask costs O(trie nodes + V) per hypothesis and step; the per-piece tables are built
once, on the host, from the tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from transformer_jax.parsing.trees import XX

WORD_BOUNDARY = "\u2581"  # SentencePiece's whitespace symbol, at the start of a word's first piece
_FAR = 1 << 20  # the cost (pieces) of something unreachable: above any output length, far from int32 overflow
_NONE, _LEAF, _OPEN, _CLOSE = 0, 1, 2, 3  # the symbol a trie node completes


class PieceTokenizer(Protocol):
    """What the constraint reads from a tokenizer (:class:`transformer_jax.data.tokenizer.Tokenizer` has it)."""

    @property
    def vocab_size(self) -> int: ...

    def id_to_piece(self, token_id: int) -> str: ...

    def encode(self, text: str) -> list[int]: ...


class TreeState(NamedTuple):
    """Where each hypothesis stands in its tree; every leaf has one row per hypothesis ([N, ...])."""

    node: jax.Array  # int32[N]: trie node of the symbol being spelled; 0 (the root) between symbols
    leaves: jax.Array  # int32[N]: leaf slots emitted so far
    depth: jax.Array  # int32[N]: open constituents
    stack: jax.Array  # int32[N, max_depth]: their label ids, outermost first (rows ≥ depth unused)
    top_empty: jax.Array  # bool[N]: the innermost open constituent has no child yet
    close_cost: jax.Array  # int32[N]: pieces that close every open constituent
    started: jax.Array  # bool[N]: the root has been opened
    n_words: jax.Array  # int32[N]: the input's word count, the number of leaf slots the tree must have


class TreeConstraint:
    """The tree automaton over one tokenizer's pieces (module docstring); jittable ``allowed`` and ``advance``.

    Args:
        tokenizer: the run's tokenizer (``vocab_size``, ``id_to_piece``, ``encode``).
        labels: the constituent labels an output may use (the source's `tree_symbols`, e.g. of the training targets).
        leaves: the leaf-slot symbols (``[XX]``, or the POS tags).
        eos_id: the end-of-sentence id (``encode`` appends it; it ends a tree).
        pad_id: the padding id (no word, never allowed).
        max_depth: the most constituents open at once (the state's stack); deeper openings are masked.

    Raises:
        ValueError: a symbol whose pieces do not start a word with ``▁`` (or carry ``▁`` inside), or two symbols
            with the same pieces.
    """

    def __init__(self, tokenizer: PieceTokenizer, labels: Sequence[str], leaves: Sequence[str] = (XX,), *,
                 eos_id: int, pad_id: int = 0, max_depth: int = 64):
        if not labels or not leaves:
            raise ValueError(f"A tree needs constituent labels and leaf symbols; got {list(labels)}, {list(leaves)}.")
        self.labels, self.leaves = list(labels), list(leaves)
        self.eos_id, self.pad_id, self.max_depth = int(eos_id), int(pad_id), int(max_depth)
        self.vocab_size = int(tokenizer.vocab_size)
        pieces = [tokenizer.id_to_piece(i) for i in range(self.vocab_size)]

        # The trie of the symbols' piece sequences: children[node] maps a piece id to a node; node 0 is the root.
        children: list[dict[int, int]] = [{}]
        accept: list[tuple[int, int]] = [(_NONE, -1)]  # (kind, label id) of the symbol a node completes
        depth = [0]
        symbols = [(leaf, _LEAF, -1) for leaf in self.leaves]
        symbols += [(f"({label}", _OPEN, i) for i, label in enumerate(self.labels)]
        symbols += [(f"){label}", _CLOSE, i) for i, label in enumerate(self.labels)]
        paths: list[tuple[list[int], int, int]] = []  # (nodes from the root, kind, label) per symbol
        close_len = np.zeros(len(self.labels), np.int32)
        for text, kind, label in symbols:
            ids = list(tokenizer.encode(text))
            if ids and ids[-1] == self.eos_id:
                ids = ids[:-1]
            spelled = [pieces[i] for i in ids]
            if (not ids or not spelled[0].startswith(WORD_BOUNDARY)
                    or any(WORD_BOUNDARY in p for p in spelled[1:]) or {self.eos_id, self.pad_id} & set(ids)):
                raise ValueError(
                    f"The tree symbol {text!r} is encoded as {spelled}: a tree constraint needs one piece that "
                    f"starts with {WORD_BOUNDARY!r} followed by pieces without it.")
            node, path = 0, [0]
            for i in ids:
                if i not in children[node]:
                    children[node][i] = len(children)
                    children.append({})
                    accept.append((_NONE, -1))
                    depth.append(depth[node] + 1)
                node = children[node][i]
                path.append(node)
            if accept[node][0] != _NONE:
                raise ValueError(f"Two tree symbols are encoded as the same pieces {spelled}.")
            accept[node] = (kind, label)
            paths.append((path, kind, label))
            if kind == _CLOSE:
                close_len[label] = len(ids)

        num_nodes, num_labels = len(children), len(self.labels)
        self.num_nodes = num_nodes
        self._accept_kind = np.array([k for k, _ in accept], np.int32)  # [nodes]
        self._accept_label = np.array([lab for _, lab in accept], np.int32)  # [nodes]
        self._close_len = close_len  # [labels]
        # Pieces that start a symbol (children of the root), and pieces that continue one (children of other nodes):
        # the first carry ▁ and the others do not, so the two sets are disjoint.
        self._root_ids = np.array(sorted(children[0]), np.int32)  # [R]
        self._root_nodes = np.array([children[0][i] for i in self._root_ids], np.int32)  # [R]
        self._root_node_of = np.full(self.vocab_size, -1, np.int32)  # [V]
        self._root_node_of[self._root_ids] = self._root_nodes
        self._cont_ids = np.array(sorted({i for c in children[1:] for i in c}), np.int32)  # [P]
        self._cont_index = np.full(self.vocab_size, -1, np.int32)  # [V]
        self._cont_index[self._cont_ids] = np.arange(len(self._cont_ids), dtype=np.int32)
        self._cont_child = np.full((num_nodes, max(len(self._cont_ids), 1)), -1, np.int32)  # [nodes, P]
        for node, c in enumerate(children[1:], start=1):
            for i, child in c.items():
                self._cont_child[node, self._cont_index[i]] = child
        # The fewest pieces from a node to the end of a symbol it can still become, per kind; an opening's count
        # includes its closing bracket (what the tree will need anyway once it is open).
        self._leaf_rem = np.full(num_nodes, _FAR, np.int32)  # [nodes]
        self._open_rem = np.full(num_nodes, _FAR, np.int32)  # [nodes]
        self._close_rem = np.full((num_labels, num_nodes), _FAR, np.int32)  # [labels, nodes]
        for path, kind, label in paths:
            for node in path:
                rem = len(path) - 1 - depth[node]
                if kind == _LEAF:
                    self._leaf_rem[node] = min(self._leaf_rem[node], rem)
                elif kind == _OPEN:
                    self._open_rem[node] = min(self._open_rem[node], rem + close_len[label])
                else:
                    self._close_rem[label, node] = rem
        # Words of the input: a word starts at a piece with text after whitespace (a ▁ at its start or the end of
        # the piece before) or at the start; byte-fallback pieces are text, a bare "▁" piece is not.
        text = np.array([p.strip(WORD_BOUNDARY) != "" for p in pieces], bool)
        text[[self.pad_id, self.eos_id]] = False
        self._has_text = text  # [V]
        self._starts_ws = np.array([p.startswith(WORD_BOUNDARY) for p in pieces], bool)  # [V]
        self._ends_ws = np.array([p.endswith(WORD_BOUNDARY) for p in pieces], bool)  # [V]

    # -- the input ---------------------------------------------------------------------------------------------

    def count_words(self, inputs: jax.Array) -> jax.Array:
        """The whitespace-separated words of each encoded input, int32[B] (inputs: int32[B, S], 0-padded)."""
        has_text = jnp.asarray(self._has_text)[inputs]  # [B, S]
        starts = jnp.asarray(self._starts_ws)[inputs]  # [B, S]
        after_ws = jnp.concatenate([jnp.ones_like(starts[:, :1]), jnp.asarray(self._ends_ws)[inputs][:, :-1]], 1)
        return jnp.sum(has_text & (starts | after_ws), axis=1).astype(jnp.int32)

    def min_length(self, n_words: jax.Array) -> jax.Array:
        """The fewest output tokens (EOS included) of a tree over ``n_words`` words, int32[...]."""
        return jnp.asarray(n_words, jnp.int32) * int(self._leaf_rem[0]) + int(self._open_rem[0]) + 1

    # -- the automaton -----------------------------------------------------------------------------------------

    def init(self, n_words: jax.Array) -> TreeState:
        """The state before the first token, one row per entry of ``n_words`` (int32[N])."""
        n_words = jnp.asarray(n_words, jnp.int32)
        zeros = jnp.zeros(n_words.shape, jnp.int32)
        no = jnp.zeros(n_words.shape, bool)
        stack = jnp.zeros((*n_words.shape, self.max_depth), jnp.int32)
        return TreeState(node=zeros, leaves=zeros, depth=zeros, stack=stack, top_empty=no, close_cost=zeros,
                         started=no, n_words=n_words)

    def allowed(self, state: TreeState, budget: jax.Array) -> jax.Array:
        """bool[N, V]: the pieces each hypothesis may take now.

        Args:
            state: the hypotheses' states.
            budget: int32[N], the output positions left after the piece taken now (EOS must fit in them, unless
                the piece is EOS itself).
        """
        kind, label = self._pending(state)
        can_leave = self._can_leave(state, kind, label)
        committed = self._commit(state, kind, label)
        starts = can_leave[:, None] & self._reachable(committed, budget)[:, self._root_nodes]  # [N, R]
        child = jnp.asarray(self._cont_child)[state.node]  # [N, P]
        goes_on = (child >= 0) & jnp.take_along_axis(self._reachable(state, budget), jnp.maximum(child, 0), axis=1)
        eos = can_leave & self._complete(committed)  # [N]
        mask = jnp.zeros((state.node.shape[0], self.vocab_size), bool)
        mask = mask.at[:, self._root_ids].set(starts)
        if len(self._cont_ids):
            mask = mask.at[:, self._cont_ids].set(goes_on[:, : len(self._cont_ids)])
        return mask.at[:, self.eos_id].set(eos)

    def advance(self, state: TreeState, tokens: jax.Array) -> TreeState:
        """The states after each hypothesis took ``tokens`` (int32[N]); a piece that was not allowed changes nothing."""
        kind, label = self._pending(state)
        can_leave = self._can_leave(state, kind, label)
        cont = jnp.asarray(self._cont_index)[tokens]  # [N]
        child = jnp.where(cont >= 0, jnp.asarray(self._cont_child)[state.node, jnp.maximum(cont, 0)], -1)
        new_symbol = jnp.asarray(self._root_node_of)[tokens]  # [N]
        starts = can_leave & (new_symbol >= 0)
        leaves = starts | (can_leave & (tokens == self.eos_id))  # the pending symbol is applied
        committed = self._commit(state, kind, label)
        out = jax.tree.map(lambda c, s: jnp.where(leaves.reshape(-1, *[1] * (c.ndim - 1)), c, s), committed, state)
        node = jnp.where(child >= 0, child, jnp.where(starts, new_symbol, jnp.where(leaves, 0, state.node)))
        return out._replace(node=node.astype(jnp.int32))

    def is_complete(self, state: TreeState) -> jax.Array:
        """bool[N]: the hypothesis is one whole tree over its words (EOS would be allowed)."""
        kind, label = self._pending(state)
        return self._can_leave(state, kind, label) & self._complete(self._commit(state, kind, label))

    # -- pieces of the above -----------------------------------------------------------------------------------

    def _pending(self, state: TreeState) -> tuple[jax.Array, jax.Array]:
        """The kind and label id of the symbol the current node completes (``_NONE`` when it completes none)."""
        return jnp.asarray(self._accept_kind)[state.node], jnp.asarray(self._accept_label)[state.node]

    def _can_leave(self, s: TreeState, kind: jax.Array, label: jax.Array) -> jax.Array:
        """bool[N]: the next piece may start a symbol (or be EOS): no symbol is being spelled, or the one spelled so
        far is complete and legal here (a node that completes ``)S`` may lie on the way to ``)SBAR``)."""
        leaf_ok, open_ok, close_ok, top = self._legal(s)
        legal = jnp.where(kind == _LEAF, leaf_ok, jnp.where(kind == _OPEN, open_ok, close_ok & (label == top)))
        return (s.node == 0) | ((kind != _NONE) & legal)

    def _legal(self, s: TreeState) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """bool[N] each: a leaf, an opening, the innermost constituent's closing may come next; and its label id."""
        remaining = s.n_words - s.leaves  # [N]
        top = jnp.take_along_axis(s.stack, jnp.clip(s.depth - 1, 0, self.max_depth - 1)[:, None], axis=1)[:, 0]
        leaf_ok = (s.depth >= 1) & (remaining > 0)
        open_ok = (s.depth < self.max_depth) & (remaining > 0) & ((s.depth >= 1) | ~s.started)
        close_ok = (s.depth >= 1) & ~s.top_empty & ((s.depth > 1) | (remaining == 0))
        return leaf_ok, open_ok, close_ok, top

    def _commit(self, s: TreeState, kind: jax.Array, label: jax.Array) -> TreeState:
        """The state with one symbol per row applied (kind int32[N], label int32[N]; ``_NONE`` changes nothing)."""
        is_leaf, is_open, is_close = kind == _LEAF, kind == _OPEN, kind == _CLOSE
        label = jnp.maximum(label, 0)
        length = jnp.asarray(self._close_len)[label]  # [N]
        slot = jnp.arange(self.max_depth)[None, :] == jnp.minimum(s.depth, self.max_depth - 1)[:, None]
        return s._replace(
            leaves=s.leaves + is_leaf,
            depth=s.depth + is_open - is_close,
            stack=jnp.where(is_open[:, None] & slot, label[:, None], s.stack),
            top_empty=jnp.where(is_open, True, jnp.where(is_leaf | is_close, False, s.top_empty)),
            close_cost=s.close_cost + jnp.where(is_open, length, 0) - jnp.where(is_close, length, 0),
            started=s.started | is_open,
        )

    def _complete(self, s: TreeState) -> jax.Array:
        """bool[N]: the applied symbols are one closed root over exactly ``n_words`` leaves."""
        return (s.depth == 0) & s.started & (s.leaves == s.n_words)

    def _reachable(self, s: TreeState, budget: jax.Array) -> jax.Array:
        """bool[N, nodes]: from each trie node, a symbol legal after the applied ones in ``s`` can be finished and
        the tree completed (one slot per remaining word, the closing brackets, EOS) in ``budget`` pieces."""
        remaining = s.n_words - s.leaves  # [N]
        slot = int(self._leaf_rem[0])  # pieces of the shortest leaf symbol
        finish = remaining * slot + s.close_cost + 1  # [N]: pieces that complete the tree from here, EOS included
        leaf_ok, open_ok, close_ok, top = self._legal(s)
        budget = jnp.asarray(budget, jnp.int32)[:, None]
        leaf = leaf_ok[:, None] & (jnp.asarray(self._leaf_rem)[None, :] + (finish - slot)[:, None] <= budget)
        opening = open_ok[:, None] & (jnp.asarray(self._open_rem)[None, :] + finish[:, None] <= budget)
        closing_cost = jnp.asarray(self._close_rem)[top] + (finish - jnp.asarray(self._close_len)[top])[:, None]
        closing = close_ok[:, None] & (closing_cost <= budget)
        return leaf | opening | closing  # [N, nodes]
