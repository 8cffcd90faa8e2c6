"""One override vocabulary: ``--config.SECTION.FIELD=VALUE`` on every command that reads a config.

`train` and `describe` apply the overrides to the config they build from ``--config`` (ml_collections' config
flag, launch/flags.py). `decode`, `evaluate` and `average` read a trained run's own ``<workdir>/config.json`` and
apply the overrides of the fields that may change after training: ``config.decode.*`` (§6.1: beam size, α, the
maximum output length; the method, the batch size, the number of checkpoints averaged). The other sections say
what the checkpoints mean (``model``) or how the run was trained and scored (``train``, ``data``): an override of
them is refused with one line. The decoding settings are read from ``config.decode`` only; no command keeps a copy
of its fields as flags.
"""

import dataclasses
import sys
from typing import Any

import ml_collections
from absl import flags

from transformer_jax.configs.base import decode_config
from transformer_jax.decode.restore import RestoredRun, restore_run
from transformer_jax.launch.flags import CHECKPOINT, WORKDIR
from transformer_jax.run.folder import load_config

RUN_SECTIONS = ("decode",)  # the sections of a trained run's config that an override may change
METHODS = ("beam", "greedy", "sample")
# `--beam_size=2` and the like (decoding flags of earlier versions): the error names --config.decode.beam_size.
DECODE_FIELDS = tuple(decode_config().keys())
HELP = ("override a field of the run's config.json for this command (decode.* only: e.g. "
        "--config.decode.beam_size=1, --config.decode.method=greedy; the model and training are fixed).")


def flag_hints(command: str) -> dict[str, str]:
    """What to use instead of --config and of the old decoding flags (launch/cli.py's FLAG_HINTS)."""
    return {"config": f"{command} reads the run's config.json; change its decoding with --config.decode.FIELD=VALUE.",
            **{name: f"use --config.decode.{name}=VALUE." for name in DECODE_FIELDS}}


def given() -> dict[str, Any]:
    """The ``--config.x.y=value`` overrides on the command line, in order (parsed by the shared --config flag)."""
    return dict(flags.FLAGS["config"].override_values) if "config" in flags.FLAGS else {}


def apply_to_run(config: ml_collections.ConfigDict, overrides: dict[str, Any],
                 command: str = "decode") -> ml_collections.ConfigDict:
    """A copy of a trained run's ``config`` with ``overrides`` ({"decode.beam_size": 1, ...}) applied.

    Raises:
        ValueError: an override names a field outside config.decode (it cannot change on a trained run) or a field
            the config lacks, or the result names an unknown decoding method.
    """
    values = config.to_dict()
    for path, value in overrides.items():
        section, *fields = path.split(".")
        if section not in RUN_SECTIONS or not fields:
            raise ValueError(f"--config.{path} cannot change on a trained run (its config.json fixes config.{section}"
                             f"{'' if section != 'model' else ', which its checkpoints were trained with'}); "
                             f"`{command}` takes only --config.decode.FIELD=VALUE overrides.")
        node = values
        for key in [section, *fields[:-1]]:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict) or fields[-1] not in node:
            raise ValueError(f"--config.{path}: the run's config.json has no field {path}.")
        node[fields[-1]] = value  # set in the dict: a float may replace a field saved as an int
    method = values.get("decode", {}).get("method")
    if method not in METHODS:
        raise ValueError(f"Unknown config.decode.method {method!r}; valid: {', '.join(METHODS)}.")
    return ml_collections.ConfigDict(values)


def run_config(command: str) -> ml_collections.ConfigDict:
    """``--workdir``'s config.json with the command line's overrides; exits with one line on a mistake.

    Cheap (no parameters are read): commands call it first, so a mistake is found before any work.
    """
    if not WORKDIR.value:
        sys.exit(f"transformer-jax {command}: --workdir is required (the folder of a trained run).")
    try:
        return apply_to_run(load_config(WORKDIR.value), given(), command)
    except (ValueError, OSError) as e:
        sys.exit(f"transformer-jax {command}: {e}")


def restore(command: str) -> RestoredRun:
    """Restores ``--workdir`` at ``--checkpoint`` with the overrides applied to its config; exits with one clear line
    on a missing run or checkpoint, a bad checkpoint name, another vocabulary or other shapes."""
    try:
        run = restore_run(WORKDIR.value, CHECKPOINT.value)
        return dataclasses.replace(run, config=apply_to_run(run.config, given(), command))
    except (ValueError, OSError) as e:
        sys.exit(f"transformer-jax {command}: {e}")


def describe_decoding(config: ml_collections.ConfigDict) -> str:
    """One line naming the decoding settings in force, e.g. ``beam 4, α 0.6, max length +50``."""
    d = config.decode
    if d.method == "beam":
        how = f"beam {d.beam_size}, α {d.length_penalty}"
    elif d.method == "sample":
        how = f"sample (temperature {d.temperature}, top-k {d.top_k}, top-p {d.top_p})"
    else:
        how = "greedy"
    return f"{how}, max length +{d.max_length_offset}, batch {d.batch_size}"
