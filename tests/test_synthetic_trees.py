"""Tests of the synthetic corpus's English constituency trees (the parsing task, §6.3) and of its unchanged pairs."""

import copy
import hashlib
import json
import pickle
import random
import re

import pytest

from transformer_jax.data import synthetic as syn
from transformer_jax.data.synthetic import Clause, english_tree, noun_phrase, prepositional_phrase, render
from transformer_jax.data.synthetic_trees import adverb_tree
from transformer_jax.parsing.trees import Tree, TreeError, to_bracketed

SIZES = {"train_size": 400, "dev_size": 50, "test_size": 50}


@pytest.fixture(scope="module")
def parse_splits() -> dict[str, list[tuple[str, Tree]]]:
    return syn.generate_parse_splits(seed=0, **SIZES)


def read_tree(bracketed: str) -> tuple[str, list]:
    """An independent reader: (label, children), each child a word or a (label, children); asserts well-formedness."""
    tokens = re.findall(r"\(|\)|[^\s()]+", bracketed)
    assert "".join(tokens) == re.sub(r"\s", "", bracketed) and bracketed == bracketed.strip()
    pos = 0

    def node() -> tuple[str, list]:
        nonlocal pos
        assert tokens[pos] == "(" and tokens[pos + 1] not in "()", bracketed
        label, children, pos = tokens[pos + 1], [], pos + 2
        while tokens[pos] != ")":
            if tokens[pos] == "(":
                children.append(node())
            else:
                children.append(tokens[pos])
                pos += 1
        pos += 1
        words = [c for c in children if isinstance(c, str)]
        assert children and (not words or len(children) == 1), f"mixed or empty node {label} in {bracketed}"
        return label, children

    tree = node()
    assert pos == len(tokens), bracketed
    return tree


def leaves(tree) -> list[str]:
    return [tree] if isinstance(tree, str) else [w for c in tree[1] for w in leaves(c)]


def labels(tree, phrases: set, tags: set) -> None:
    label, children = tree
    if isinstance(children[0], str):
        tags.add(label)
    else:
        phrases.add(label)
        for c in children:
            labels(c, phrases, tags)


def detokenised(tokens: str) -> str:
    return tokens.replace(" ,", ",").removesuffix(" .") + "."


# -- generated trees -------------------------------------------------------------------------------------------------
def test_trees_well_formed_leaves_and_labels(parse_splits):
    phrases, tags, n = set(), set(), 0
    for split in parse_splits.values():
        for tokens, parse in split:
            bracketed = to_bracketed(parse)
            tree = read_tree(bracketed)
            assert leaves(tree) == tokens.split(" ") == parse.leaves(), (tokens, bracketed)
            assert tree[0] == "S" and tree[1][-1] == (".", ["."]), bracketed
            assert re.fullmatch(r"[A-Z]\S*( \S+)* \.", tokens) and tokens.count(".") == 1, tokens
            labels(tree, phrases, tags)
            n += 1
    assert n == 500
    assert phrases == syn.PHRASE_LABELS and tags == syn.POS_TAGS  # documented and all of them used
    assert not syn.PHRASE_LABELS & syn.POS_TAGS


def test_parse_splits_are_the_english_of_the_translation_splits(parse_splits):
    translation = syn.generate_splits(seed=0, **SIZES)
    for split, pairs in parse_splits.items():
        assert [detokenised(t) for t, _ in pairs] == [en for en, _ in translation[split]]
        assert all(type(t) is str and type(tree) is Tree for t, tree in pairs)


def test_parse_splits_disjoint_and_deterministic(parse_splits):
    assert {k: len(v) for k, v in parse_splits.items()} == {"train": 400, "dev": 50, "test": 50}
    test, dev = [t for t, _ in parse_splits["test"]], [t for t, _ in parse_splits["dev"]]
    train = {t for t, _ in parse_splits["train"]}
    assert len(set(test)) == len(test) and len(set(dev)) == len(dev)
    assert not set(test) & set(dev) and not train & set(test) and not train & set(dev)
    assert syn.generate_parse_splits(seed=0, **SIZES) == parse_splits
    other = syn.generate_parse_splits(seed=1, **SIZES)
    assert all(other[k] != parse_splits[k] for k in parse_splits)
    rng_a, rng_b = random.Random(7), random.Random(7)
    assert [syn.generate_parse_pair(rng_a) for _ in range(20)] == [syn.generate_parse_pair(rng_b) for _ in range(20)]


