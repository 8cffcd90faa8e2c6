"""Scoring a parser's decoded outputs (§6.3, Table 4): repair each output into a tree over the input words, then
EVALB with COLLINS.prm.

Each output (a linearised tree, `transformer_jax.parsing.trees.linearize`) is made a well-formed tree over exactly
the sentence's words by `transformer_jax.parsing.repair.repair` — a no-op for outputs that are already trees — with
the gold POS tags on its leaves (the output has Vinyals et al.'s ``XX`` slots; EVALB tells punctuation by its tag,
and the tags themselves are not what a bracketing score measures). How many outputs needed repair is reported.
"""

from transformer_jax.evaluate import evalb
from transformer_jax.parsing.repair import repair
from transformer_jax.parsing.trees import Tree, to_bracketed


def score_parses(outputs: list[str], gold: list[Tree], pos_tags: bool = False) -> tuple[dict, list[str]]:
    """EVALB scores of decoded ``outputs`` against the ``gold`` trees (same order), and the repaired trees.

    Returns:
      (scores, trees): scores = `evalb.score`'s corpus numbers (``precision``, ``recall``, ``f1``,
      ``exact_match``, ...) plus ``repaired`` (outputs that were not well-formed trees over the input words) and
      ``repair_rate`` (%); trees = the scored trees, bracketed, one per output.
    """
    if len(outputs) != len(gold):
        raise ValueError(f"{len(outputs)} outputs for {len(gold)} gold trees.")
    trees, repaired = [], 0
    for output, tree in zip(outputs, gold):
        fixed, needed = repair(output, tree.leaves(), tags=tree.tags(), pos_tags=pos_tags)
        trees.append(fixed)
        repaired += needed
    scores = {key: value for key, value in evalb.score(gold, trees).items() if key != "per_sentence"}
    if not pos_tags:  # the leaves carry the gold tags: a tagging accuracy would be 100 by construction
        for summary in (scores, *(v for v in scores.values() if isinstance(v, dict))):
            summary.pop("tagging_accuracy", None)
    scores.update(repaired=repaired, repair_rate=100.0 * repaired / max(len(outputs), 1))
    return scores, [to_bracketed(tree) for tree in trees]
