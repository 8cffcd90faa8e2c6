"""Tests for PTB trees, their normalisation and GaFL linearisation (§6.3), and the repair of decoded trees."""

import random

import pytest

from transformer_jax.parsing.repair import repair
from transformer_jax.parsing.trees import (
    Tree,
    TreeError,
    delinearize,
    linearize,
    normalize,
    read_trees,
    strip_function_tags,
    to_bracketed,
)

# wsj_0001.mrg as the LDC ships it (outer unlabelled bracket, trees over several lines), and a third tree written
# in the same style with empty elements, co-indices, -LRB-/-RRB- and PRP$.
MRG = """\
( (S
    (NP-SBJ
      (NP (NNP Pierre) (NNP Vinken) )
      (, ,)
      (ADJP
        (NP (CD 61) (NNS years) )
        (JJ old) )
      (, ,) )
    (VP (MD will)
      (VP (VB join)
        (NP (DT the) (NN board) )
        (PP-CLR (IN as)
          (NP (DT a) (JJ nonexecutive) (NN director) ))
        (NP-TMP (NNP Nov.) (CD 29) )))
    (. .) ))
( (S
    (NP-SBJ (NNP Mr.) (NNP Vinken) )
    (VP (VBZ is)
      (NP-PRD
        (NP (NN chairman) )
        (PP (IN of)
          (NP
            (NP (NNP Elsevier) (NNP N.V.) )
            (, ,)
            (NP (DT the) (NNP Dutch) (VBG publishing) (NN group) )))))
    (. .) ))
( (S
    (NP-SBJ (DT The) (NN company) )
    (VP (VBD said)
      (SBAR (-NONE- 0)
        (S
          (NP-SBJ-1 (PRP it) )
          (VP (VBD expected)
            (S
              (NP-SBJ=2 (-NONE- *-1) )
              (VP (TO to)
                (VP (VB report)
                  (NP (PRP$ its) (NNS results) )
                  (PRN (-LRB- -LRB-) (ADVP-TMP (RB soon) ) (-RRB- -RRB-) ))))))))
    (. .) ))
"""

NORMALIZED = [
    (
        "(S (NP (NP (NNP Pierre) (NNP Vinken)) (, ,) (ADJP (NP (CD 61) (NNS years)) (JJ old)) (, ,)) (VP (MD will) "
        "(VP (VB join) (NP (DT the) (NN board)) (PP (IN as) (NP (DT a) (JJ nonexecutive) (NN director))) "
        "(NP (NNP Nov.) (CD 29)))) (. .))"
    ),
    (
        "(S (NP (NNP Mr.) (NNP Vinken)) (VP (VBZ is) (NP (NP (NN chairman)) (PP (IN of) (NP (NP (NNP Elsevier) "
        "(NNP N.V.)) (, ,) (NP (DT the) (NNP Dutch) (VBG publishing) (NN group)))))) (. .))"
    ),
    (
        "(S (NP (DT The) (NN company)) (VP (VBD said) (SBAR (S (NP (PRP it)) (VP (VBD expected) (S (VP (TO to) "
        "(VP (VB report) (NP (PRP$ its) (NNS results)) (PRN (-LRB- -LRB-) (ADVP (RB soon)) (-RRB- -RRB-))))))))) (. .))"
    ),
]


def tree(text: str) -> Tree:
    (result,) = read_trees(text)
    return result


# -- reading ------------------------------------------------------------------------------------------------------


def test_reads_every_tree_of_an_mrg_file_with_its_unlabelled_wrapper():
    trees = read_trees(MRG)
    assert len(trees) == 3
    assert [t.label for t in trees] == ["", "", ""]
    assert [t.children[0].label for t in trees] == ["S", "S", "S"]
    pierre = "Pierre Vinken , 61 years old , will join the board as a nonexecutive director Nov. 29 ."
    assert " ".join(trees[0].leaves()) == pierre
    assert trees[2].leaves()[3:5] == ["0", "it"]  # empty elements are words until normalised
    assert trees[2].tags().count("-NONE-") == 2
    assert trees[0].children[0].children[0].label == "NP-SBJ"