# -- translation pairs unchanged by the trees ------------------------------------------------------------------------
PINNED = {  # generate_splits(seed=0, train_size=50, dev_size=5, test_size=5), captured before trees were added
    "train": [
        (("Nine rich grandmothers say that you show sixty gentlemen a story every day, but the bad spoon is heavy "
          "later."), ("Neun reiche Großmütter sagen, dass du jeden Tag sechzig Herren eine Geschichte zeigst, aber der "
                      "schlechte Löffel ist später schwer.")),
        ("Your duck jumps against a stupid mouse, or my aunt can receive spoons next week.",
         "Deine Ente springt gegen eine dumme Maus, oder meine Tante kann nächste Woche Löffel bekommen."),
        ("After the trip you dance on Tuesday.", "Nach der Reise tanzt du am Dienstag.")],
    "dev": [
        ("Teachers and a thin cat carry the chicken after a lesson every day.",
         "Lehrer und eine dünne Katze tragen jeden Tag das Huhn nach einer Unterrichtsstunde.")],
    "test": [
        ("Our ugly neighbour counts eighteen dirty dogs from this mountain.",
         "Unser hässlicher Nachbar zählt achtzehn schmutzige Hunde von diesem Berg."),
        ("With the farmer the clean gentleman has saved a doctor.",
         "Mit dem Bauern hat der saubere Herr einen Arzt gerettet."),
        (("Our sausage is new, and here we have been beautiful although they want to repair the dry bicycle for a "
          "brave doctor."), ("Unsere Wurst ist neu, und hier sind wir schön gewesen, obwohl sie das trockene Fahrrad "
                             "für einen mutigen Arzt reparieren wollen."))],
}
PINNED_SHA256 = "c17dbf23e9ab8570f9a65f2371c743af2337c8a20804f2e0f5368f28d61f1a8a"  # of the 2000/200/200 splits below


def test_translation_pairs_unchanged():
    splits = syn.generate_splits(seed=0, train_size=50, dev_size=5, test_size=5)
    assert {k: splits[k][:len(v)] for k, v in PINNED.items()} == PINNED
    larger = syn.generate_splits(seed=0, train_size=2000, dev_size=200, test_size=200)
    assert hashlib.sha256(json.dumps(larger, ensure_ascii=False).encode()).hexdigest() == PINNED_SHA256
    assert all(type(s) is str for pairs in larger.values() for pair in pairs for s in pair)


# -- hand-checked trees ----------------------------------------------------------------------------------------------
def _clause(subj, person, verb, tense="pres", **kwargs) -> Clause:
    return Clause(subj, person, syn.VERBS[verb], tense, **kwargs)


def pronoun(en: str, de: str) -> tuple[Tree, str]:
    return Tree("NP", (Tree("PRP", (en,)),)), de


def check(clause: Clause, sentence: str, bracketed: str, fronted=None) -> None:
    tree = english_tree(clause, fronted)
    assert render(clause, fronted)[0] == sentence == detokenised(" ".join(tree.leaves()))
    assert to_bracketed(tree) == bracketed
    assert leaves(read_tree(bracketed)) == tree.leaves()


def test_fronted_adverb_perfect_and_adjunct_clause():
    dog = noun_phrase("dog", "acc", adjectives=["small"])
    c = _clause(noun_phrase("man", "nom"), "3s", "sehen", "perf", objs=[dog],
                adv=syn.ADVERBS["today"], front="adv", pps=[prepositional_phrase("in", "park")])
    c.adjuncts = [("because", "weil", _clause(noun_phrase("woman", "nom"), "3s", "lachen", "can",
                                              adv=syn.ADVERBS["quietly"]))]
    check(c, "Today the man has seen the small dog in the park because the woman can laugh quietly.",
          "(S (NP (NN Today)) (NP (DT the) (NN man)) (VP (VBZ has) (VP (VBN seen) (NP (DT the) (JJ small) (NN dog)) "
          "(PP (IN in) (NP (DT the) (NN park))) (SBAR (IN because) (S (NP (DT the) (NN woman)) (VP (MD can) "
          "(VP (VB laugh) (ADVP (RB quietly)))))))) (. .))")


