"""BLEU as the paper computed it (tokenized, compound-split) and as it should be reported (sacreBLEU).

The paper's Table 2/3 BLEU is tokenized BLEU: Moses tokenizer + multi-bleu.perl, with "compound splitting"
of intra-word hyphens (`a-b` → `a ##AT##-##AT## b`) in both hypothesis and reference, exactly as
tensor2tensor's older ``get_ende_bleu.sh`` (2017, the paper's time):

    tokenizer.perl -l de < file > file.tok                      # no -a (aggressive dash splitting)
    perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g' < file.tok > file.atat
    multi-bleu.perl ref.atat < hyp.atat

Two later changes are deliberately not followed. Later versions of ``get_ende_bleu.sh`` first run Moses
``replace-unicode-punctuation.perl -l de`` on the output (e.g. „“ → ""); we do not. And ``tokenizer.perl``
is Moses' as it was before November 2018: it keeps a line-final dot on ``n.V.``, ``Nr. 1.`` or
``www.beispiel.de.``, which mosesdecoder commit 9fc964da7 ("split final dots unconditionally") splits off.
sacremoses reproduces the older behaviour: token for token on ../shared/data/bleu_reference, 77.18 as the
reference tools give there (the newer tokenizer gives 77.22).

It reads higher than detokenized sacreBLEU on the same output, so both are reported, the latter
with its signature. Inputs are detokenized sentences (one per line, single reference).
"""

from __future__ import annotations

import functools
import re

from sacrebleu.metrics import BLEU, CHRF
from sacremoses import MosesTokenizer

# Perl's s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g: non-overlapping left to right, like re.sub, so "a-b-c" becomes
# "a ##AT##-##AT## b-c" (the "b" is consumed by the first match) in both tools.
_INTRA_WORD_HYPHEN = re.compile(r"(\S)-(\S)")


def _check_pairs(hypotheses: list[str], references: list[str]) -> None:
    """One clear error for mismatched or empty inputs (ValueError) or a non-string line (TypeError)."""
    if len(hypotheses) != len(references):
        raise ValueError(
            f"BLEU needs one hypothesis per reference: got {len(hypotheses)} hypotheses and {len(references)} "
            "references"
        )
    if not hypotheses:
        raise ValueError("BLEU needs at least one sentence, got empty lists")
    for name, lines in (("hypotheses", hypotheses), ("references", references)):
        for i, line in enumerate(lines):
            if not isinstance(line, str):
                raise TypeError(f"{name}[{i}] is {type(line).__name__}, expected str")


def sacrebleu_score(hypotheses: list[str], references: list[str]) -> dict:
    """Detokenized corpus BLEU and chrF with sacreBLEU's defaults (13a tokenizer, exp smoothing, mixed case).

    Args:
        hypotheses: detokenized system outputs, one per sentence.
        references: one detokenized reference per sentence.

    Returns:
        ``{"bleu": float, "signature": str, "bleu_lowercase": float, "lowercase_signature": str, "chrf": float,
        "chrf_signature": str, "brevity_penalty": float, "hyp_length": int, "ref_length": int}``; the signatures
        (e.g. ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``) make the numbers reproducible.
        ``bleu_lowercase`` is sacreBLEU's ``-lc`` (case-insensitive, ``case:lc``): most published Multi30k numbers
        are case-insensitive. ``brevity_penalty`` is the cased score's BP, ``min(1, exp(1 - ref_length /
        hyp_length))`` over 13a tokens: below 1 it says how much of the score a too-short output costs (what the
        length penalty α of §6.1 trades against).
    """
    _check_pairs(hypotheses, references)
    bleu, lowercase, chrf = BLEU(), BLEU(lowercase=True), CHRF()
    cased = bleu.corpus_score(hypotheses, [references])
    return {
        "bleu": float(cased.score),
        "signature": str(bleu.get_signature()),
        "bleu_lowercase": float(lowercase.corpus_score(hypotheses, [references]).score),
        "lowercase_signature": str(lowercase.get_signature()),
        "chrf": float(chrf.corpus_score(hypotheses, [references]).score),
        "chrf_signature": str(chrf.get_signature()),
        "brevity_penalty": float(cased.bp),
        "hyp_length": int(cased.sys_len),
        "ref_length": int(cased.ref_len),
    }


