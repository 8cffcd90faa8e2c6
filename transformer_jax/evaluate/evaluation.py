"""Evaluating a run on its dev or test split: translate every sentence in order, then score (§6.1, Table 2/3).

Writes ``<workdir>/translations_<split>.txt`` (one line per source sentence) and ``<workdir>/eval_<split>.json``
with sacreBLEU (+ signature), the paper's tokenized compound-split BLEU, chrF, the checkpoint and the count.
"""

import json
import time

import jax
import ml_collections

from transformer_jax.data import pipeline
from transformer_jax.decode.restore import RestoredRun
from transformer_jax.decode.translate import Translator
from transformer_jax.evaluate.bleu import evaluate_bleu
from transformer_jax.run import folder


def bleu_of(config: ml_collections.ConfigDict, hypotheses: list[str], references: list[str]) -> dict:
    """sacreBLEU, tokenized BLEU and chrF of hypotheses against references in the config's target language."""
    return evaluate_bleu(hypotheses, references, config.data.target_lang)


def evaluate_split(run: RestoredRun, workdir: str, split: str, progress: bool = True,
                   write: bool = True) -> dict:
    """Translates ``split`` with the restored parameters and returns (and writes) the scores."""
    src, refs, batches = pipeline.eval_data(run.config, run.tokenizer, split)
    tic = time.monotonic()
    translator = Translator(run.config, run.graphdef, run.params, run.tokenizer, run.mesh)
    hypotheses = translator.translate_batches(batches, progress=progress)
    result = bleu_of(run.config, hypotheses, refs)
    result.update(split=split, checkpoint=run.checkpoint, decode_seconds=time.monotonic() - tic,
                  decode_method=run.config.decode.method, beam_size=run.config.decode.beam_size,
                  length_penalty=run.config.decode.length_penalty)
    if write and jax.process_index() == 0:  # every process decodes; one writes
        with open(folder.translations_path(workdir, split), "w") as f:
            f.writelines(h + "\n" for h in hypotheses)
        with open(folder.eval_path(workdir, split), "w") as f:
            json.dump(result, f, indent=2)
    result["samples"] = list(zip(src[:5], hypotheses[:5], refs[:5]))
    return result


def dev_bleu_hook(config: ml_collections.ConfigDict, tokenizer, mesh):
    """An ``eval_hook`` for :func:`transformer_jax.train.trainer.train`: dev BLEU of the current parameters.

    Enabled by ``config.train.eval_bleu``; decodes the dev split with ``config.decode`` (beam 4 by default).
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
                "dev_tokenized_bleu": scores["tokenized_bleu"]}

    return hook
