"""The synthetic grammar's noun and prepositional phrases: German inflection for case, gender and number.

An English noun phrase is a tree whose words do not change with case; its German translation takes the article and
adjective ending of its case and gender: strong, weak or mixed adjective endings after der/dieser, ein/mein or no
article, weak masculine nouns (den Jungen), dative plural -n (den Kindern), and the contractions zum, zur, beim, vom,
im. A bag of English words therefore does not say which German form to write: the model must read word order.
Numbers 2–99 are spelled out in both languages ("twenty-one" → "einundzwanzig").
"""

from __future__ import annotations

from collections.abc import Sequence

from transformer_jax.data.synthetic_lexicon import (
    ADJECTIVES,
    CASES,
    NOUNS,
    POSSESSIVES,
    PREPOSITIONS,
    Adjective,
    Noun,
    Preposition,
)
from transformer_jax.data.synthetic_trees import english_pp, preterminal
from transformer_jax.parsing.trees import Tree

_CONTRACTIONS = {("zu", "dem"): "zum", ("zu", "der"): "zur", ("bei", "dem"): "beim", ("von", "dem"): "vom",
                 ("in", "dem"): "im"}


# German inflection tables: case → gender ("pl" for plural) → article or ending ("-" for none).
def _table(nom: str, acc: str, dat: str) -> dict[str, dict[str, str]]:
    return {case: dict(zip(("m", "f", "n", "pl"), row.replace("-", "").split(" "))) for case, row in
            zip(CASES, (nom, acc, dat))}


_DEF = _table("der die das die", "den die das die", "dem der dem den")
_EIN = _table("- e - e", "en e - e", "em er em en")  # ein and the possessives: mein, dein, unser, ...
_DIES = _table("er e es e", "en e es e", "em er em en")
_WEAK = _table("e e e en", "en e e en", "en en en en")  # after der, dieser; plural after meine
_MIXED = _table("er e es en", "en e es en", "en en en en")  # after ein, mein
_STRONG_PLURAL = {"nom": "e", "acc": "e", "dat": "en"}  # bare plurals, numbers, einige, viele

_EN_ONES = ("", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
            "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_EN_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_DE_ONES = ("", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn", "elf", "zwölf",
            "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn", "achtzehn", "neunzehn")
_DE_TENS = ("", "", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig")
_NOUN_BY_EN = {n.en_sg: n for n in NOUNS}
_ADJ_BY_EN = {a.en: a for a in ADJECTIVES}


def english_number(n: int) -> str:
    """1–99 in English words: 21 → "twenty-one"."""
    if not 1 <= n <= 99:
        raise ValueError(f"number out of range 1..99: {n}")
    tens, unit = divmod(n, 10)
    return _EN_ONES[n] if n < 20 else _EN_TENS[tens] + (f"-{_EN_ONES[unit]}" if unit else "")


def german_number(n: int) -> str:
    """1–99 in German words, unit before ten: 21 → "einundzwanzig"."""
    if not 1 <= n <= 99:
        raise ValueError(f"number out of range 1..99: {n}")
    tens, unit = divmod(n, 10)
    if n < 20:
        return _DE_ONES[n]
    return _DE_TENS[tens] if not unit else ("ein" if unit == 1 else _DE_ONES[unit]) + "und" + _DE_TENS[tens]


def inflected_np(noun: Noun, case: str, det: str, plural: bool, adjs: Sequence[Adjective], count: int, very: bool
        ) -> tuple[Tree, str]:
    """The (English tree, German) noun phrase of lexicon entries (:func:`noun_phrase` takes English words)."""
    g = "pl" if plural else noun.gender
    if det == "def":
        en_det, de_det, endings = "the", _DEF[case][g], _WEAK[case][g]
    elif det == "this":
        en_det, de_det, endings = ("these" if plural else "this"), "dies" + _DIES[case][g], _WEAK[case][g]
    elif det == "indef" and not plural:
        en_det, de_det, endings = "a", "ein" + _EIN[case][g], _MIXED[case][g]
    elif det in POSSESSIVES:
        en_det, de_det, endings = det, POSSESSIVES[det] + _EIN[case][g], _MIXED[case][g]
    elif plural and det in ("num", "some", "many", "bare"):
        endings = _STRONG_PLURAL[case]
        if det == "num":
            en_det, de_det = english_number(count), german_number(count)
        elif det == "bare":
            en_det, de_det = "", ""
        else:
            en_det, de_det = {"some": ("some", "einig"), "many": ("many", "viel")}[det]
            de_det += endings
    else:
        raise ValueError(f"determiner {det!r} with plural={plural}")
    head = preterminal("NNS", noun.en_pl) if plural else preterminal("NN", noun.en_sg)
    en_words = [preterminal("JJ", a.en) for a in adjs] + [head]
    if very and adjs:  # "very" modifies the first adjective: (ADJP (RB very) (JJ small))
        en_words[0] = Tree("ADJP", (preterminal("RB", "very"), en_words[0]))
    if en_det == "a" and en_words[0].leaves()[0][0] in "aeiou":
        en_det = "an"
    de_words = (["sehr"] if very and adjs else []) + [a.stem + endings for a in adjs] + [noun.de(case, plural)]
    det_tag = {"num": "CD", "many": "JJ"}.get(det, "PRP$" if det in POSSESSIVES else "DT")
    return Tree("NP", (*([preterminal(det_tag, en_det)] if en_det else []), *en_words)), " ".join(
        ([de_det] if de_det else []) + de_words)


def noun_phrase(noun: str, case: str, det: str = "def", *, plural: bool = False, adjectives: Sequence[str] = (),
                count: int = 0, very: bool = False) -> tuple[Tree, str]:
    """An (English tree, German) noun phrase; gender comes from the noun, case and number are explicit.

    Args:
      noun: English singular of a lexicon noun ("dog").
      case: "nom", "acc" or "dat".
      det: "def", "indef" (singular), "this", a possessive ("my", ..., "their"), or for plurals "num" (with
        `count`), "some", "many", "bare".
      plural: plural number (implied by the plural-only determiners).
      adjectives: English adjectives of the lexicon, in order.
      count: the number 2..99 for det="num".
      very: put "very"/"sehr" before the adjectives.

    Example: noun_phrase("dog", "dat", adjectives=["small"]) is ((NP (DT the) (JJ small) (NN dog)), "dem kleinen
    Hund"); the English words are the tree's leaves, "the small dog".
    """
    adjs = [_ADJ_BY_EN[a] for a in adjectives]
    plural = plural or det in ("num", "some", "many", "bare")
    return inflected_np(_NOUN_BY_EN[noun], case, det, plural, adjs, count, very)


def prepositional_phrase(prep: str, noun: str, det: str = "def", **kwargs) -> tuple[Tree, str]:
    """An (English tree, German) prepositional phrase; the case is the preposition's, "zu dem" contracts to "zum"."""
    p = PREPOSITIONS[prep]
    en, de = noun_phrase(noun, p.case, det, **kwargs)
    return with_preposition(p, en, de, det)


def with_preposition(p: Preposition, en: Tree, de: str, det: str) -> tuple[Tree, str]:
    """The PP of preposition ``p`` over an (English tree, German) noun phrase in ``p``'s case; "zu dem" → "zum"."""
    art, _, rest = de.partition(" ")
    if det == "def" and (p.de, art) in _CONTRACTIONS:
        return english_pp(p.en, en), f"{_CONTRACTIONS[p.de, art]} {rest}"
    return english_pp(p.en, en), f"{p.de} {de}"
