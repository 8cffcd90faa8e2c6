"""The synthetic grammar's English trees: Penn Treebank bracketing, as the parsing task reads it (§6.3).

The English half of every derivation is built as a :class:`transformer_jax.parsing.trees.Tree`, the parsing task's
own tree type, whose leaves are the English words, so the one code path that renders an English sentence also yields
its tree (no text round trip). Trees follow the PTB bracketing guidelines (Bies et al., 1995) with function tags and
empty elements removed, as parsers are trained and scored: auxiliaries and modals head nested VPs,
(VP (MD can) (VP (VB see) ...)), and "want to" takes an S without subject, (VP (VBZ wants) (S (VP (TO to) (VP (VB
see) ...)))); objects, predicative ADJP, PPs, adverbials and complement or adjunct clauses are children of the lowest
VP; "that"/"because"/"although" clauses are (SBAR (IN because) (S ...)) but "when" is a wh-adverb, (SBAR (WHADVP (WRB
when)) (S ...)); fronted adverbials and subordinate clauses are children of the root S, as is the final (. .);
coordination is flat, (NP (NP ...) (CC and) (NP ...)) and (S (S ...) (, ,) (CC but) (S ...)); a PP in a noun phrase
makes (NP (NP ...) (PP ...)). Tags: "to" is always TO, "out of" nests (PP (IN out) (PP (IN of) NP)), "look for" and
"wave to" are a verb and a PP, "many" is JJ, numbers are CD, possessives PRP$, "very" heads (ADJP (RB very) (JJ
small)); today/yesterday/tomorrow are temporal NPs (NN), other one-word adverbs (ADVP (RB often)), and "every day",
"last week", "on Monday" are NP or PP. The labels are :data:`PHRASE_LABELS` and :data:`POS_TAGS`.

This module holds the conventions shared by phrases and clauses: preterminals, PPs, adverbials, the sentence root.
"""

from __future__ import annotations

import functools

from transformer_jax.parsing.trees import Tree


# The English side is built as transformer_jax.parsing.trees.Tree: a phrase's words are its leaves (`tree.leaves()`).
@functools.cache
def preterminal(tag: str, word: str) -> Tree:
    """A preterminal, (NN dog); shared, as trees are immutable."""
    return Tree(tag, (word,))


PHRASE_LABELS = frozenset({"S", "SBAR", "NP", "VP", "PP", "ADJP", "ADVP", "WHADVP"})
POS_TAGS = frozenset({"DT", "PRP", "PRP$", "CD", "JJ", "NN", "NNS", "NNP", "VBZ", "VBP", "VB", "VBN", "MD", "TO", "IN",
                      "WRB", "CC", "RB", ",", "."})
COMMA = preterminal(",", ",")
_NOUN_ADVERBS = ("today", "yesterday", "tomorrow")  # PTB: (NP-TMP (NN today)), function tag dropped
_ADVERB_TAGS = {"the": "DT", "every": "DT", "this": "DT", "last": "JJ", "next": "JJ"}


def english_pp(prep: str, obj: Tree) -> Tree:
    """(PP (IN in) NP); "to" is TO, "out of" nests: (PP (IN out) (PP (IN of) NP))."""
    *outer, head = prep.split()
    tree = Tree("PP", (preterminal("TO" if head == "to" else "IN", head), obj))
    for word in reversed(outer):
        tree = Tree("PP", (preterminal("IN", word), tree))
    return tree


@functools.cache
def adverb_tree(en: str) -> Tree:
    """ADVP (RB often), NP (NN today | DT every NN day | JJ last NN week) or PP (IN on (NP (NNP Monday)))."""
    words = en.split()
    if words[0] in ("in", "at", "on"):
        return english_pp(words[0], Tree("NP", tuple(
            preterminal(_ADVERB_TAGS.get(w, "NNP" if w[0].isupper() else "NN"), w) for w in words[1:])))
    if len(words) == 1 and en not in _NOUN_ADVERBS:
        return Tree("ADVP", (preterminal("RB", en),))
    return Tree("NP", tuple(preterminal(_ADVERB_TAGS.get(w, "NN"), w) for w in words))


def _capitalised(t: Tree | str) -> Tree | str:
    if isinstance(t, Tree):
        return Tree(t.label, (_capitalised(t.children[0]), *t.children[1:]))
    return t[0].upper() + t[1:]


def sentence_tree(s: Tree) -> Tree:
    """The tree of a whole sentence: first word capitalised, final (. .) a child of the root S."""
    return _capitalised(Tree(s.label, (*s.children, preterminal(".", "."))))
