"""Translation with an exported CTranslate2 model under the run's own decoding rules (§6.1): ``--engine=ctranslate2``.

The same contract as :class:`transformer_jax.decode.translate.Translator` (``translate`` plain text,
``translate_batches`` evaluation batches, order kept, empty lines empty) and the same settings, ``config.decode``:

* Inputs: the ids our tokenizer and ``eval_batches`` give the JAX model (clipped to ``model.max_len``, EOS last),
  as pieces; CTranslate2 appends the EOS itself (the export sets ``add_source_eos``). Outputs: ids → our
  detokenizer.
* Maximum output length (§6.1: input length + 50): ``min(source tokens + decode.max_length_offset, model.max_len)``
  per sentence, EOS counted, as beam_search.py's ``max_lengths``. CTranslate2 takes one ``max_decoding_length`` per
  call, so sentences are sent in groups of equal length. ``min_decoding_length=0``: EOS may come first, as in ours.
* Beam search with the GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^α, |Y| counting EOS. CTranslate2 normalises by
  |Y|^α instead (``length_penalty``), and only when a search ends; no option computes lp(Y). Its scores are
  therefore turned back into log-probabilities (× |Y|^α, ``return_end_token`` keeps the EOS in |Y|) and the
  ``beam_size × PATIENCE`` finished hypotheses it returns are re-ranked by log p / lp(Y) (beam_search.py's
  ``length_normalizer``).
  Both searches keep the same live beam (the best K candidates that do not end, out of 2K); they differ in two
  rules, so a sentence can come out differently (tests/test_ctranslate2_export.py counts how often):
  (1) CTranslate2 finishes an EOS candidate only when it ranks among the K best of the step; ours also one ranked
  K+1..2K (at most one per beam); (2) CTranslate2 stops once K × patience hypotheses have finished (or, with α = 0,
  when the best candidate of a step ends); ours stops when no live hypothesis can still beat the best finished one
  (§6.1 "terminate early when possible"), which with a large α can run much longer.
* Greedy search, and beam search with ``beam_size=1``: CTranslate2's greedy search (ours with one beam can also
  finish an EOS ranked second, rule 1); sampling: its top-k / top-p / temperature sampling, seeded with
  ``config.seed`` (the same distribution as ours, not the same random draws).
* A source of no token but EOS (an empty line of an evaluation split) is translated as empty by CTranslate2 without
  decoding; ``translate`` gives empty lines for empty input with either engine.
"""

import itertools
import logging
import os
from collections.abc import Sequence

import ml_collections
import numpy as np
from tqdm import tqdm

from transformer_jax.data.tokenizer import EOS_ID, Tokenizer
from transformer_jax.decode.beam_search import length_normalizer
from transformer_jax.decode.restore import load_tokenizer
from transformer_jax.decode.translate import SentenceTranslation
from transformer_jax.export import exported
from transformer_jax.export.ctranslate2 import NotExpressible, check_expressible, require, vocabulary

logger = logging.getLogger(__name__)

PATIENCE = 1  # CTranslate2 ends a beam search after beam_size × PATIENCE finished hypotheses (rule 2 above)


