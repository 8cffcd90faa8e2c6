"""Tests for the paper's tokenized compound-split BLEU and sacreBLEU reporting."""

import math

import pytest

from transformer_jax.evaluate.bleu import compound_split, evaluate_bleu, sacrebleu_score, tokenized_bleu

# One substituted word. 13a keeps "well-known" whole (7 tokens), the paper's tokenization makes it
# "well ##AT##-##AT## known" (9 tokens), adding matched n-grams around the hyphen.
HYP = ["the well-known cat sat on the mat"]
REF = ["the well-known man sat on the mat"]
# Hand-computed: n-gram precisions with the word at position 2 (of 7) or 4 (of 9) wrong, BP = 1.
SACRE_BLEU = 100 * (6 / 7 * 4 / 6 * 2 / 5 * 1 / 4) ** 0.25  # ≈ 48.89
PAPER_BLEU = 100 * (8 / 9 * 6 / 8 * 4 / 7 * 2 / 6) ** 0.25  # ≈ 59.70


def test_compound_split_fixed_strings():
    assert compound_split("Die Ost-West-Beziehung") == "Die Ost ##AT##-##AT## West ##AT##-##AT## Beziehung"
    assert compound_split("well-known") == "well ##AT##-##AT## known"
    # Only intra-word hyphens; perl's non-overlapping /g matching leaves the second hyphen of "a-b-c".
    assert compound_split("a - b") == "a - b"
    assert compound_split("-x y-") == "-x y-"
    assert compound_split("a-b-c") == "a ##AT##-##AT## b-c"
    assert compound_split("no hyphen here") == "no hyphen here"


def test_identical_is_100():
    lines = ["Die Ost-West-Beziehung ist gut.", 'Ein zweiter, längerer Satz mit "Zitat" & mehr.']
    result = evaluate_bleu(lines, lines, "de")
    assert result["sacrebleu"] == pytest.approx(100.0)
    assert result["tokenized_bleu"] == pytest.approx(100.0)
    assert result["chrf"] == pytest.approx(100.0)
    assert result["num_sentences"] == 2


def test_hand_computed_scores_and_direction():
    assert sacrebleu_score(HYP, REF)["bleu"] == pytest.approx(SACRE_BLEU, abs=1e-6)
    assert tokenized_bleu(HYP, REF, "en") == pytest.approx(PAPER_BLEU, abs=1e-6)
    assert PAPER_BLEU > SACRE_BLEU  # compound splitting reads higher, as the paper's numbers do
    # Without the hyphen there is nothing to split: both tokenizations give the same 7 tokens.
    plain_hyp, plain_ref = ["the famous cat sat on the mat"], ["the famous man sat on the mat"]
    assert tokenized_bleu(plain_hyp, plain_ref, "en") == pytest.approx(SACRE_BLEU, abs=1e-6)


def test_tokenized_bleu_is_multi_bleu_without_smoothing():
    # No matching 4-gram: multi-bleu.perl gives 0; sacreBLEU's default exp smoothing would not.
    hyp, ref = ["a b c d e"], ["a b x d e"]
    assert tokenized_bleu(hyp, ref, "en") == 0.0
    assert sacrebleu_score(hyp, ref)["bleu"] > 0.0


def test_moses_tokenization_splits_punctuation():
    # "gut." vs "gut ." tokenize to the same tokens; 13a also splits the final period.
    assert tokenized_bleu(["Das ist gut."], ["Das ist gut ."], "de") == pytest.approx(100.0)


def test_signatures():
    result = evaluate_bleu(HYP, REF, "en")
    assert "nrefs:1" in result["signature"] and "tok:13a" in result["signature"]
    assert "smooth:exp" in result["signature"] and "case:mixed" in result["signature"]
    assert "nrefs:1" in result["chrf_signature"]
    assert math.isfinite(result["chrf"]) and 0.0 < result["chrf"] < 100.0
    assert result["tokenized_bleu"] > result["sacrebleu"]


def test_mismatched_lengths_are_a_clear_error():
    with pytest.raises(ValueError, match="2 hypotheses and 1 references"):
        evaluate_bleu(["a", "b"], ["a"], "de")
    with pytest.raises(ValueError, match="at least one"):
        tokenized_bleu([], [], "de")
    with pytest.raises(TypeError, match="expected str"):
        sacrebleu_score(["a", None], ["a", "b"])


def test_lowercased_sacrebleu_ignores_case_only():
    """sacreBLEU -lc: a hypothesis that differs from the reference only in case is perfect lowercased, not cased;
    the lowercased score is the cased score of the lowercased texts, with the case:lc signature."""
    refs = ["Ein Mann fährt Fahrrad auf der Straße .", "Zwei Hunde spielen im Park ."]
    hyps = ["ein mann fährt Fahrrad auf der straße .", "Zwei Hunde spielen im Garten ."]
    result = evaluate_bleu(hyps, refs, "de")
    lowered = evaluate_bleu([h.lower() for h in hyps], [r.lower() for r in refs], "de")
    assert result["sacrebleu_lowercase"] == pytest.approx(lowered["sacrebleu"])
    assert result["sacrebleu_lowercase"] > result["sacrebleu"]
    assert "case:lc" in result["lowercase_signature"] and "case:mixed" in result["signature"]
    assert evaluate_bleu([refs[1].upper()], [refs[1]], "de")["sacrebleu_lowercase"] == pytest.approx(100.0)  # (ß → SS)


def test_brevity_penalty_and_lengths_are_reported():
    """BP = exp(1 - r/c) for a hypothesis of c 13a tokens shorter than its reference's r, 1 when not shorter; the
    cased score is the geometric mean of the precisions times BP, so a bug in either is seen."""
    short = evaluate_bleu(["a b c d"], ["a b c d e f"], "en")
    assert (short["hyp_length"], short["ref_length"]) == (4, 6)
    assert short["brevity_penalty"] == pytest.approx(math.exp(1 - 6 / 4))
    assert short["sacrebleu"] == pytest.approx(100 * math.exp(1 - 6 / 4))  # every n-gram of "a b c d" matches
    long = evaluate_bleu(["a b c d e f g ."], ["a b c d e f ."], "en")
    assert (long["hyp_length"], long["ref_length"], long["brevity_penalty"]) == (8, 7, 1.0)
    assert evaluate_bleu(HYP, REF, "en")["brevity_penalty"] == 1.0