def compound_split(text: str) -> str:
    """Splits intra-word hyphens as tensor2tensor's get_ende_bleu.sh: ``a-b`` → ``a ##AT##-##AT## b``.

    Applied to Moses-tokenized text. Example: ``"Die Ost-West-Beziehung"`` →
    ``"Die Ost ##AT##-##AT## West ##AT##-##AT## Beziehung"``.
    """
    return _INTRA_WORD_HYPHEN.sub(r"\1 ##AT##-##AT## \2", text)


@functools.lru_cache(maxsize=8)
def _moses(lang: str) -> MosesTokenizer:
    return MosesTokenizer(lang=lang)


def _paper_tokenize(text: str, lang: str) -> str:
    """Moses tokenization as tokenizer.perl without -a, then compound splitting.

    ``escape=False`` differs from tokenizer.perl's default (``&quot;`` etc.) only by a one-to-one renaming of
    single tokens, which leaves BLEU unchanged.
    """
    tokens = _moses(lang).tokenize(text, aggressive_dash_splits=False, escape=False, return_str=True)
    return compound_split(tokens)


def tokenized_bleu(hypotheses: list[str], references: list[str], lang: str) -> float:
    """The paper's BLEU: Moses-tokenize (``lang``) and compound-split both sides, then multi-bleu.perl.

    multi-bleu.perl is reproduced by sacreBLEU with ``tokenize='none'`` (split on whitespace), case
    sensitive and ``smooth_method='none'`` (a zero n-gram precision gives 0, as in the perl script).

    Args:
        hypotheses: detokenized system outputs.
        references: one detokenized reference per sentence.
        lang: target language code for the Moses tokenizer (e.g. ``"de"``).

    Returns:
        Corpus BLEU in [0, 100].
    """
    _check_pairs(hypotheses, references)
    hyp = [_paper_tokenize(line, lang) for line in hypotheses]
    ref = [_paper_tokenize(line, lang) for line in references]
    bleu = BLEU(tokenize="none", smooth_method="none", force=True)
    return float(bleu.corpus_score(hyp, [ref]).score)


def evaluate_bleu(hypotheses: list[str], references: list[str], target_lang: str) -> dict:
    """Both BLEU numbers of the report (§6.1, Table 2) and chrF for one system output.

    Args:
        hypotheses: detokenized system outputs.
        references: one detokenized reference per sentence.
        target_lang: target language code (Moses tokenizer of the tokenized BLEU).

    Returns:
        ``{"sacrebleu", "sacrebleu_lowercase", "tokenized_bleu", "chrf", "signature", "lowercase_signature",
        "chrf_signature", "brevity_penalty", "hyp_length", "ref_length", "num_sentences"}`` (the lengths are
        sacreBLEU's 13a token counts of the whole corpus).

    Raises:
        ValueError: mismatched line counts or empty input.
        TypeError: a line that is not a string.
    """
    _check_pairs(hypotheses, references)
    sacre = sacrebleu_score(hypotheses, references)
    return {
        "sacrebleu": sacre["bleu"],
        "sacrebleu_lowercase": sacre["bleu_lowercase"],
        "tokenized_bleu": tokenized_bleu(hypotheses, references, target_lang),
        "chrf": sacre["chrf"],
        "signature": sacre["signature"],
        "lowercase_signature": sacre["lowercase_signature"],
        "chrf_signature": sacre["chrf_signature"],
        "brevity_penalty": sacre["brevity_penalty"],
        "hyp_length": sacre["hyp_length"],
        "ref_length": sacre["ref_length"],
        "num_sentences": len(hypotheses),
    }
