"""Labelled bracketing precision / recall / F1 as EVALB scores it with COLLINS.prm (§6.3, Table 4).

Table 4 reports WSJ section 23 F1 from EVALB (Sekine & Collins 1997) with the parameter file COLLINS.prm. This is
a re-implementation of evalb.c (the 2006 version with F-measure, as distributed with most parsers) for that
parameter file, checked against its source and README:

* ``DELETE_LABEL TOP -NONE- , : `` '' .`` — a POS tag with one of these labels is deleted together with its word
  (punctuation and empty elements do not count as words, and spans are word indices without them); a bracket with
  one of these labels is not counted. Only ``TOP`` is deleted at the root: the sentence-level bracket (``S``, ...)
  is scored like every other.
* The PTB's unlabelled outer bracket ``( (S ...) )`` is read as ``TOP``, the label tgrep gives it in EVALB's gold
  files (README §5), so raw ``.mrg`` trees, TOP-rooted trees and normalised trees all score the same. (evalb.c
  given a literal ``( (S ...) )`` line would count a bracket labelled "" — the one place we do not copy it.)
* A bracket that covers no word after the deletions (e.g. ``(SBAR (-NONE- 0) (S (-NONE- *T*-1)))``, or ``(NP (, ,))``)
  is not counted (README §7.1; evalb.c ``massage_data``: start == end).
* Bracket labels are cut at the first ``-`` or ``=`` before comparing (``NP-SBJ-1`` → ``NP``, ``NP=2`` → ``NP``;
  README §7.2, ``modify_label``); POS tags are compared as written.
* ``EQ_LABEL ADVP PRT`` — ADVP and PRT are the same label (brackets and tags).
* Duplicates count as a multiset: n gold and m test brackets with the same span and label match min(n, m) times
  (README §7.5); matching is evalb.c's greedy one-to-one loop, gold brackets in order.
* ``DELETE_LABEL_FOR_LENGTH -NONE-`` — the sentence length (for the ``len<=40`` summary) counts every word except
  empty elements, punctuation included.
* Crossing brackets: the number of test brackets that cross at least one gold bracket (i.e. overlap it without
  nesting), counted on the test side "by Mike" as in evalb.c.
* Tagging accuracy: matching POS tags over the words left after deletion.
* Errors (status 1): the sentences have different numbers of words after deletion ("Length unmatch"; COLLINS.prm
  sets no QUOTE_LABEL, so evalb's quote re-insertion does nothing), or different words. A test tree without words
  is skipped (status 2). Both count in ``sentences`` but in no other total; unlike evalb we never stop after
  MAX_ERROR errors.
* Corpus precision / recall sum matched, gold and test brackets over the valid sentences; F1 = 2PR / (P + R)
  (evalb prints nan when P + R = 0; we give 0). Complete match and crossing averages are over valid sentences.

Other parameter files are a :class:`Parameters` (``COLLINS`` is the default); its fields are the .prm keywords.

Trees decoded with ``XX`` tags must be given the gold tags (``delinearize(..., tags=gold.tags())``) before scoring:
EVALB recognises punctuation by its tag, and an ``XX`` comma is a word, i.e. a length mismatch.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from transformer_jax.parsing.trees import Tree

_FUNCTION_TAG = re.compile(r"[-=]")

Bracket = tuple[int, int, str]  # (start, end) word indices after deletion, end exclusive; label


@dataclass(frozen=True)
class Parameters:
    """An EVALB parameter file (.prm); the pairs of ``eq_labels`` / ``eq_words`` are equal in either order."""

    delete_labels: frozenset[str]
    delete_labels_for_length: frozenset[str]
    eq_labels: frozenset[tuple[str, str]] = frozenset()
    eq_words: frozenset[tuple[str, str]] = frozenset()
    cutoff_len: int = 40  # CUTOFF_LEN (evalb's default): the second summary is over sentences this long or shorter

    def same_label(self, a: str, b: str) -> bool:
        """evalb.c ``label_comp``."""
        return a == b or (a, b) in self.eq_labels or (b, a) in self.eq_labels

    def same_word(self, a: str, b: str) -> bool:
        """evalb.c ``word_comp``."""
        return a == b or (a, b) in self.eq_words or (b, a) in self.eq_words


COLLINS = Parameters(
    delete_labels=frozenset({"TOP", "-NONE-", ",", ":", "``", "''", "."}),
    delete_labels_for_length=frozenset({"-NONE-"}),
    eq_labels=frozenset({("ADVP", "PRT")}),
)


@dataclass(frozen=True)
class _Reading:
    """A tree as evalb.c's ``read_line`` sees it."""

    words: list[str]
    tags: list[str]
    brackets: list[Bracket]
    length: int  # words whose tag is not in delete_labels_for_length (r_wn1)


@dataclass(frozen=True)
class SentenceScore:
    """One line of evalb's per-sentence table (status 0: ok, 1: error, 2: skip)."""

    id: int
    length: int
    status: int
    matched: int = 0
    gold_brackets: int = 0
    test_brackets: int = 0
    crossing: int = 0
    words: int = 0
    correct_tags: int = 0

    @property
    def recall(self) -> float:
        return 100.0 * self.matched / self.gold_brackets if self.gold_brackets else 0.0

    @property
    def precision(self) -> float:
        return 100.0 * self.matched / self.test_brackets if self.test_brackets else 0.0


