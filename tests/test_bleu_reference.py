"""BLEU against the real tools: Moses tokenizer.perl + tensor2tensor's compound split + multi-bleu.perl, and the
sacreBLEU command line, on 200 German lines (../shared/data/bleu_reference, see its README.md).

The fixture holds what the reference tools printed and the tokenizer's output line by line, so a change of
tokenizer, compound split, smoothing or sacreBLEU defaults in transformer_jax/evaluate/bleu.py fails here.
"""

import html
import json
from pathlib import Path

import pytest

from transformer_jax.evaluate import bleu

REFERENCE = Path(__file__).resolve().parents[1] / "../shared/data/bleu_reference"  # always there (CI too)


def _lines(name: str) -> list[str]:
    return (REFERENCE / name).read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads((REFERENCE / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def texts() -> tuple[list[str], list[str]]:
    hyp, ref = _lines("hyp.de"), _lines("ref.de")
    assert len(hyp) == len(ref) == 200
    return hyp, ref


def test_tokenized_bleu_equals_multi_bleu_perl(texts, expected):
    hyp, ref = texts
    score = bleu.tokenized_bleu(hyp, ref, "de")
    assert score == pytest.approx(expected["paper_tokenized_bleu"], abs=0.01)
    # The tools' variants differ from it by ≥ 0.04: the match above tells them apart.
    for other in ("tokenized_bleu_without_compound_split", "paper_tokenized_bleu_with_tokenizer_after_nov_2018"):
        assert abs(expected[other] - expected["paper_tokenized_bleu"]) > 0.02


def test_evaluate_bleu_reports_the_tools_numbers(texts, expected):
    hyp, ref = texts
    result = bleu.evaluate_bleu(hyp, ref, "de")
    assert result["tokenized_bleu"] == pytest.approx(expected["paper_tokenized_bleu"], abs=0.01)
    assert result["sacrebleu"] == pytest.approx(expected["sacrebleu"], abs=1e-4)
    assert result["chrf"] == pytest.approx(expected["chrf"], abs=1e-4)
    assert result["signature"] == expected["sacrebleu_signature"]
    assert result["chrf_signature"] == expected["chrf_signature"]
    assert result["num_sentences"] == 200


@pytest.mark.parametrize("side", ["hyp", "ref"])
def test_tokens_match_tokenizer_perl_line_by_line(side):
    raw, reference = _lines(f"{side}.de"), _lines(f"{side}.tok.atat.de")
    assert len(raw) == len(reference)
    mismatches = []
    for i, (line, tokenized) in enumerate(zip(raw, reference)):
        ours = bleu._paper_tokenize(line, "de").split()
        # tokenizer.perl escapes &, ", ', <, >, |, [, ] as HTML entities; ours keeps the characters.
        theirs = [html.unescape(token) for token in tokenized.split()]
        if ours != theirs:
            mismatches.append((i + 1, ours, theirs))
    assert not mismatches, f"{len(mismatches)} lines differ, first: {mismatches[:3]}"
    # The fixture does exercise the compound split and the escaping.
    assert any("##AT##-##AT##" in line for line in reference)
    assert any("&quot;" in line or "&apos;" in line for line in reference)
