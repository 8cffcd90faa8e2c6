"""Tests for EVALB with COLLINS.prm (§6.3, Table 4): hand-worked sentences with the numbers evalb prints."""

import pytest

from transformer_jax.evaluate.evalb import score
from transformer_jax.parsing.trees import delinearize, linearize, normalize, read_trees

CAT = "(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"  # 5 brackets, 6 words
NO_PP = "(S (NP (DT The) (NN cat)) (VP (VBD sat) (IN on) (NP (DT the) (NN mat))) (. .))"  # CAT without its PP

PIERRE = """( (S (NP-SBJ (NP (NNP Pierre) (NNP Vinken) ) (, ,) (ADJP (NP (CD 61) (NNS years) ) (JJ old) ) (, ,) )
    (VP (MD will) (VP (VB join) (NP (DT the) (NN board) ) (PP-CLR (IN as) (NP (DT a) (JJ nonexecutive)
    (NN director) )) (NP-TMP (NNP Nov.) (CD 29) ))) (. .) ))"""

TRACES = """( (S (NP-SBJ-1 (PRP It) ) (VP (VBD was) (VP (VBN reported) (NP (-NONE- *-1) )
    (SBAR (-NONE- 0) (S (NP-SBJ (-NONE- *T*-2) ) (VP (-NONE- *?*) ))))) (. .) ))"""


def trees(*texts):
    return [t for text in texts for t in read_trees(text)]


def evalb(gold, test):
    """score() for one gold and one test sentence given as bracketed text."""
    return score(trees(gold), trees(test))


def rounded(result, *keys):
    return tuple(round(result[k], 2) for k in keys)


def test_gold_against_itself_is_perfect():
    gold = trees(CAT, PIERRE, TRACES)
    result = score(gold, gold)
    assert rounded(result, "precision", "recall", "f1", "exact_match", "tagging_accuracy") == (100,) * 5
    assert (result["crossing_brackets_avg"], result["sentences"], result["errors"]) == (0, 3, 0)
    assert result["gold_brackets"] == 5 + 11 + 4  # the .mrg wrapper reads as TOP (deleted), S counts; traces not


def test_raw_and_normalised_gold_score_the_same():
    raw = trees(CAT, PIERRE, TRACES)
    result = score(raw, [normalize(t) for t in raw])
    assert rounded(result, "precision", "recall", "f1", "exact_match") == (100, 100, 100, 100)


def test_row_of_the_evalb_readme():
    # README [4]: "1  8  0  100.00 100.00  5  5  5  0  6  5  83.33" — 8 tokens of which 2 punctuation, 1 tag wrong.
    gold = "(S (NP (DT The) (NN cat)) (, ,) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"
    row = evalb(gold, gold.replace("(VBD sat)", "(VBN sat)"))["per_sentence"][0]
    assert row == {
        "id": 1, "length": 8, "status": 0, "matched": 5, "gold_brackets": 5, "test_brackets": 5, "crossing": 0,
        "words": 6, "correct_tags": 5, "recall": 100.0, "precision": 100.0,
    }  # fmt: skip


def test_missing_constituent():
    result = evalb(CAT, NO_PP)
    assert rounded(result, "precision", "recall", "f1", "exact_match") == (100, 80, 88.89, 0)
    assert result["crossing_brackets_avg"] == 0


def test_extra_constituent():
    result = evalb(CAT, "(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NX (NN mat))))) (. .))")
    assert rounded(result, "precision", "recall", "f1") == (83.33, 100, 90.91)


def test_crossing_bracket():
    # (NP The cat sat) crosses the gold (VP sat on the mat); the test VP (on the mat) nests in it.
    result = evalb(CAT, "(S (NP (DT The) (NN cat) (VBD sat)) (VP (PP (IN on) (NP (DT the) (NN mat)))) (. .))")
    assert rounded(result, "precision", "recall", "f1") == (60, 60, 60)
    assert (result["crossing_brackets_avg"], result["no_crossing"], result["two_or_less_crossing"]) == (1, 0, 100)


def test_a_test_bracket_crossing_two_gold_brackets_counts_once():
    result = evalb("(S (A (X a) (X b)) (B (X c) (X d)))", "(S (X a) (C (X b) (X c)) (X d))")
    assert result["per_sentence"][0]["crossing"] == 1
    assert rounded(result, "precision", "recall") == (50, 33.33)


