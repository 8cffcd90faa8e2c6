"""Tests of the built-in synthetic EN→DE corpus: determinism, splits, lengths, and German grammar spot checks."""

import collections
import dataclasses
import random
import re

import pytest

from transformer_jax.data import synthetic as syn
from transformer_jax.data.synthetic import ADVERBS, VERBS, Clause, noun_phrase, prepositional_phrase, render
from transformer_jax.data.synthetic_lexicon import AUXILIARIES, MODALS
from transformer_jax.parsing.trees import Tree

SUBORDINATORS = {"weil", "dass", "wenn", "obwohl"}
FINITE = syn.german_finite_forms()
AUX = AUXILIARIES
AUX_FORMS = {f for table in AUX.values() for f in table.values()}
MODAL_FORMS = {f for _, table in MODALS.values() for f in table.values()}
INFINITIVES = {v.de_inf for v in VERBS.values()} | {"sein"}
# Participles that are not also an infinitive or a finite form (vergessen, bekommen are), so their position is telling.
PARTICIPLES = {v.de_pp for v in VERBS.values()} - INFINITIVES - FINITE | {"gewesen"}


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    rng = random.Random(1234)
    return [syn.generate_pair(rng) for _ in range(4000)]


@pytest.fixture(scope="module")
def splits() -> dict[str, list[tuple[str, str]]]:
    return syn.generate_splits(seed=3, train_size=3000, dev_size=300, test_size=300)


def words(sentence: str) -> list[str]:
    return re.findall(r"[\wäöüÄÖÜß-]+", sentence)


def text(phrase: tuple[Tree, str]) -> tuple[str, str]:
    """An (English tree, German) phrase as its (English, German) text: the English words are the tree's leaves."""
    en, de = phrase
    return " ".join(en.leaves()), de


def pronoun(en: str, de: str) -> tuple[Tree, str]:
    return Tree("NP", (Tree("PRP", (en,)),)), de


def segments(german: str) -> list[list[str]]:
    """Clauses of a German sentence: everything between commas (every clause boundary has one)."""
    return [words(s) for s in re.split(r"[,.]", german) if s.strip()]


# -- splits ----------------------------------------------------------------------------------------------------------
def test_config_defaults_and_sizes(splits):
    config = syn.SyntheticConfig()
    assert (config.seed, config.train_size, config.dev_size, config.test_size) == (0, 100_000, 1_000, 1_000)
    assert {k: len(v) for k, v in splits.items()} == {"train": 3000, "dev": 300, "test": 300}
    small = dataclasses.replace(config, train_size=50, dev_size=5, test_size=5)
    assert [len(v) for v in syn.generate_splits(**dataclasses.asdict(small)).values()] == [50, 5, 5]


def test_deterministic(splits):
    assert syn.generate_splits(seed=3, train_size=3000, dev_size=300, test_size=300) == splits
    other = syn.generate_splits(seed=4, train_size=3000, dev_size=300, test_size=300)
    assert all(other[k] != splits[k] for k in splits)
    rng_a, rng_b = random.Random(7), random.Random(7)
    assert [syn.generate_pair(rng_a) for _ in range(50)] == [syn.generate_pair(rng_b) for _ in range(50)]


def test_splits_disjoint(splits):
    test, dev = [e for e, _ in splits["test"]], [e for e, _ in splits["dev"]]
    train = {e for e, _ in splits["train"]}
    assert len(set(test)) == len(test) and len(set(dev)) == len(dev)
    assert not set(test) & set(dev) and not train & set(test) and not train & set(dev)


def test_lengths_and_form(pairs):
    lengths = [len(s.split()) for pair in pairs for s in pair]
    assert min(lengths) >= 3 and max(lengths) <= 60
    assert sum(n >= 40 for n in lengths) >= 10  # long sentences with long-range dependencies exist
    for en, de in pairs:
        assert en[0].isupper() and de[0].isupper() and en.endswith(".") and de.endswith(".")
        assert not re.search(r"\ba [aeiou]|\ban [^aeiou ]", en), en


def test_translation_is_a_function(pairs):
    german = collections.defaultdict(set)
    for en, de in pairs:
        german[en].add(de)
    assert all(len(v) == 1 for v in german.values())


