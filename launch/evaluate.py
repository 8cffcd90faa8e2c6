"""`transformer-jax evaluate`: translate a run's dev or test split and score it (§6.1, Tables 2 and 3).

    transformer-jax evaluate --workdir=runs/B1 --split=dev                     # Table 3: newstest2013, no averaging
    transformer-jax evaluate --workdir=runs/base --split=test --checkpoint=avg5  # Table 2: newstest2014, last 5

Writes ``<workdir>/translations_<split>.txt`` and ``<workdir>/eval_<split>.json`` (sacreBLEU with its signature,
the paper's tokenized compound-split BLEU, chrF, the checkpoint, the number of sentences); that JSON is also the
last line printed. Decoding settings are the run's ``config.decode`` unless a flag (--beam_size, ...) overrides.
"""

import json
import logging
import os
import sys

import jax
from absl import flags

from launch import cluster, decode_flags, logs
from launch.decode_flags import describe_decoding, restore_for_decoding
from launch.flags import JSON, WORKDIR
from transformer_jax.data.sources import DataError
from transformer_jax.evaluate.evaluation import evaluate_split

SPLIT = flags.DEFINE_enum("split", None, ["dev", "test"],
                          "Split to translate and score (required): dev (Table 3) or test (Table 2).")
flags.adopt_module_key_flags(decode_flags)  # list --beam_size, --method, ... in `transformer-jax evaluate --help`

NUM_SAMPLES = 3  # sample translations in the human summary

logger = logging.getLogger(__name__)


def summary(result: dict, samples: list) -> str:
    """The human-readable lines printed above the JSON."""
    scores = (f"{result['split']}: sacreBLEU {result['sacrebleu']:.2f}  tokenized BLEU {result['tokenized_bleu']:.2f}  "
              f"chrF {result['chrf']:.2f}  ({result['num_sentences']} sentences, {result['checkpoint']}, "
              f"{result['decode_seconds']:.1f} s)")
    lines = [scores, f"  sacreBLEU signature: {result['signature']}"]
    for src, hyp, ref in samples[:NUM_SAMPLES]:
        lines.append(f"  SRC {src}\n  OUT {hyp}\n  REF {ref}")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    del argv
    logs.setup()
    cluster.maybe_initialize()
    if SPLIT.value is None:
        sys.exit("transformer-jax evaluate: --split is required: dev (Table 3) or test (Table 2).")
    run = restore_for_decoding("evaluate")
    workdir = WORKDIR.value
    lead = jax.process_index() == 0  # every host decodes its share of each batch; the first one writes
    logger.info("Evaluating %s of %s on %s (%s)", run.checkpoint, workdir, SPLIT.value, describe_decoding(run.config))
    try:
        result = evaluate_split(run, workdir, SPLIT.value, progress=lead, write=lead)
    except (DataError, FileNotFoundError) as e:  # the split cannot be loaded (not downloaded, bad files, ...)
        sys.exit(f"transformer-jax evaluate: {e}")
    samples = result.pop("samples")
    if not lead:
        return
    if not JSON.value:
        print(summary(result, samples))
        print(f"  wrote {os.path.join(workdir, f'translations_{SPLIT.value}.txt')} and "
              f"{os.path.join(workdir, f'eval_{SPLIT.value}.json')}")
    print(json.dumps(result))
