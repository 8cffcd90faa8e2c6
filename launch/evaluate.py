"""`transformer-jax evaluate`: translate a run's dev or test split and score it (§6.1, Tables 2 and 3).

    transformer-jax evaluate --workdir=runs/B1 --split=dev                     # Table 3: newstest2013, no averaging
    transformer-jax evaluate --workdir=runs/base --split=test --checkpoint=avg5  # Table 2: newstest2014, last 5
    transformer-jax evaluate --workdir=runs/parsing --split=test                 # Table 4: EVALB F1 (§6.3)
    transformer-jax evaluate --workdir=runs/base --split=test --checkpoint=avg5 --engine=ctranslate2 --quantization=int8

Writes ``<workdir>/translations_<split>.txt`` and ``<workdir>/eval_<split>.json`` (sacreBLEU with its signature,
lowercased sacreBLEU (``-lc``, as most Multi30k papers report), the paper's tokenized compound-split BLEU, chrF, the checkpoint, the number of sentences); that JSON is also the
last line printed. Decoding settings are the run's ``config.decode``, changed with ``--config.decode.FIELD=VALUE``
(e.g. ``--config.decode.beam_size=1``). The split's data and the workdir's permission are checked before decoding.
``--grid=NAME=V1,V2`` (repeatable; NAME: checkpoint or a config.decode field) instead scores every combination on
the dev split and appends them to ``<workdir>/decoding_dev.jsonl`` (launch/grid.py: decoding is chosen on dev, §6.1).
A parsing run (``config.task = "parsing"``) is scored with EVALB (COLLINS.prm): precision, recall, F1, exact
match and how many outputs needed repair into a tree (transformer_jax/evaluate/parsing.py).
``--engine=ctranslate2`` translates with the checkpoint exported to CTranslate2 (kept in the run folder and reused
while up to date; launch/engine.py) under the same settings; the JSON names the engine.
"""

import json
import logging
import os
import sys

import jax
from absl import flags

from transformer_jax.data.sources import DataError, get_source
from transformer_jax.evaluate.evaluation import evaluate_split, score_line, score_split
from transformer_jax.launch import cluster, engine, grid, logs, overrides
from transformer_jax.launch.flags import CHECKPOINT, ENGINE, JSON, WORKDIR
from transformer_jax.launch.overrides import describe_decoding
from transformer_jax.launch.verbs import Verb, refuse

SPLIT = flags.DEFINE_enum("split", None, ["dev", "test"],
                          "Split to translate and score (required): dev (Table 3) or test (Table 2).")
GRID = flags.DEFINE_multi_string("grid", [], grid.HELP)
for _name in ("workdir", "checkpoint", "json", *engine.FLAG_NAMES, *cluster.FLAG_NAMES):
    flags.declare_key_flag(_name)
VERB = Verb("evaluate", overrides=overrides.HELP, run_overrides=True, flag_hints=overrides.flag_hints("evaluate"))

NUM_SAMPLES = 3  # sample translations in the human summary

logger = logging.getLogger(__name__)


def summary(result: dict, samples: list) -> str:
    """The human-readable lines printed above the JSON."""
    lines = [score_line(result)]
    if "signature" in result:
        lines.append(f"  sacreBLEU signature: {result['signature']}")
    for src, hyp, ref in samples[:NUM_SAMPLES]:
        lines.append(f"  SRC {src}\n  OUT {hyp}\n  REF {ref}")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    del argv
    logs.setup()
    if SPLIT.value is None:
        refuse("evaluate", "--split is required: dev (Table 3) or test (Table 2).")
    if GRID.value and SPLIT.value != grid.SPLIT:
        refuse("evaluate", f"--grid chooses decoding settings, on the dev split only (§6.1); score "
               f"--split={SPLIT.value} once with the chosen --checkpoint and --config.decode.* instead.")
    if GRID.value and ENGINE.value != "jax":
        refuse("evaluate", "--grid decodes with --engine=jax (it restores each checkpoint it compares); score the "
               "chosen settings with --engine=ctranslate2 afterwards.")
    config = overrides.run_config("evaluate")
    engine.check("evaluate")
    workdir = WORKDIR.value
    try:  # before restoring and decoding: the split's data, and the folder its scores go to
        get_source(config.data).load(SPLIT.value)
    except (DataError, OSError) as e:
        field = f" (config.data.{SPLIT.value}_files of {workdir}/config.json)" if config.data.source == "text" else ""
        sys.exit(f"transformer-jax evaluate: the {SPLIT.value} split{field}: {e}")
    if not os.access(workdir, os.W_OK):
        written = (os.path.basename(grid.grid_path(workdir)) if GRID.value else
                   f"translations_{SPLIT.value}.txt and eval_{SPLIT.value}.json")
        sys.exit(f"transformer-jax evaluate: {workdir} is not writable ({written} written there).")
    if GRID.value:
        return _grid(config)
    lead = True
    try:
        if ENGINE.value == "ctranslate2":
            translator, checkpoint = engine.ctranslate2_translator("evaluate", config)
            logger.info("Evaluating %s of %s on %s (%s)", checkpoint, workdir, SPLIT.value, describe_decoding(config))
            result = score_split(config, translator.tokenizer, translator, checkpoint, workdir, SPLIT.value,
                                 engine="ctranslate2")
        else:
            cluster.maybe_initialize()
            run = overrides.restore("evaluate", config)
            lead = jax.process_index() == 0  # every host decodes its share of each batch; the first one writes
            logger.info("Evaluating %s of %s on %s (%s)", run.checkpoint, workdir, SPLIT.value,
                        describe_decoding(config))
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


def _grid(config) -> None:
    """``--grid``: every combination on dev, a table, the best as the last line (JSON)."""
    decode_overrides = overrides.given()
    try:
        axes = grid.parse_axes(GRID.value, config, decode_overrides, flags.FLAGS["checkpoint"].present)
    except ValueError as e:
        refuse("evaluate", str(e))
    cluster.maybe_initialize()
    try:
        records = grid.run_grid(WORKDIR.value, config, axes, CHECKPOINT.value, progress=jax.process_index() == 0)
    except (ValueError, DataError, OSError) as e:
        sys.exit(f"transformer-jax evaluate: {e}")
    if jax.process_index() != 0:
        return
    if not JSON.value:
        print(grid.table(records))
        print(f"  appended {len(records)} lines to {grid.grid_path(WORKDIR.value)} (best marked *)")
    print(json.dumps(grid.best(records)))