def test_lemma_count():
    assert syn.lemma_count() == syn.NUM_LEMMAS >= 300
    assert len(syn.NOUNS) + len(VERBS) + len(syn.ADJECTIVES) + len(ADVERBS) >= 300


# -- exact strings ---------------------------------------------------------------------------------------------------
def test_numbers():
    assert [syn.german_number(n) for n in (1, 7, 16, 17, 21, 30, 31, 47, 99)] == [
        "eins", "sieben", "sechzehn", "siebzehn", "einundzwanzig", "dreißig", "einunddreißig", "siebenundvierzig",
        "neunundneunzig"]
    assert [syn.english_number(n) for n in (1, 13, 21, 40, 99)] == ["one", "thirteen", "twenty-one", "forty",
                                                                     "ninety-nine"]
    assert text(noun_phrase("dog", "dat", "num", count=21, adjectives=["small"])) == (
        "twenty-one small dogs", "einundzwanzig kleinen Hunden")
    with pytest.raises(ValueError):
        syn.german_number(100)


@pytest.mark.parametrize("args, kwargs, expected", [
    (("dog", "dat"), {"adjectives": ["small"]}, ("the small dog", "dem kleinen Hund")),
    (("dog", "nom", "indef"), {"adjectives": ["small"]}, ("a small dog", "ein kleiner Hund")),
    (("cat", "acc", "indef"), {"adjectives": ["small"]}, ("a small cat", "eine kleine Katze")),
    (("dog", "dat"), {"adjectives": ["small"], "plural": True}, ("the small dogs", "den kleinen Hunden")),
    (("dog", "nom", "num"), {"adjectives": ["small"], "count": 2}, ("two small dogs", "zwei kleine Hunde")),
    (("child", "nom", "indef"), {"adjectives": ["old"]}, ("an old child", "ein altes Kind")),
    (("child", "acc", "my"), {"adjectives": ["small"], "plural": True}, ("my small children", "meine kleinen Kinder")),
    (("cat", "dat", "our"), {"adjectives": ["black"]}, ("our black cat", "unserer schwarzen Katze")),
    (("house", "nom", "this"), {"adjectives": ["high"], "very": True},
     ("this very high house", "dieses sehr hohe Haus")),
    (("car", "acc", "many"), {"adjectives": ["expensive"]}, ("many expensive cars", "viele teure Autos")),
    (("boy", "acc"), {}, ("the boy", "den Jungen")),
    (("gentleman", "dat", "indef"), {"adjectives": ["tired"]}, ("a tired gentleman", "einem müden Herrn")),
    (("mouse", "nom", "bare"), {"adjectives": ["dark"], "plural": True}, ("dark mice", "dunkle Mäuse")),
])
def test_noun_phrase(args, kwargs, expected):
    assert text(noun_phrase(*args, **kwargs)) == expected


def test_prepositional_phrases():
    assert text(prepositional_phrase("to", "school")) == ("to the school", "zur Schule")
    assert text(prepositional_phrase("to", "station")) == ("to the station", "zum Bahnhof")
    assert text(prepositional_phrase("in", "park", adjectives=["big"])) == ("in the big park", "im großen Park")
    assert text(prepositional_phrase("with", "child", plural=True)) == ("with the children", "mit den Kindern")
    assert text(prepositional_phrase("for", "dog", "indef")) == ("for a dog", "für einen Hund")
    assert text(prepositional_phrase("through", "forest", "this")) == ("through this forest", "durch diesen Wald")


def _clause(subj, person, verb, tense="pres", **kwargs):
    return Clause(subj, person, VERBS[verb], tense, **kwargs)


