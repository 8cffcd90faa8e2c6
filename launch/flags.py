"""Flags shared by several `transformer-jax` commands (defined once, so commands can be imported together).

A command takes a shared flag by naming it with ``flags.declare_key_flag`` (launch/cli.py refuses the others).
"""

import ast
import os

from absl import flags
from ml_collections import config_flags

from transformer_jax import configs
from transformer_jax.experiments import EXPERIMENTS
from transformer_jax.export import ENGINES, QUANTIZATIONS
from transformer_jax.run import checkpoint_spec

CONFIGS_DIR = os.path.dirname(os.path.abspath(configs.__file__))
DEMO_CONFIG = os.path.join(CONFIGS_DIR, "demo.py")

# The command line the --config flag reads its --config.SECTION.FIELD=VALUE overrides from (ml_collections defines a
# flag for each when it loads a config): launch/cli.py fills it (read_config_overrides) for the commands that build
# their config from --config. It stays empty for the commands that apply their overrides to a trained run's
# config.json (launch/overrides.py), so the default config, which is not the run's, never parses them.
CONFIG_ARGV: list[str] = []
CONFIG = config_flags.DEFINE_config_file(
    "config", DEMO_CONFIG,
    "Experiment config, by name from any folder (base, big, demo, multi30k, table3:B1, table3:C4,base=multi30k) "
    "or as a file (configs/base.py, my_config.py:ARG); override any field with --config.section.field=value.",
    sys_argv=CONFIG_ARGV)
WORKDIR = flags.DEFINE_string("workdir", None, "Run folder: config.json, vocab.model, checkpoints, metrics.jsonl.")
JSON = flags.DEFINE_bool("json", False, "Print the result as one JSON object (the last line printed).")
CHECKPOINT = flags.DEFINE_string(
    "checkpoint", "latest", "Which checkpoint to restore: latest, a step number, or avgN (average of the last N).")
ENGINE = flags.DEFINE_enum(
    "engine", "jax", list(ENGINES), "What decodes: jax (this library's beam search) or ctranslate2 (the checkpoint "
    "exported to CTranslate2 into the run folder, reused while up to date; the [ctranslate2] extra), under the same "
    "config.decode (beam, α, maximum length).")
QUANTIZATION = flags.DEFINE_enum(
    "quantization", "none", list(QUANTIZATIONS), "How a CTranslate2 export stores the weights: none (float32, as "
    "trained), int8 (int8 matrices, float32 elsewhere on a CPU; int8_float32 is the same) or float16.")
EXPERIMENT = flags.DEFINE_enum("experiment", "table3", EXPERIMENTS,
                               "Named sweep of experiments/ (sweep: the one to run; compare: the paper's columns).")
TARGET = flags.DEFINE_string(
    "target", None, "What to compile / plan for: a Cloud TPU slice (v5e-256, v5p-128, v6e-64, v4-32; 2xv5e-256 = two "
    "slices), a libtpu topology (v5e:4x4), GPUs (h100x8, h200x8, a100x8; h100x16 = 2 hosts) or local (this "
    "machine's devices); `transformer-jax compile --list_targets` lists them.")
SCORED_SPLITS = ("dev", "test")  # the splits train and sweep can score after training (the default: both)
EVAL_SPLITS = flags.DEFINE_list("eval_splits", list(SCORED_SPLITS), "train/sweep: splits translated and scored after "
                                "training (empty: none; a recipe search scores dev only, e.g. --eval_splits=dev).")
EVAL_CHECKPOINT = flags.DEFINE_string(
    "eval_checkpoint", "latest", "train/sweep: checkpoint scored after training: latest, a step, or avgN (§6.1: "
    "avg5 for base, avg20 for big).")


def read_config_overrides(argv: list[str]) -> None:
    """Gives the --config flag the command line ``argv``, whose overrides it then parses against the config given
    with --config, or, when there is none, against the default config, loaded again here with them.

    Raises:
        KeyError, AttributeError: an override names a field the default config lacks (configs are locked).
    """
    CONFIG_ARGV[:] = argv
    flags.FLAGS.set_default("config", DEMO_CONFIG)


