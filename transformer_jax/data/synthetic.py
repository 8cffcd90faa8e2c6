"""The built-in synthetic English→German corpus: the offline default data set.

Why it exists: the quick start and the tests must train and score a Transformer with no network and no download,
and the result must say something about the paper. So the corpus is generated here from a small synchronous
grammar in which every English sentence has exactly one German translation, built by the same derivation.
It is made so that *word order matters*:

* German is verb-second in main clauses ("Heute sieht der Mann den Hund.") and verb-final in subordinate clauses,
  and the perfect participle or modal infinitive goes to the end of its clause ("..., weil der Mann heute den
  kleinen Hund mit dem Ball gesehen hat."), so translating means moving words across 10+ tokens;
* who does what to whom is marked only by English word order but by German case (der/den/dem, strong and weak
  adjective endings), so a bag of English words cannot be translated: a model without positional encodings
  (§3.5) must do clearly worse than one with them;
* "that"-clauses nest (say/think/know that ... because ...) up to four clauses deep, and clauses are coordinated.

Constructions (each rendered in both languages by one function, so pairs are correct by construction):
main clauses with a pronoun (I/you/he/she/we/they → ich/du/er/sie/wir/sie) or noun phrase subject, present,
perfect (haben/sein auxiliary) or modal (can/must/may/want to → können/müssen/dürfen/wollen) verb groups;
intransitive, accusative, dative, ditransitive (dative before accusative), copula + adjective, and verbs of saying
with a "that" → "dass" complement; time adverbs that may be fronted (verb second stays), manner adverbs,
prepositional phrases with dative (mit, bei, von, zu, nach, aus, in + location) or accusative (für, ohne, durch,
gegen) objects and the standard contractions (zum, zur, beim, vom, im), optionally fronted; trailing or fronted
because/when/although → weil/wenn/obwohl clauses; and/or/but → und/oder/aber between main clauses (comma in both
languages); coordinated noun phrases (plural agreement); noun phrases with definite, indefinite, demonstrative
(this/these → dies-), possessive, quantifier (some/many → einige/viele), bare plural and number (2–99, spelled out,
"twenty-one" → "einundzwanzig") determiners, zero to two adjectives (optionally "very" → "sehr") with
strong/weak/mixed endings, weak masculine nouns (den Jungen) and dative plural -n (den Kindern).
English is deliberately kept unambiguous where German would differ: adverbs and PPs always follow their own
clause's material and precede its subordinate clauses, "you" is always singular "du", nouns with identical English
singular and plural (sheep) are left out, and clause coordination happens only at the top level.

The grammar is split by concept; this module is its entry point (the corpus splits), and re-exports the public
names of the others so that callers import everything from here:

* :mod:`~transformer_jax.data.synthetic_lexicon` — the words of both languages and their irregular forms;
* :mod:`~transformer_jax.data.synthetic_phrases` — noun and prepositional phrases, German inflection, numbers;
* :mod:`~transformer_jax.data.synthetic_clauses` — :class:`Clause`, English and German word order (:func:`render`);
* :mod:`~transformer_jax.data.synthetic_trees` — the English side as Penn Treebank trees (§6.3);
* :mod:`~transformer_jax.data.synthetic_derivation` — random derivations, :func:`generate_pair`.

Constituency trees (the parsing task, §6.3): the English half of every derivation is a
:class:`transformer_jax.parsing.trees.Tree` whose leaves are the English words, so the one code path that renders an
English sentence also yields its Penn Treebank tree (`english_tree(clause)`). `generate_parse_splits` (one pair:
`generate_parse_pair`) returns (tokenised sentence, tree) pairs as in Vinyals et al. (2015):
"Today the man has seen the dog ." ↦
"(S (NP (NN Today)) (NP (DT the) (NN man)) (VP (VBZ has) (VP (VBN seen) (NP (DT the) (NN dog)))) (. .))" (the tree
as `to_bracketed` writes it). The tokens are the English sentence with "," and "." split off; the tree's leaves are
exactly these tokens. The bracketing conventions are in :mod:`~transformer_jax.data.synthetic_trees`.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any, TypeVar

from transformer_jax.data.synthetic_clauses import Clause, english_tree, render
from transformer_jax.data.synthetic_derivation import MAX_WORDS, MIN_WORDS, generate_pair, generate_parse_pair
from transformer_jax.data.synthetic_lexicon import (
    ADJECTIVES,
    ADVERBS,
    BE,
    CASES,
    NOUNS,
    NUM_LEMMAS,
    PERSONS,
    PREPOSITIONS,
    VERBS,
    Adjective,
    Adverb,
    Noun,
    Preposition,
    Verb,
    german_finite_forms,
    lemma_count,
)
from transformer_jax.data.synthetic_phrases import english_number, german_number, noun_phrase, prepositional_phrase
from transformer_jax.data.synthetic_trees import PHRASE_LABELS, POS_TAGS
from transformer_jax.parsing.trees import Tree

__all__ = [
    "ADJECTIVES", "ADVERBS", "BE", "CASES", "MAX_WORDS", "MIN_WORDS", "NOUNS", "NUM_LEMMAS", "PERSONS",
    "PHRASE_LABELS", "POS_TAGS", "PREPOSITIONS", "VERBS", "Adjective", "Adverb", "Clause", "Noun", "Preposition",
    "SyntheticConfig", "Verb", "english_number", "english_tree", "generate_pair", "generate_parse_pair",
    "generate_parse_splits", "generate_splits", "german_finite_forms", "german_number", "lemma_count", "noun_phrase",
    "one_split", "prepositional_phrase", "render",
]


@dataclasses.dataclass(frozen=True)
class SyntheticConfig:
    """Arguments of `generate_splits` (the `config.data.synthetic` block)."""

    seed: int = 0
    train_size: int = 100_000
    dev_size: int = 1_000
    test_size: int = 1_000


_T = TypeVar("_T")  # the second half of a drawn pair: German sentence or English tree


def _draw(rng: random.Random, n: int, exclude: set[str], unique: bool,
          draw: Callable[[random.Random], tuple[str, _T]]) -> list[tuple[str, _T]]:
    out: list[tuple[str, _T]] = []
    while len(out) < n:
        pair = draw(rng)
        if pair[0] not in exclude:
            out.append(pair)
            if unique:
                exclude.add(pair[0])
    return out


def _splits(seed: int, sizes: dict[str, int], draw: Callable[[random.Random], tuple[str, _T]]
            ) -> dict[str, list[tuple[str, _T]]]:
    held_out: set[str] = set()
    out = {split: _draw(random.Random(f"synthetic/{seed}/{split}"), sizes[split], held_out, split != "train", draw)
           for split in ("test", "dev", "train")}
    return {split: out[split] for split in ("train", "dev", "test")}


def one_split(generate: Callable[..., dict[str, list[_T]]], split: str, **kwargs: Any) -> list[_T]:
    """``generate(**kwargs)[split]`` (``generate``: :func:`generate_splits` or :func:`generate_parse_splits`).

    Dev and test are drawn before train and never depend on its size, so they are drawn without it: scoring a
    demo's dev split does not draw its 200K training pairs again.
    """
    if split != "train":
        kwargs = {**kwargs, "train_size": 0}
    return generate(**kwargs)[split]


def generate_splits(seed: int = 0, train_size: int = 100_000, dev_size: int = 1_000, test_size: int = 1_000
                    ) -> dict[str, list[tuple[str, str]]]:
    """Deterministic train/dev/test splits of (English, German) pairs.

    Test is drawn first, then dev (sentences unique within and across the two), then train, skipping every English
    sentence of dev or test (train may repeat its own short sentences, as natural corpora do). Each split has its
    own random stream, so changing one size does not change the other splits.
    """
    return _splits(seed, {"train": train_size, "dev": dev_size, "test": test_size}, generate_pair)


def generate_parse_splits(seed: int = 0, train_size: int = 40_000, dev_size: int = 1_000, test_size: int = 1_000
                          ) -> dict[str, list[tuple[str, Tree]]]:
    """Deterministic train/dev/test splits of (tokenised English sentence, PTB tree) pairs for parsing (§6.3).

    Same random streams and split discipline as `generate_splits`: with the same sizes, each split is the English
    side of `generate_splits`'s, in order, so no dev/test sentence of either task is in a train split of the other.
    A smaller size gives a prefix of the larger one's split. The default train size is about WSJ's (40K sentences).
    """
    return _splits(seed, {"train": train_size, "dev": dev_size, "test": test_size}, generate_parse_pair)