def _read(tree: Tree, params: Parameters) -> _Reading:
    words: list[str] = []
    tags: list[str] = []
    brackets: list[Bracket] = []
    length = 0

    def visit(node: Tree) -> None:
        nonlocal length
        if node.is_preterminal:  # a POS tag: deleted with its word when its label is (exact match, is_deletelabel)
            length += node.label not in params.delete_labels_for_length
            if node.label not in params.delete_labels:
                words.append(node.children[0])
                tags.append(node.label)
            return
        start = len(words)
        for child in node.children:
            visit(child)
        brackets.append((start, len(words), node.label))

    visit(Tree("TOP", tree.children) if tree.label == "" and not tree.is_preterminal else tree)
    return _Reading(words, tags, brackets, length)


def _scored(brackets: list[Bracket], params: Parameters) -> list[Bracket]:
    """evalb.c's ``massage_data``: labels cut at ``-``/``=``; brackets over no word or with a deleted label dropped."""
    kept = []
    for start, end, label in brackets:
        label = _FUNCTION_TAG.split(label, maxsplit=1)[0]  # modify_label
        if start != end and not any(params.same_label(label, deleted) for deleted in params.delete_labels):
            kept.append((start, end, label))
    return kept


def _matched(gold: list[Bracket], test: list[Bracket], params: Parameters) -> int:
    """evalb.c's loop: each gold bracket takes the first unmatched test bracket with its span and label."""
    by_span: dict[tuple[int, int], list[int]] = defaultdict(list)
    for j, (start, end, _) in enumerate(test):
        by_span[start, end].append(j)
    used: set[int] = set()
    for start, end, label in gold:
        j = next((j for j in by_span[start, end] if j not in used and params.same_label(label, test[j][2])), None)
        if j is not None:
            used.add(j)
    return len(used)


def score_sentence(gold: Tree, test: Tree, number: int = 1, params: Parameters = COLLINS) -> SentenceScore:
    """EVALB's result for one sentence (module docstring)."""
    g, t = _read(gold, params), _read(test, params)
    if not t.words:
        return SentenceScore(number, g.length, status=2)
    if len(g.words) != len(t.words) or not all(map(params.same_word, g.words, t.words)):
        return SentenceScore(number, g.length, status=1)
    gold_brackets, test_brackets = _scored(g.brackets, params), _scored(t.brackets, params)
    crossing = sum(
        any(gs < ts < ge < te or ts < gs < te < ge for gs, ge, _ in gold_brackets) for ts, te, _ in test_brackets
    )
    correct_tags = sum(map(params.same_label, g.tags, t.tags))
    return SentenceScore(
        number,
        g.length,
        status=0,
        matched=_matched(gold_brackets, test_brackets, params),
        gold_brackets=len(gold_brackets),
        test_brackets=len(test_brackets),
        crossing=crossing,
        words=len(g.words),
        correct_tags=correct_tags,
    )


def summarize(sentences: list[SentenceScore]) -> dict[str, Any]:
    """evalb's summary block over ``sentences`` (percentages as evalb prints them, unrounded)."""
    valid = [s for s in sentences if s.status == 0]
    matched, gold, test = (sum(getattr(s, f) for s in valid) for f in ("matched", "gold_brackets", "test_brackets"))
    recall = 100.0 * matched / gold if gold else 0.0
    precision = 100.0 * matched / test if test else 0.0
    words, correct = sum(s.words for s in valid), sum(s.correct_tags for s in valid)
    complete = sum(s.gold_brackets == s.test_brackets == s.matched for s in valid)
    n = len(valid)
    return {
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "exact_match": 100.0 * complete / n if n else 0.0,
        "complete_sentences": complete,
        "crossing_brackets_avg": sum(s.crossing for s in valid) / n if n else 0.0,
        "no_crossing": 100.0 * sum(s.crossing == 0 for s in valid) / n if n else 0.0,
        "two_or_less_crossing": 100.0 * sum(s.crossing <= 2 for s in valid) / n if n else 0.0,
        "tagging_accuracy": 100.0 * correct / words if words else 0.0,
        "sentences": len(sentences),
        "errors": sum(s.status == 1 for s in sentences),
        "skipped": sum(s.status == 2 for s in sentences),
        "valid_sentences": n,
        "matched_brackets": matched,
        "gold_brackets": gold,
        "test_brackets": test,
    }


def score(gold: list[Tree], test: list[Tree], params: Parameters = COLLINS) -> dict[str, Any]:
    """EVALB (COLLINS.prm) over a corpus: the summary for all sentences, plus ``len<=40`` and ``per_sentence``.

    Args:
        gold: the reference trees (raw ``.mrg`` trees, TOP-rooted or normalised ones score the same).
        test: the parser's trees, one per gold tree, with POS tags (see the module docstring for ``XX``).

    Returns:
        ``precision, recall, f1, exact_match`` (percent), ``complete_sentences``, ``crossing_brackets_avg``,
        ``no_crossing, two_or_less_crossing, tagging_accuracy`` (percent), ``sentences, errors, skipped,
        valid_sentences, matched_brackets, gold_brackets, test_brackets``; ``len<=40``: the same keys over
        sentences of at most ``params.cutoff_len`` (40) words; ``per_sentence``: evalb's per-sentence rows as dicts.

    Raises:
        ValueError: the lists differ in length (evalb reports "Number of lines unmatch" and stops there).
    """
    if len(gold) != len(test):
        raise ValueError(f"EVALB needs one test tree per gold tree: got {len(gold)} gold and {len(test)} test trees.")
    sentences = [score_sentence(g, t, i, params) for i, (g, t) in enumerate(zip(gold, test), start=1)]
    result = summarize(sentences)
    result[f"len<={params.cutoff_len}"] = summarize([s for s in sentences if s.length <= params.cutoff_len])
    result["per_sentence"] = [{**asdict(s), "recall": s.recall, "precision": s.precision} for s in sentences]
    return result