def test_word_order_exact():
    man, woman = noun_phrase("man", "nom"), noun_phrase("woman", "nom")
    dog = noun_phrase("dog", "acc", adjectives=["small"])
    c = _clause(man, "3s", "sehen", "perf", objs=[dog], adv=ADVERBS["today"], front="adv",
                pps=[prepositional_phrase("in", "park")])
    assert render(c) == ("Today the man has seen the small dog in the park.",
                         "Heute hat der Mann den kleinen Hund im Park gesehen.")
    c.adjuncts = [("because", "weil", _clause(woman, "3s", "lachen", "can", adv=ADVERBS["quietly"]))]
    assert render(c)[1] == "Heute hat der Mann den kleinen Hund im Park gesehen, weil die Frau leise lachen kann."
    sub = _clause(pronoun("you", "du"), "2s", "helfen", "perf", objs=[noun_phrase("child", "dat")])
    main = _clause(pronoun("I", "ich"), "1s", "lesen", "want", objs=[noun_phrase("book", "acc", "indef")])
    assert render(main, ("because", "weil", sub)) == (
        "Because you have helped the child, I want to read a book.",
        "Weil du dem Kind geholfen hast, will ich ein Buch lesen.")
    give = _clause(pronoun("we", "wir"), "1p", "geben",
                   objs=[noun_phrase("teacher", "dat"), noun_phrase("ball", "acc")])
    assert render(give) == ("We give the teacher the ball.", "Wir geben dem Lehrer den Ball.")
    go = _clause(noun_phrase("boy", "nom", plural=True), "3p", "gehen", "perf",
                 pps=[prepositional_phrase("to", "station")], front="pp")
    assert render(go) == ("To the station the boys have gone.", "Zum Bahnhof sind die Jungen gegangen.")
    tired = Tree("ADJP", (Tree("RB", ("very",)), Tree("JJ", ("tired",)))), "sehr müde"
    be = Clause(pronoun("she", "sie"), "3s", syn.BE, "perf", pred=tired, adv=ADVERBS["yesterday"])
    assert render(be) == ("She has been very tired yesterday.", "Sie ist gestern sehr müde gewesen.")


def test_nested_clauses_exact():
    inner = _clause(noun_phrase("dog", "nom"), "3s", "fangen", "perf", objs=[noun_phrase("cat", "acc", "indef")])
    middle = _clause(pronoun("you", "du"), "2s", "sagen", "perf", comp=inner)
    outer = _clause(pronoun("I", "ich"), "1s", "wissen", comp=middle)
    assert render(outer) == ("I know that you have said that the dog has caught a cat.",
                             "Ich weiß, dass du gesagt hast, dass der Hund eine Katze gefangen hat.")


def test_word_order_matters():
    """Swapping subject and object keeps the English bag of words but changes the German words (case)."""
    man_dog = render(_clause(noun_phrase("man", "nom"), "3s", "sehen", objs=[noun_phrase("dog", "acc")]))
    dog_man = render(_clause(noun_phrase("dog", "nom"), "3s", "sehen", objs=[noun_phrase("man", "acc")]))
    assert sorted(man_dog[0].lower().rstrip(".").split()) == sorted(dog_man[0].lower().rstrip(".").split())
    assert sorted(man_dog[1].lower().split()) != sorted(dog_man[1].lower().split())


# -- grammar over generated pairs ------------------------------------------------------------------------------------
def test_verb_second_after_fronted_adverb(pairs):
    single = [a for a in ADVERBS.values() if a.frontable and " " not in a.en]
    checked = 0
    for en, de in pairs:
        for adv in single:
            if en.startswith(adv.en.capitalize() + " "):
                tokens = de.split()
                assert tokens[0] == adv.de.capitalize() and tokens[1] in FINITE, (en, de)
                checked += 1
    assert checked >= 20


def test_pronoun_subject_agreement(pairs):
    checked = 0
    for en, de in pairs:
        first = words(de)[:2]
        person = {"Ich": "1s", "Du": "2s", "Er": "3s", "Wir": "1p"}.get(first[0])
        if person:
            assert first[1] in syn.german_finite_forms(person), de
            checked += 1
        if en.startswith("I "):
            assert de.startswith("Ich ")
    assert checked >= 50


def test_subordinate_clauses_verb_last(pairs):
    checked = 0
    for _, de in pairs:
        for seg in segments(de):
            if seg[0].lower() not in SUBORDINATORS:
                continue
            checked += 1
            assert seg[-1] in FINITE, de
            if any(t in PARTICIPLES for t in seg):  # perfect: "..., weil er den Hund gesehen hat"
                assert seg[-2] in PARTICIPLES and seg[-1] in AUX_FORMS, de
            if any(t in MODAL_FORMS for t in seg):  # modal: "..., weil er den Hund sehen kann"
                assert seg[-1] in MODAL_FORMS and seg[-2] in INFINITIVES, de
    assert checked >= 500