def test_punctuation_is_deleted_before_spans_are_compared():
    gold = "(S (NP (NNP John)) (, ,) (VP (VBD left)) (. .))"
    for test in (
        "(S (NP (NNP John) (, ,)) (VP (VBD left) (. .)))",  # NP and VP still cover one word each
        "(S (NP (NNP John)) (PRN (, ,)) (VP (VBD left)) (. .))",  # a bracket over punctuation only is not counted
    ):
        result = evalb(gold, test)
        assert rounded(result, "precision", "recall", "f1") == (100, 100, 100)
        assert (result["test_brackets"], result["per_sentence"][0]["length"]) == (3, 4)


def test_empty_elements_are_deleted_and_do_not_count_for_length():
    result = evalb(TRACES, "(S (NP (PRP It)) (VP (VBD was) (VP (VBN reported))) (. .))")
    assert rounded(result, "precision", "recall") == (100, 100)
    assert (result["gold_brackets"], result["per_sentence"][0]["length"]) == (4, 4)


def test_function_tags_and_indices_are_ignored():
    gold = "(S (NP-SBJ-1 (PRP He)) (VP (VBD left) (NP-TMP=2 (NN yesterday))))"
    result = evalb(gold, "(S (NP (PRP He)) (VP (VBD left) (NP (NN yesterday))))")
    assert rounded(result, "f1") == (100,)


def test_advp_and_prt_are_the_same_label():
    gold = "(S (NP (PRP He)) (VP (VBD gave) (PRT (RP up))) (. .))"
    assert rounded(evalb(gold, gold.replace("PRT", "ADVP")), "f1") == (100,)
    assert rounded(evalb(gold, gold.replace("PRT", "ADJP")), "precision", "recall") == (75, 75)


def test_duplicate_brackets_count_as_a_multiset():
    two = "(S (NP (NP (DT the) (NN dog))) (VP (VBD ran)))"
    one = "(S (NP (DT the) (NN dog)) (VP (VBD ran)))"
    assert rounded(evalb(two, one), "precision", "recall") == (100, 75)  # n > m: recall m/n
    assert rounded(evalb(one, two), "precision", "recall") == (75, 100)  # m > n: precision n/m


def test_only_top_is_deleted_the_sentence_bracket_counts():
    gold = "(TOP (S (NP (PRP It)) (VP (VBZ rains))))"
    assert rounded(evalb(gold, "(S (NP (PRP It)) (VP (VBZ rains)))"), "f1") == (100,)
    assert rounded(evalb(gold, "(FRAG (NP (PRP It)) (VP (VBZ rains)))"), "precision", "recall") == (66.67, 66.67)


def test_corpus_scores_sum_counts_over_valid_sentences():
    gold = trees(CAT, CAT, "(S (NP (NN x)) (VP (VB y)))", CAT, CAT)
    test = trees(
        CAT,
        NO_PP,  # 4 of 5 matched
        "(S (VP (NN x)) (NP (VB y)))",  # 1 of 3 matched
        CAT.replace("(NN cat)", "(NN cat) (NN dog)"),  # length mismatch: an error
        "(S (. .))",  # no word: skipped
    )
    result = score(gold, test)
    assert (result["matched_brackets"], result["gold_brackets"], result["test_brackets"]) == (10, 13, 12)
    assert rounded(result, "recall", "precision", "f1", "exact_match") == (76.92, 83.33, 80, 33.33)
    assert (result["sentences"], result["errors"], result["skipped"], result["valid_sentences"]) == (5, 1, 1, 3)
    assert result["complete_sentences"] == 1
    assert [row["status"] for row in result["per_sentence"]] == [0, 0, 0, 1, 2]


def test_different_words_are_an_error():
    result = evalb(CAT, CAT.replace("mat", "hat"))
    assert (result["errors"], result["valid_sentences"], result["f1"]) == (1, 0, 0)


def test_length_cutoff_summary():
    long = "(S (NP " + " ".join(f"(NN w{i})" for i in range(41)) + ") (. .))"  # 42 tokens
    result = score(trees(long, CAT), trees(long, NO_PP))
    assert rounded(result, "precision", "recall") == (100, 85.71)
    assert result["len<=40"]["sentences"] == 1
    assert rounded(result["len<=40"], "precision", "recall") == (100, 80)


def test_xx_output_needs_the_gold_tags():
    (gold,) = trees(PIERRE)
    normalized = normalize(gold)
    tokens = linearize(normalized)
    tagged = delinearize(tokens, normalized.leaves(), tags=normalized.tags())
    assert rounded(score([gold], [tagged]), "f1", "tagging_accuracy") == (100, 100)
    untagged = delinearize(tokens, normalized.leaves())  # XX commas are words to EVALB: a length mismatch
    assert score([gold], [untagged])["errors"] == 1


def test_one_test_tree_per_gold_tree():
    with pytest.raises(ValueError, match="2 gold and 1 test"):
        score(trees(CAT, CAT), trees(CAT))
