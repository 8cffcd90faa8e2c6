"""Drawing from the synthetic grammar: how often each construction is chosen, and one sentence pair at a time.

Every choice (frame, tense, subject, determiner, adjectives, adverbs, PPs, nested and coordinated clauses) is drawn
from ``rng`` with fixed weights, so the corpus is a function of the seed. A derivation is redrawn when a side is
shorter than :data:`MIN_WORDS` or longer than :data:`MAX_WORDS` whitespace tokens.
"""

from __future__ import annotations

import bisect
import functools
import random
from collections.abc import Sequence

from transformer_jax.data.synthetic_clauses import Clause, english_clause, german_main, main_clause, sentence_text
from transformer_jax.data.synthetic_lexicon import (
    ADJECTIVES,
    ADVERBS,
    BE,
    COORDINATORS,
    NOUNS,
    POSSESSIVES,
    PREPOSITIONS,
    PRONOUNS,
    SUBORDINATORS,
    VERBS,
    Adjective,
    Adverb,
    Noun,
    Preposition,
    Verb,
)
from transformer_jax.data.synthetic_phrases import inflected_np, with_preposition
from transformer_jax.data.synthetic_trees import COMMA, preterminal, sentence_tree
from transformer_jax.parsing.trees import Tree

MAX_WORDS = 60  # whitespace tokens per side; longer derivations are redrawn
MIN_WORDS = 3


def _pick(rng: random.Random, items: Sequence, cum: Sequence[float]):
    return items[bisect.bisect(cum, rng.random() * cum[-1])]


def _cum(weights: Sequence[float]) -> list[float]:
    out, total = [], 0.0
    for w in weights:
        total += w
        out.append(total)
    return out


@functools.cache
def _nouns_for(tags: str) -> tuple[Noun, ...]:
    return tuple(n for n in NOUNS if any(t in n.tags for t in tags))


@functools.cache
def _adjectives_for(cls: str) -> tuple[Adjective, ...]:
    use = "a" if cls in "pa" else "i"
    return tuple(a for a in ADJECTIVES if a.use in ("*", use))


@functools.cache
def _verbs_for(frame: str) -> tuple[Verb, ...]:
    return tuple(v for v in VERBS.values() if v.frame == frame)


@functools.cache
def _time_adverbs(tense: str) -> tuple[Adverb, ...]:
    ok = "*p" if tense == "perf" else "*n"
    return tuple(a for a in ADVERBS.values() if a.frontable and a.tenses in ok)


_MANNER = tuple(a for a in ADVERBS.values() if not a.frontable)
_PREP_LIST = tuple(PREPOSITIONS.values())
_SG_DETS, _SG_CUM = ("def", "indef", "this", *POSSESSIVES), _cum([45, 30, 8] + [17 / 6] * 6)
_PL_DETS = ("def", "bare", "num", "some", "many", "this", *POSSESSIVES)
_PL_CUM = _cum([30, 15, 20, 10, 8, 7] + [10 / 6] * 6)
_FRAMES = ("i", "a", "d", "g", "c", "s")
_FRAME_CUM = _cum([24, 36, 8, 6, 12, 14])
_FRAME_CUM_NO_SAY = _FRAME_CUM[:-1]
_TENSES, _TENSE_CUM = ("pres", "perf", "can", "must", "may", "want"), _cum([45, 30, 7, 6, 5, 7])
_MAX_DEPTH = 3  # clauses nest at most this deep below the main clause
_ADJUNCT_P = (0.25, 0.15, 0.08)


def _random_np(rng: random.Random, tags: str, case: str, coord: float = 0.0, attach: float = 0.0
               ) -> tuple[Tree, str, str, str]:
    """A random (English, German, person, noun class) noun phrase whose head noun has one of `tags`."""
    noun = rng.choice(_nouns_for(tags))
    plural = rng.random() < 0.3
    det = _pick(rng, _PL_DETS, _PL_CUM) if plural else _pick(rng, _SG_DETS, _SG_CUM)
    count = (rng.randint(2, 12) if rng.random() < 0.5 else rng.randint(13, 99)) if det == "num" else 0
    r, adjs = rng.random(), ()
    if r > 0.5:
        pool = _adjectives_for(noun.tags[0])
        adjs = (rng.choice(pool),) if r < 0.88 else tuple(rng.sample(pool, 2))
    en, de = inflected_np(noun, case, det, plural, adjs, count, bool(adjs) and rng.random() < 0.15)
    if attach and rng.random() < attach:  # "the man with the hat": a PP inside the noun phrase
        pen, pde = _random_pp(rng, PREPOSITIONS[rng.choice(("with", "without"))])
        en, de = Tree("NP", (en, pen)), f"{de} {pde}"
    person = "3p" if plural else "3s"
    if coord and rng.random() < coord:
        en2, de2, _, _ = _random_np(rng, tags, case)
        en, de, person = Tree("NP", (en, preterminal("CC", "and"), en2)), f"{de} und {de2}", "3p"
    return en, de, person, noun.tags[0]


