"""Flags shared by several `transformer-jax` commands (defined once, so commands can be imported together)."""

import os

from absl import flags
from ml_collections import config_flags

import configs

DEMO_CONFIG = os.path.join(os.path.dirname(configs.__file__), "demo.py")

CONFIG = config_flags.DEFINE_config_file(
    "config", DEMO_CONFIG,
    "Experiment config: a file of configs/ (e.g. configs/base.py, configs/table3.py:B1, "
    "configs/table3.py:C4,base=demo_table3); override any field with --config.section.field=value.")
WORKDIR = flags.DEFINE_string("workdir", None, "Run folder: config.json, vocab.model, checkpoints, metrics.jsonl.")
JSON = flags.DEFINE_bool("json", False, "Print the result as one JSON object (the last line printed).")
CHECKPOINT = flags.DEFINE_string(
    "checkpoint", "latest", "Which checkpoint to restore: latest, a step number, or avgN (average of the last N).")
EVAL_CHECKPOINT = flags.DEFINE_string(
    "eval_checkpoint", "latest", "train/sweep: checkpoint scored after training: latest, a step, or avgN (§6.1: "
    "avg5 for base, avg20 for big).")