def _threads() -> int:
    """The cores this process may use (CTranslate2's own default is 4, whatever the machine)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def max_output_length(source_length: int, config: ml_collections.ConfigDict) -> int:
    """§6.1: the longest output (EOS counted) of a source of ``source_length`` tokens (EOS counted), at least 1 (as
    beam_search.py clips ``max_lengths``)."""
    return max(1, min(source_length + int(config.decode.max_length_offset), int(config.model.max_len)))


def check_supported(config: ml_collections.ConfigDict) -> None:
    """Raises NotExpressible for a model CTranslate2 cannot compute or a ``config.decode`` its search cannot follow."""
    check_expressible(config.model)
    if config.decode.get("tree_constraint", False):
        raise NotExpressible("config.decode.tree_constraint (§6.3: only pieces that keep the output one tree) is a "
                             "rule of this library's beam search; decode with --engine=jax.")


class CTranslate2Translator(SentenceTranslation):
    """Translates with a CTranslate2 model folder (``transformer-jax export``) under ``config.decode``."""

    def __init__(self, config: ml_collections.ConfigDict, model_dir: str, tokenizer: Tokenizer,
                 threads: int | None = None):
        check_supported(config)
        ctranslate2 = require()
        self.config, self.tokenizer = config, tokenizer
        self.pieces = vocabulary(tokenizer)
        self.ids = {piece: i for i, piece in enumerate(self.pieces)}
        # compute_type "default": the weights' stored type (float32, or int8 as exported with --quantization)
        self.engine = ctranslate2.Translator(model_dir, device="cpu", compute_type="default",
                                             intra_threads=threads or _threads(), inter_threads=1)
        if config.decode.method == "sample":
            ctranslate2.set_random_seed(int(config.seed))

    def _options(self, max_length: int) -> dict:
        """translate_batch's options for ``config.decode`` and one maximum output length."""
        d = self.config.decode
        common = dict(max_decoding_length=max_length, min_decoding_length=0, max_input_length=0,
                      return_scores=True, return_end_token=True, max_batch_size=int(d.batch_size))
        if d.method == "beam":
            beams = int(d.beam_size)
            return dict(common, beam_size=beams, patience=PATIENCE, num_hypotheses=round(beams * PATIENCE),
                        length_penalty=float(d.length_penalty))
        if d.method == "greedy" or (d.method == "sample" and float(d.temperature) == 0.0):
            return dict(common, beam_size=1, length_penalty=0.0)
        if d.method == "sample":
            return dict(common, beam_size=1, length_penalty=0.0, sampling_topk=int(d.top_k),
                        sampling_topp=float(d.top_p), sampling_temperature=float(d.temperature))
        raise ValueError(f"Unknown config.decode.method {d.method!r}; valid: beam, greedy, sample.")

    def _source_pieces(self, ids: Sequence[int]) -> list[str]:
        """A source's pieces without its final EOS (the model's ``add_source_eos`` appends it)."""
        return [self.pieces[t] for t in (ids[:-1] if ids and ids[-1] == EOS_ID else ids)]

    def _ranked(self, result, ct2_alpha: float) -> list[tuple[list[int], float]]:
        """One sentence's hypotheses as (ids with EOS, log p / lp(Y)), best first (GNMT, §6.1)."""
        hypotheses = [[self.ids[p] for p in tokens] for tokens in result.hypotheses]
        lengths = np.array([len(h) for h in hypotheses], np.float32)  # |Y|, EOS counted
        log_probs = np.asarray(result.scores, np.float32) * lengths ** ct2_alpha  # CTranslate2's |Y|^α undone
        alpha = float(self.config.decode.length_penalty) if self.config.decode.method == "beam" else 0.0
        scores = log_probs / np.asarray(length_normalizer(lengths, alpha))  # GNMT's lp(Y) (§6.1)
        order = sorted(range(len(hypotheses)), key=lambda i: -scores[i])  # stable: CTranslate2's order on ties
        return [(hypotheses[i], float(scores[i])) for i in order]

    def nbest(self, sources: Sequence[Sequence[int]], progress: bool = False) -> list[list[tuple[list[int], float]]]:
        """Each source's (ids ending with EOS) finished hypotheses as (output ids, score), best first: beam search
        returns beam_size × PATIENCE of them scored log p(Y) / lp(Y); greedy and sampling one, scored log p(Y)."""
        out: list = [None] * len(sources)
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        groups = itertools.groupby(order, key=lambda i: max_output_length(len(sources[i]), self.config))
        with tqdm(total=len(sources), desc="decode", unit="line", disable=not progress) as bar:
            for max_length, members in groups:
                members = list(members)
                options = self._options(max_length)
                tokens = [self._source_pieces(sources[i]) for i in members]
                for i, result in zip(members, self.engine.translate_batch(tokens, **options)):
                    out[i] = self._ranked(result, options["length_penalty"])
                bar.update(len(members))
        return out

    def translate_batches(self, batches: Sequence[dict], progress: bool = False) -> list[str]:
        """Translations of evaluation batches (``inputs`` + ``index``), in the split's order."""
        sources, index = [], []
        for batch in batches:
            for row, i in zip(np.asarray(batch["inputs"]), batch["index"]):
                if i >= 0:
                    sources.append(row[row != 0].tolist())
                    index.append(int(i))
        best = [hypotheses[0][0] for hypotheses in self.nbest(sources, progress)]
        out = dict(zip(index, (self.tokenizer.decode(ids) for ids in best)))
        return [out[i] for i in range(len(out))]


def for_run(workdir: str, checkpoint: str, quantization: str,
            config: ml_collections.ConfigDict) -> tuple[CTranslate2Translator, str]:
    """A translator on ``workdir``'s ``checkpoint`` exported with ``quantization`` (exported again when the run folder's
    export is missing or stale) under ``config`` (the run's, with the command line's decode overrides), and what it
    decodes with, e.g. "avg2 (steps 300, 400), ctranslate2 int8".

    Raises:
        NotExpressible: a model or decoding setting CTranslate2 cannot follow.
        ValueError, OSError, ImportError: as :func:`transformer_jax.export.exported.export`.
    """
    check_supported(config)
    tokenizer = load_tokenizer(workdir, config)
    out, reused = exported.up_to_date(workdir, checkpoint, quantization, config, tokenizer)
    logger.info("%s the CTranslate2 model %s", "Reusing" if reused else "Exported", out)
    steps = ", ".join(map(str, exported.read_record(out)["steps"]))
    return (CTranslate2Translator(config, out, tokenizer),
            f"{checkpoint} (steps {steps}), ctranslate2 {quantization}")