def check_eval_splits(splits) -> None:
    """Raises ValueError naming the first of ``splits`` (--eval_splits) that is not dev or test."""
    unknown = [split for split in splits if split not in SCORED_SPLITS]
    if unknown:
        raise ValueError(f"--eval_splits: unknown split {unknown[0]!r}; valid: {', '.join(SCORED_SPLITS)} (or empty).")


def check_eval_checkpoint(spec: str, train_config) -> None:
    """Raises ValueError unless a run trained with ``train_config`` will have the checkpoint ``spec`` to score.

    ``spec`` is latest, a step or avgN (the mean of the last N checkpoints on the step schedule, §6.1): checked
    against the steps the schedule saves and keeps (``checkpoint_every_steps``, ``keep_checkpoints``,
    ``num_steps``), so a mistake is found before training rather than after it.
    """
    try:
        name = checkpoint_spec.parse(spec)
    except ValueError:
        raise ValueError(f"--eval_checkpoint={spec!r}: {checkpoint_spec.USAGE}.") from None
    if name.kind == "latest":
        return
    from transformer_jax.run.checkpoints import planned_schedule  # here: `sweep --launcher=print` needs no orbax

    every, num_steps, keep = (int(train_config.checkpoint_every_steps), int(train_config.num_steps),
                              int(train_config.keep_checkpoints))
    kept = planned_schedule(every, num_steps)[-keep:] if every else []  # [] = time-based saves: not known ahead
    where = (f"steps {'…, ' if len(kept) > 8 else ''}{', '.join(map(str, kept[-8:]))}; every {every} steps, "
             f"keep {keep}" if kept else f"keep {keep}, saved by time")
    if name.kind == "step":
        if name.n > num_steps or (kept and name.n not in kept):
            raise ValueError(f"--eval_checkpoint={spec}: the run will keep no checkpoint at step {spec} ({where}); "
                             "use latest, avgN or one of those steps.")
        return
    available = len(kept) if kept else keep
    if not 1 <= name.n <= available:
        raise ValueError(f"--eval_checkpoint={spec}: the run will keep {available} checkpoints on its step "
                         f"schedule ({where}); use avgN with N <= {available}, or raise config.train.num_steps "
                         "or config.train.keep_checkpoints.")


def config_names() -> list[str]:
    """The configs installed with the package (``--config=NAME``): the files of configs/ that define ``get_config``
    (configs/rows.py, the sweeps' shared row machinery, is none)."""
    def is_config(name: str) -> bool:  # a top-level `def get_config` or `..., get_config = ...`
        with open(os.path.join(CONFIGS_DIR, name)) as f:
            tree = ast.parse(f.read())
        names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        names |= {target.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
                  for target in (t.elts if isinstance(t, ast.Tuple) else [t]) if isinstance(target, ast.Name)}
        return "get_config" in names

    return sorted(name[:-3] for name in os.listdir(CONFIGS_DIR)
                  if name.endswith(".py") and not name.startswith("_") and is_config(name))


def config_file(value: str) -> str:
    """A ``--config`` value as the file ml_collections loads: ``NAME[:ARG]`` is the package's ``configs/NAME.py``
    (from any folder, installed or not); a path stays a path, except that ``configs/NAME.py`` where no such file
    exists (outside the checkout) is the package's copy.

    Raises:
        ValueError: a name that is no config (the message lists them).
    """
    file, colon, arg = value.partition(":")
    if not file.endswith(".py") and "/" not in file and os.sep not in file:
        if file not in config_names():
            raise ValueError(f"--config={value}: no config named {file!r}; names: {', '.join(config_names())} "
                             "(or a path to a .py file).")
        return os.path.join(CONFIGS_DIR, f"{file}.py") + colon + arg
    packaged = os.path.join(CONFIGS_DIR, os.path.basename(file))
    if not os.path.exists(file) and os.path.basename(os.path.dirname(os.path.normpath(file))) == "configs" \
            and os.path.isfile(packaged):
        return packaged + colon + arg
    return value


def with_config_files(args: list[str]) -> list[str]:
    """``args`` with every ``--config=VALUE`` / ``--config VALUE`` resolved by :func:`config_file`."""
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return out + args[i:]
        if arg.startswith("--config="):
            arg = "--config=" + config_file(arg.partition("=")[2])
        elif arg == "--config" and i + 1 < len(args):
            out.append(arg)
            i += 1
            arg = config_file(args[i])
        out.append(arg)
        i += 1
    return out