def test_bracketed_text_round_trips():
    trees = read_trees(MRG)
    assert [tree(to_bracketed(t)) for t in trees] == trees
    assert to_bracketed(trees[1]).startswith("( (S (NP-SBJ (NNP Mr.) (NNP Vinken)) (VP (VBZ is)")


def test_one_tree_per_line_and_ldc_copyright_banner():
    text = "*x*  Copyright (C) 1990 University of Pennsylvania  *x*\n(TOP (S (NN a)))\n\n(S (NN b))\n"
    assert [to_bracketed(t) for t in read_trees(text)] == ["(TOP (S (NN a)))", "(S (NN b))"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("(S (NN a))\n(S (NN b)", r"tree 2 \(line 2\): 1 bracket\(s\) not closed"),
        ("(S (NN a)))", r"tree 2 \(line 1\): '\)' without"),
        ("(S (NN a))\n\nword (S (NN b))", r"tree 2 \(line 3\): 'word' outside"),
        ("(S (NN a b))", "tree 1.*several words"),
        ("(S (NP (DT a) b))", "tree 1.*mixes words and constituents"),
    ],
)
def test_malformed_text_names_tree_and_line(text, message):
    with pytest.raises(TreeError, match=message):
        read_trees(text)


# -- normalisation ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "label, stripped",
    [("NP-SBJ-1", "NP"), ("NP=2", "NP"), ("PP-LOC-CLR", "PP"), ("S-TPC=3", "S"), ("ADVP|PRT", "ADVP|PRT")]
    + [(label, label) for label in ("-NONE-", "-LRB-", "-RRB-", "PRP$", "S", "WHNP")],
)
def test_function_tags_and_indices_are_stripped_as_evalb_does(label, stripped):
    assert strip_function_tags(label) == stripped


def test_normalize_removes_wrapper_empty_elements_and_function_tags():
    assert [to_bracketed(normalize(t)) for t in read_trees(MRG)] == NORMALIZED


def test_normalize_drops_top_root_and_constituents_left_empty():
    raining = tree("(TOP (S (NP-SBJ (-NONE- *)) (VP (VBZ rains) (SBAR (-NONE- 0) (S (-NONE- *T*-1)))) (. .)))")
    assert to_bracketed(normalize(raining)) == "(S (VP (VBZ rains)) (. .))"
    assert normalize(tree("( (S (NP-SBJ (-NONE- *)) (VP (-NONE- *?*))) )")) is None


# -- linearisation ------------------------------------------------------------------------------------------------

JOHN = "(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))"


def test_linearize_john_has_a_dog_as_in_vinyals_figure_2():
    john = tree(JOHN)
    assert linearize(john, pos_tags=True) == "(S (NP NNP )NP (VP VBZ (NP DT NN )NP )VP . )S"
    assert linearize(john) == "(S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S"


def test_linearize_a_normalised_ptb_tree():
    assert linearize(normalize(read_trees(MRG)[2])) == (
        "(S (NP XX XX )NP (VP XX (SBAR (S (NP XX )NP (VP XX (S (VP XX (VP XX (NP XX XX )NP (PRN XX (ADVP XX )ADVP XX "
        ")PRN )VP )VP )S )VP )S )SBAR )VP XX )S"
    )


@pytest.mark.parametrize("text", [*NORMALIZED, JOHN])
def test_linearize_then_delinearize_is_the_identity(text):
    t = tree(text)
    words = t.leaves()
    assert delinearize(linearize(t, pos_tags=True), words, pos_tags=True) == t
    assert delinearize(linearize(t), words, tags=t.tags()) == t
    xx = delinearize(linearize(t), words)
    assert xx.leaves() == words and set(xx.tags()) == {"XX"}


def test_linearize_rejects_unnormalised_trees():
    with pytest.raises(TreeError, match="normalise"):
        linearize(read_trees(MRG)[0])


@pytest.mark.parametrize(
    "tokens, words, message",
    [
        ("(S (NP XX )VP )S", "a", r"'\)VP' closes '\(NP'"),
        ("(S XX XX )S", "a", "more leaf slots"),
        ("(S XX )S", "a b", "1 leaf slots for 2 words"),
        ("(S XX NN )S", "a b", "stray token 'NN'"),
        ("(S XX )S (S XX )S", "a b", "2 top-level nodes"),
        ("(S (NP XX )NP", "a", "1 constituent"),
        ("(S (NP )NP XX )S", "a", "empty constituent"),
        (")S", "a", "closes nothing"),
        ("XX", "a", "a POS tag is not a parse"),
    ],
)
def test_delinearize_rejects_what_is_not_one_tree(tokens, words, message):
    with pytest.raises(TreeError, match=message):
        delinearize(tokens, words.split())