def test_fronted_subordinate_clause_and_want_to():
    sub = _clause(pronoun("you", "du"), "2s", "helfen", "perf", objs=[noun_phrase("child", "dat")])
    main = _clause(pronoun("I", "ich"), "1s", "lesen", "want", objs=[noun_phrase("book", "acc", "indef")])
    check(main, "Because you have helped the child, I want to read a book.",
          "(S (SBAR (IN Because) (S (NP (PRP you)) (VP (VBP have) (VP (VBN helped) (NP (DT the) (NN child)))))) "
          "(, ,) (NP (PRP I)) (VP (VBP want) (S (VP (TO to) (VP (VB read) (NP (DT a) (NN book)))))) (. .))",
          ("because", "weil", sub))
    check(main, "When you have helped the child, I want to read a book.",
          "(S (SBAR (WHADVP (WRB When)) (S (NP (PRP you)) (VP (VBP have) (VP (VBN helped) (NP (DT the) (NN child)))))) "
          "(, ,) (NP (PRP I)) (VP (VBP want) (S (VP (TO to) (VP (VB read) (NP (DT a) (NN book)))))) (. .))",
          ("when", "wenn", sub))


def test_nested_that_clauses():
    inner = _clause(noun_phrase("dog", "nom"), "3s", "fangen", "perf", objs=[noun_phrase("cat", "acc", "indef")])
    middle = _clause(pronoun("you", "du"), "2s", "sagen", "perf", comp=inner)
    check(_clause(pronoun("I", "ich"), "1s", "wissen", comp=middle),
          "I know that you have said that the dog has caught a cat.",
          "(S (NP (PRP I)) (VP (VBP know) (SBAR (IN that) (S (NP (PRP you)) (VP (VBP have) (VP (VBN said) "
          "(SBAR (IN that) (S (NP (DT the) (NN dog)) (VP (VBZ has) (VP (VBN caught) (NP (DT a) (NN cat))))))))))) "
          "(. .))")


def test_copula_ditransitive_fronted_pp():
    tired = Tree("ADJP", (Tree("RB", ("very",)), Tree("JJ", ("tired",)))), "sehr müde"
    be = Clause(pronoun("she", "sie"), "3s", syn.BE, "perf", pred=tired, adv=syn.ADVERBS["yesterday"])
    check(be, "She has been very tired yesterday.",
          "(S (NP (PRP She)) (VP (VBZ has) (VP (VBN been) (ADJP (RB very) (JJ tired)) (NP (NN yesterday)))) (. .))")
    give = _clause(pronoun("we", "wir"), "1p", "geben", "must",
                   objs=[noun_phrase("teacher", "dat"), noun_phrase("ball", "acc")], adv=syn.ADVERBS["on Monday"])
    check(give, "We must give the teacher the ball on Monday.",
          "(S (NP (PRP We)) (VP (MD must) (VP (VB give) (NP (DT the) (NN teacher)) (NP (DT the) (NN ball)) "
          "(PP (IN on) (NP (NNP Monday))))) (. .))")
    go = _clause(noun_phrase("boy", "nom", plural=True), "3p", "gehen", "perf",
                 pps=[prepositional_phrase("to", "station"), prepositional_phrase("out of", "house")], front="pp")
    check(go, "To the station the boys have gone out of the house.",
          "(S (PP (TO To) (NP (DT the) (NN station))) (NP (DT the) (NNS boys)) (VP (VBP have) (VP (VBN gone) "
          "(PP (IN out) (PP (IN of) (NP (DT the) (NN house)))))) (. .))")


def test_particle_verbs_and_adverbs():
    look = _clause(noun_phrase("girl", "nom"), "3s", "suchen", objs=[noun_phrase("key", "acc", "her")],
                   adv=syn.ADVERBS["every day"])
    check(look, "The girl looks for her key every day.",
          "(S (NP (DT The) (NN girl)) (VP (VBZ looks) (PP (IN for) (NP (PRP$ her) (NN key))) "
          "(NP (DT every) (NN day))) (. .))")
    wave = _clause(pronoun("they", "sie"), "3p", "winken", "may", objs=[noun_phrase("child", "dat", "many")],
                   adv=syn.ADVERBS["often"], front="adv")
    check(wave, "Often they may wave to many children.",
          "(S (ADVP (RB Often)) (NP (PRP they)) (VP (MD may) (VP (VB wave) (PP (TO to) (NP (JJ many) "
          "(NNS children))))) (. .))")
    assert [to_bracketed(adverb_tree(a)) for a in ("in the morning", "at night", "last week", "this morning")] == [
        "(PP (IN in) (NP (DT the) (NN morning)))", "(PP (IN at) (NP (NN night)))", "(NP (JJ last) (NN week))",
        "(NP (DT this) (NN morning))"]