def _random_pp(rng: random.Random, prep: Preposition | None = None) -> tuple[Tree, str]:
    p = prep or rng.choice(_PREP_LIST)
    noun = rng.choice(_nouns_for(p.tags))
    plural = rng.random() < 0.25
    det = _pick(rng, _PL_DETS, _PL_CUM) if plural else _pick(rng, _SG_DETS, _SG_CUM)
    count = rng.randint(2, 99) if det == "num" else 0
    adjs = (rng.choice(_adjectives_for(noun.tags[0])),) if rng.random() < 0.35 else ()
    en, de = inflected_np(noun, p.case, det, plural, adjs, count, False)
    return with_preposition(p, en, de, det)


def _random_clause(rng: random.Random, depth: int, front_ok: bool) -> Clause:
    frame = _pick(rng, _FRAMES, _FRAME_CUM if depth < _MAX_DEPTH else _FRAME_CUM_NO_SAY)
    verb = BE if frame == "c" else rng.choice(_verbs_for(frame))
    tense = _pick(rng, _TENSES, _TENSE_CUM)
    if rng.random() < 0.3:
        en, de, person = rng.choice(PRONOUNS)
        en, cls = Tree("NP", (preterminal("PRP", en),)), "p"
    else:
        en, de, person, cls = _random_np(rng, verb.subject, "nom", 0.0 if frame == "c" else 0.08, 0.06)
    if cls not in "pa" and tense in ("may", "want"):  # things neither want nor are allowed: "the house can be old"
        tense = "can"
    c = Clause((en, de), person, verb, tense)
    if frame == "a":
        c.objs = [_random_np(rng, verb.objects, "acc", coord=0.08)[:2]]
    elif frame == "d":
        c.objs = [_random_np(rng, verb.objects, "dat")[:2]]
    elif frame == "g":
        c.objs = [_random_np(rng, "pa", "dat")[:2], _random_np(rng, verb.objects, "acc")[:2]]
    elif frame == "c":
        adj = rng.choice(_adjectives_for(cls))
        very = rng.random() < 0.15
        c.pred = (Tree("ADJP", (*([preterminal("RB", "very")] if very else []), preterminal("JJ", adj.en))),
                  ("sehr " if very else "") + adj.de)
    r = rng.random()
    if r < 0.28:
        c.adv = rng.choice(_time_adverbs(tense))
    elif r < 0.36 and frame != "c":
        c.adv = rng.choice(_MANNER)
    if frame != "c":
        r = rng.random()
        c.pps = [_random_pp(rng) for _ in range(0 if r < 0.62 else 1 if r < 0.92 else 2)]
    if front_ok:
        r = rng.random()
        if c.adv and c.adv.frontable and r < 0.35:
            c.front = "adv"
        elif c.pps and r > 0.8:
            c.front = "pp"
    if frame == "s":
        c.comp = _random_clause(rng, depth + 1, False)
    if depth < _MAX_DEPTH and rng.random() < _ADJUNCT_P[depth]:
        en_conj, de_conj = rng.choice(SUBORDINATORS)
        c.adjuncts = [(en_conj, de_conj, _random_clause(rng, depth + 1, False))]
    return c


def _derive(rng: random.Random) -> tuple[Tree, list[str]]:
    """One derivation: (English S tree, German tokens), without the final full stop."""
    r = rng.random()
    if r < 0.15:  # two main clauses, coordinated
        en_conj, de_conj = rng.choice(COORDINATORS)
        c1, c2 = _random_clause(rng, 1, True), _random_clause(rng, 1, True)
        return (Tree("S", (english_clause(c1), COMMA, preterminal("CC", en_conj), english_clause(c2))),
                [*german_main(c1), ",", de_conj, *german_main(c2)])
    if r < 0.27:  # a fronted subordinate clause takes the first position: "Weil ..., sieht der Mann ..."
        en_conj, de_conj = rng.choice(SUBORDINATORS)
        sub = _random_clause(rng, _MAX_DEPTH, False)
        return main_clause(_random_clause(rng, 1, False), (en_conj, de_conj, sub))
    return main_clause(_random_clause(rng, 0, True))


def _generate(rng: random.Random) -> tuple[str, str, Tree]:
    """(English, German, English S tree) of 3..60 whitespace tokens per sentence."""
    while True:
        tree, de_tokens = _derive(rng)
        en, de = sentence_text(tree.leaves()), sentence_text(de_tokens)
        n_en, n_de = en.count(" ") + 1, de.count(" ") + 1
        if MIN_WORDS <= min(n_en, n_de) and max(n_en, n_de) <= MAX_WORDS:
            return en, de, tree


def generate_pair(rng: random.Random) -> tuple[str, str]:
    """One (English, German) sentence pair drawn from the grammar with `rng` (3..60 whitespace tokens each)."""
    return _generate(rng)[:2]


def generate_parse_pair(rng: random.Random) -> tuple[str, Tree]:
    """One (tokenised English sentence, PTB tree) pair: the English side of `generate_pair(rng)` with its tree; the
    sentence is the tree's leaves joined by spaces."""
    tree = sentence_tree(_generate(rng)[2])
    return " ".join(tree.leaves()), tree
