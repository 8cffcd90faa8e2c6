"""Evaluating a run on its dev or test split: translate every sentence in order, then score (§6.1, Table 2/3).

Writes ``<workdir>/translations_<split>.txt`` (one line per source sentence) and ``<workdir>/eval_<split>.json``
with sacreBLEU (+ signature), the paper's tokenized compound-split BLEU, chrF, the checkpoint and the count.
A parsing run (``config.task == "parsing"``, §6.3) is scored with EVALB instead (`evaluate.parsing`): its
eval JSON has precision, recall, F1, exact match and the number of outputs that needed repair, and
``<workdir>/parses_<split>.txt`` holds the scored (repaired) trees.
"""

import json
import time

import jax
import ml_collections

from transformer_jax.data import pipeline
from transformer_jax.data.sources import get_source
from transformer_jax.decode.restore import RestoredRun
from transformer_jax.decode.translate import Translator
from transformer_jax.evaluate.bleu import evaluate_bleu
from transformer_jax.evaluate.parsing import score_parses
from transformer_jax.run import folder


def bleu_of(config: ml_collections.ConfigDict, hypotheses: list[str], references: list[str]) -> dict:
    """sacreBLEU, tokenized BLEU and chrF of hypotheses against references in the config's target language."""
    return evaluate_bleu(hypotheses, references, config.data.target_lang)


def evaluate_split(run: RestoredRun, workdir: str, split: str, progress: bool = True,
                   write: bool = True) -> dict:
    """Translates ``split`` with the restored parameters (this library's beam search) and returns (and writes) the
    scores."""
    translator = Translator(run.config, run.graphdef, run.params, run.tokenizer, run.mesh)
    return score_split(run.config, run.tokenizer, translator, run.checkpoint, workdir, split, progress, write)


def score_split(config: ml_collections.ConfigDict, tokenizer, translator, checkpoint: str, workdir: str, split: str,
                progress: bool = True, write: bool = True, engine: str = "jax") -> dict:
    """Translates ``split`` with ``translator`` (any engine's: ``translate_batches(batches, progress)`` in the
    split's order) and returns (and writes) the scores; ``checkpoint`` says what it decodes with."""
    src, refs, batches = pipeline.eval_data(config, tokenizer, split)
    tic = time.monotonic()
    hypotheses = translator.translate_batches(batches, progress=progress)
    parses = None
    if config.get("task", "translation") == "parsing":
        gold = get_source(config.data).gold_trees(split)
        result, parses = score_parses(hypotheses, gold, bool(config.data.get("pos_tags", False)))
    else:
        result = bleu_of(config, hypotheses, refs)
    result.update(split=split, checkpoint=checkpoint, decode_seconds=time.monotonic() - tic, engine=engine,
                  decode_method=config.decode.method, beam_size=config.decode.beam_size,
                  length_penalty=config.decode.length_penalty)
    if parses is not None:  # whether the search could only write trees over the input's words (parsing/constraint.py)
        result.update(tree_constraint=bool(config.decode.get("tree_constraint", False)))
    if write and jax.process_index() == 0:  # every process decodes; one writes
        with open(folder.translations_path(workdir, split), "w") as f:
            f.writelines(h + "\n" for h in hypotheses)
        if parses is not None:
            with open(folder.path(workdir, f"parses_{split}.txt"), "w") as f:
                f.writelines(tree + "\n" for tree in parses)
        with open(folder.eval_path(workdir, split), "w") as f:
            json.dump(result, f, indent=2)
    result["samples"] = list(zip(src[:5], hypotheses[:5], refs[:5]))
    return result


def score_line(result: dict) -> str:
    """One line of an evaluation's scores, as `evaluate` and `train --eval_splits` print it."""
    where = f"{result['checkpoint']}, {result['decode_seconds']:.1f} s"
    if "f1" in result:  # parsing (§6.3)
        cutoff = next((key for key in result if key.startswith("len<=")), None)  # EVALB's second summary
        below = ""
        if cutoff:
            s = result[cutoff]
            below = (f"; ≤ {cutoff.removeprefix('len<=')} words: F1 {s['f1']:.2f}  exact match "
                     f"{s['exact_match']:.2f} ({s['sentences']} sentences)")
        return (f"{result['split']}: F1 {result['f1']:.2f}  precision {result['precision']:.2f}  recall "
                f"{result['recall']:.2f}  exact match {result['exact_match']:.2f}{below}  "
                f"({result['sentences']} sentences, {result['errors']} EVALB errors, {result['repaired']} outputs "
                f"repaired; {where})")
    return (f"{result['split']}: sacreBLEU {result['sacrebleu']:.2f}  lowercased {result['sacrebleu_lowercase']:.2f}  "
            f"tokenized BLEU {result['tokenized_bleu']:.2f}  chrF {result['chrf']:.2f}  "
            f"BP {result['brevity_penalty']:.3f} (length {result['hyp_length']}/{result['ref_length']})  "
            f"({result['num_sentences']} sentences, {where})")


def dev_bleu_hook(config: ml_collections.ConfigDict, tokenizer, mesh):
    """An ``eval_hook`` for :func:`transformer_jax.train.trainer.train`: dev BLEU and chrF of the current parameters.

    Enabled by ``config.train.eval_bleu``; decodes the dev split with ``config.decode`` (beam 4 by default). chrF is
    logged beside BLEU because it moves early in training: sacreBLEU is 0 until an output word matches a reference
    word, and the tokenized BLEU until a 4-gram does, while chrF scores character n-grams. The brevity penalty is
    logged too: below 1 the outputs are shorter than the references, which the length penalty α can correct.
    """
    src, refs, batches = pipeline.eval_data(config, tokenizer, "dev")
    del src

    translators = {}  # one Translator (one compiled decoder) reused at every evaluation

    def hook(setup, params, step) -> dict:
        del step
        if "t" not in translators:
            translators["t"] = Translator(config, setup.graphdef, params, tokenizer, mesh)
        translator = translators["t"]
        translator.params = params
        hypotheses = translator.translate_batches(batches)
        scores = bleu_of(config, hypotheses, refs)
        return {"dev_bleu": scores["sacrebleu"], "dev_bleu_lowercase": scores["sacrebleu_lowercase"],
                "dev_tokenized_bleu": scores["tokenized_bleu"], "dev_chrf": scores["chrf"],
                "dev_brevity_penalty": scores["brevity_penalty"]}

    return hook