def test_main_clauses_participle_last(pairs):
    checked = 0
    for _, de in pairs:
        for seg in segments(de):
            if seg[0].lower() not in SUBORDINATORS and any(t in PARTICIPLES for t in seg):
                assert seg[-1] in PARTICIPLES, de
                checked += 1
    assert checked >= 300


def test_case_endings(pairs):
    german = "\n".join(de for _, de in pairs)
    lowered = "\n".join(de[0].lower() + de[1:] for _, de in pairs)  # sentence-initial articles, never nouns
    articles = "dem|einem|diesem|meinem|deinem|seinem|ihrem|unserem|zum|beim|vom|im"
    dative = re.findall(rf"\b(?:{articles}) (?:sehr )?([a-zäöüß]+)", lowered)
    dative += re.findall(r"\b(?:mit|bei|von|nach|aus|in) (?:der|einer|dieser) (?:sehr )?([a-zäöüß]+)", lowered)
    dative += re.findall(r"\bzur (?:sehr )?([a-zäöüß]+)", lowered)
    assert len(dative) > 300 and all(adj.endswith("en") for adj in dative)
    nominative = re.findall(r"^Der (?:sehr )?([a-zäöüß]+) ", german, re.MULTILINE)
    assert len(nominative) > 20 and all(adj.endswith("e") for adj in nominative)
    ein = re.findall(r"^Ein (?:sehr )?([a-zäöüß]+) ", german, re.MULTILINE)
    assert len(ein) > 20 and all(adj.endswith(("er", "es")) for adj in ein)


def test_prepositions_govern_case(pairs):
    articles = {"der", "die", "das", "den", "dem", "ein", "eine", "einen", "einem", "einer"}
    seen = collections.Counter()
    for _, de in pairs:
        tokens = words(de)
        for i, tok in enumerate(tokens[:-1]):
            prep, nxt = tok.lower(), tokens[i + 1]
            if prep == "mit" and nxt in articles:
                assert nxt in {"dem", "der", "den", "einem", "einer"}, de
                if nxt == "den":  # dative plural noun: -n or -s
                    noun = next(t for t in tokens[i + 2:] if t[0].isupper())
                    assert noun[-1] in "ns", de
                seen["mit"] += 1
            if prep in ("für", "ohne", "durch", "gegen") and nxt in articles:
                assert nxt in {"den", "die", "das", "ein", "eine", "einen"}, de
                seen["acc"] += 1
    assert seen["mit"] >= 50 and seen["acc"] >= 50


def test_numbers_translate(pairs):
    english = {syn.english_number(n): syn.german_number(n) for n in range(2, 100)}
    checked = 0
    for en, de in pairs:
        for w in words(en):
            if w.lower() in english:
                assert english[w.lower()] in de.lower().split(), (en, de)
                checked += 1
    assert checked >= 50


@pytest.mark.parametrize("source_name", ["synthetic", "synthetic_parse"])
def test_a_held_out_split_is_read_without_drawing_train(source_name, monkeypatch):
    """Scoring dev or test must not draw the (e.g. 200K) training pairs again, and must give the same pairs as the
    whole generation (held-out splits are drawn first, from their own streams)."""
    from types import SimpleNamespace

    from transformer_jax.data.sources import get_source
    from transformer_jax.parsing.trees import linearize

    sizes = {"seed": 1, "train_size": 300, "dev_size": 7, "test_size": 9}
    generate = syn.generate_splits if source_name == "synthetic" else syn.generate_parse_splits
    whole = generate(**sizes)
    drawn = []
    real = syn._draw
    monkeypatch.setattr(syn, "_draw", lambda rng, n, *args: drawn.append(n) or real(rng, n, *args))
    source = get_source(SimpleNamespace(source=source_name, synthetic=sizes, source_lang="en",
                                        target_lang="tree" if source_name == "synthetic_parse" else "de"))
    for split in ("dev", "test"):
        target = (lambda de: de) if source_name == "synthetic" else linearize
        assert source.load(split) == [(en, target(out)) for en, out in whole[split]]
    assert 300 not in drawn
    assert len(source.load("train")) == 300 and 300 in drawn
