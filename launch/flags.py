"""Flags shared by several `transformer-jax` commands (defined once, so commands can be imported together).

A command takes a shared flag by naming it with ``flags.declare_key_flag`` (launch/cli.py refuses the others).
"""

import os
import re

from absl import flags
from ml_collections import config_flags

import configs
from experiments import EXPERIMENTS

DEMO_CONFIG = os.path.join(os.path.dirname(configs.__file__), "demo.py")

CONFIG = config_flags.DEFINE_config_file(
    "config", DEMO_CONFIG,
    "Experiment config: a file of configs/ (e.g. configs/base.py, configs/table3.py:B1, "
    "configs/table3.py:C4,base=demo_table3); override any field with --config.section.field=value.")
WORKDIR = flags.DEFINE_string("workdir", None, "Run folder: config.json, vocab.model, checkpoints, metrics.jsonl.")
JSON = flags.DEFINE_bool("json", False, "Print the result as one JSON object (the last line printed).")
CHECKPOINT = flags.DEFINE_string(
    "checkpoint", "latest", "Which checkpoint to restore: latest, a step number, or avgN (average of the last N).")
EXPERIMENT = flags.DEFINE_enum("experiment", "table3", EXPERIMENTS,
                               "Named sweep of experiments/ (sweep: the one to run; compare: the paper's columns).")
EVAL_CHECKPOINT = flags.DEFINE_string(
    "eval_checkpoint", "latest", "train/sweep: checkpoint scored after training: latest, a step, or avgN (§6.1: "
    "avg5 for base, avg20 for big).")


def check_eval_checkpoint(spec: str, train_config) -> None:
    """Raises ValueError unless a run trained with ``train_config`` will have the checkpoint ``spec`` to score.

    ``spec`` is latest, a step or avgN (the mean of the last N checkpoints on the step schedule, §6.1): checked
    against the steps the schedule saves and keeps (``checkpoint_every_steps``, ``keep_checkpoints``,
    ``num_steps``), so a mistake is found before training rather than after it.
    """
    if spec == "latest":
        return
    from transformer_jax.run.checkpoints import planned_schedule  # here: `sweep --launcher=print` needs no orbax

    every, num_steps, keep = (int(train_config.checkpoint_every_steps), int(train_config.num_steps),
                              int(train_config.keep_checkpoints))
    kept = planned_schedule(every, num_steps)[-keep:] if every else []  # [] = time-based saves: not known ahead
    where = (f"steps {'…, ' if len(kept) > 8 else ''}{', '.join(map(str, kept[-8:]))}; every {every} steps, "
             f"keep {keep}" if kept else f"keep {keep}, saved by time")
    match = re.fullmatch(r"avg(\d+)", spec)
    if spec.isdigit():
        if int(spec) > num_steps or (kept and int(spec) not in kept):
            raise ValueError(f"--eval_checkpoint={spec}: the run will keep no checkpoint at step {spec} ({where}); "
                             "use latest, avgN or one of those steps.")
    elif match:
        available = len(kept) if kept else keep
        if not 1 <= int(match.group(1)) <= available:
            raise ValueError(f"--eval_checkpoint={spec}: the run will keep {available} checkpoints on its step "
                             f"schedule ({where}); use avgN with N <= {available}, or raise config.train.num_steps "
                             "or config.train.keep_checkpoints.")
    else:
        raise ValueError(f"--eval_checkpoint={spec!r}: use latest, a step number, or avgN (e.g. avg5).")