@pytest.mark.parametrize("args, kwargs, expected", [
    (("dog", "nom", "num"), {"count": 21, "adjectives": ["small"]}, "(NP (CD twenty-one) (JJ small) (NNS dogs))"),
    (("house", "nom", "this"), {"adjectives": ["high", "old"], "very": True},
     "(NP (DT this) (ADJP (RB very) (JJ high)) (JJ old) (NN house))"),
    (("egg", "acc", "indef"), {}, "(NP (DT an) (NN egg))"),
    (("mouse", "nom", "bare"), {"plural": True}, "(NP (NNS mice))"),
    (("cat", "dat", "some"), {}, "(NP (DT some) (NNS cats))"),
])
def test_noun_phrase_trees(args, kwargs, expected):
    en, _ = noun_phrase(*args, **kwargs)
    assert to_bracketed(en) == expected and en.leaves() == leaves(read_tree(expected))


def test_generated_coordination_and_attachment():
    """Coordinated clauses, coordinated noun phrases and a PP inside a noun phrase, checked by hand."""
    splits = syn.generate_parse_splits(seed=0, train_size=1, dev_size=1, test_size=0)
    assert to_bracketed(splits["train"][0][1]) == (
        "(S (S (NP (CD Nine) (JJ rich) (NNS grandmothers)) (VP (VBP say) (SBAR (IN that) (S (NP (PRP you)) "
        "(VP (VBP show) (NP (CD sixty) (NNS gentlemen)) (NP (DT a) (NN story)) (NP (DT every) (NN day))))))) (, ,) "
        "(CC but) (S (NP (DT the) (JJ bad) (NN spoon)) (VP (VBZ is) (ADJP (JJ heavy)) (ADVP (RB later)))) (. .))")
    assert to_bracketed(splits["dev"][0][1]) == (
        "(S (NP (NP (NNS Teachers)) (CC and) (NP (DT a) (JJ thin) (NN cat))) (VP (VBP carry) (NP (DT the) "
        "(NN chicken)) (PP (IN after) (NP (DT a) (NN lesson))) (NP (DT every) (NN day))) (. .))")
    rng = random.Random(0)
    pairs = [syn.generate_parse_pair(rng) for _ in range(95)]
    assert (pairs[94][0], to_bracketed(pairs[94][1])) == (
        "For this king the brother with the sad nurse kisses the pig in the city .",
        ("(S (PP (IN For) (NP (DT this) (NN king))) (NP (NP (DT the) (NN brother)) (PP (IN with) (NP (DT the) "
         "(JJ sad) (NN nurse)))) (VP (VBZ kisses) (NP (DT the) (NN pig)) (PP (IN in) (NP (DT the) (NN city)))) (. .))"))


def test_english_words_are_the_tree_leaves():
    """The grammar's phrases are the parsing task's one Tree type; the English text is the leaves."""
    en, _ = prepositional_phrase("with", "child", plural=True)
    assert type(en) is Tree and en.label == "PP" and " ".join(en.leaves()) == "with the children"
    for clone in (copy.deepcopy(en), copy.copy(en), pickle.loads(pickle.dumps(en))):
        assert clone == en and to_bracketed(clone) == to_bracketed(en)
    man = _clause(noun_phrase("man", "nom"), "3s", "schlafen")
    assert render(man)[0] == "The man sleeps."
    assert to_bracketed(english_tree(man)) == "(S (NP (DT The) (NN man)) (VP (VBZ sleeps)) (. .))"
    plain = _clause(("the man", "der Mann"), "3s", "schlafen")  # an unbracketed string is not a constituent
    with pytest.raises(TreeError, match="mixes words and constituents"):
        render(plain)