def test_tree_is_immutable_and_checks_its_shape():
    t = tree(JOHN)
    with pytest.raises(AttributeError):
        t.label = "NP"  # type: ignore[misc]
    with pytest.raises(TreeError):
        Tree("NN", ("a", "b"))
    assert Tree("NP", [Tree("NN", ("a",))]).children == (Tree("NN", ("a",)),)


# -- repair -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tokens, words, repaired",
    [
        (")NP (S (NP XX )NP XX )S", "a b", "(S (NP (XX a)) (XX b))"),  # an unmatched closer is dropped
        ("(S (NP XX XX", "a b", "(S (NP (XX a) (XX b)))"),  # open brackets are closed at the end
        ("(S (NP XX (PP XX )NP XX )S", "a b c", "(S (NP (XX a) (PP (XX b))) (XX c))"),  # )NP closes PP and NP
        ("(S (NP XX )VP XX )S", "a b", "(S (NP (XX a)) (XX b))"),  # a label not open closes the innermost
        ("(S XX XX XX )S", "a b", "(S (XX a) (XX b))"),  # extra leaf slots are dropped
        ("(S (NP XX )NP )S", "a b c", "(S (NP (XX a)) (XX b) (XX c))"),  # missing words go under the root
        ("(NP XX )NP (VP XX )VP", "a b", "(S (NP (XX a)) (VP (XX b)))"),  # several top nodes get a root
        ("XX", "a", "(S (XX a))"),  # a bare POS tag is not a parse
        ("(S NN XX <unk> ( )S", "a", "(S (XX a))"),  # stray tokens are dropped
        ("(S (NP )NP XX )S", "a", "(S (XX a))"),  # an empty constituent is dropped
        ("", "a b", "(S (XX a) (XX b))"),
    ],
)
def test_repair_rules(tokens, words, repaired):
    result, was_repaired = repair(tokens, words.split())
    assert (to_bracketed(result), was_repaired) == (repaired, True)


def test_repair_keeps_a_well_formed_tree_and_puts_tags_on_leaves():
    john = tree(JOHN)
    assert repair(linearize(john), john.leaves(), tags=john.tags()) == (john, False)
    result, was_repaired = repair("(S (NP XX )NP (VP XX", ["it", "rains"], tags=["PRP", "VBZ"])
    assert (to_bracketed(result), was_repaired) == ("(S (NP (PRP it)) (VP (VBZ rains)))", True)
    result, _ = repair("(S PRP (VP VBZ", ["it", "rains"], pos_tags=True)
    assert to_bracketed(result) == "(S (PRP it) (VP (VBZ rains)))"


@pytest.mark.parametrize("pos_tags", [False, True])
def test_repair_always_gives_a_well_formed_tree_over_the_words(pos_tags):
    rng = random.Random(1234)
    vocabulary = ["(S", "(NP", "(VP", "(PP", ")S", ")NP", ")VP", ")PP", ")", "(", "XX", "XX", "XX", "NN", "<unk>"]
    repaired = 0
    for _ in range(3000):
        tokens = " ".join(rng.choices(vocabulary, k=rng.randint(0, 20)))
        words = [f"w{i}" for i in range(rng.randint(1, 8))]
        result, was_repaired = repair(tokens, words, pos_tags=pos_tags)
        assert result.leaves() == words
        # Well formed: it linearises (labelled, non-empty constituents) and reads back to itself.
        assert delinearize(linearize(result, pos_tags=True), words, pos_tags=True) == result
        try:
            assert delinearize(tokens, words, pos_tags=pos_tags) == result and not was_repaired
        except TreeError:
            assert was_repaired
        repaired += was_repaired
    assert repaired > 2500  # random garbage is almost never a tree


def test_repair_refuses_an_empty_sentence():
    with pytest.raises(ValueError, match="empty sentence"):
        repair("(S )S", [])
