"""Decoding flags shared by `transformer-jax decode` and `transformer-jax evaluate` (defined once, here).

Also the restore step both commands begin with: ``--workdir`` at ``--checkpoint`` with the flags applied.

Every flag defaults to "unset": the run's own ``config.decode`` (saved in ``<workdir>/config.json``) is used,
and only the flags given on the command line override it (§6.1: beam 4, α = 0.6, input length + 50).
"""

import dataclasses
import sys

import ml_collections
from absl import flags

from launch.flags import CHECKPOINT, WORKDIR
from transformer_jax.decode.restore import RestoredRun, restore_run

METHODS = ("beam", "greedy", "sample")

METHOD = flags.DEFINE_enum("method", None, METHODS, "Decoding method (default: the run's config.decode.method).")
BEAM_SIZE = flags.DEFINE_integer("beam_size", None, "Beam size K (default: the run's; §6.1 uses 4).", lower_bound=1)
LENGTH_PENALTY = flags.DEFINE_float(
    "length_penalty", None, "Length-penalty exponent α of ((5 + |Y|) / 6)^α (default: the run's; §6.1 uses 0.6).")
MAX_LENGTH_OFFSET = flags.DEFINE_integer(
    "max_length_offset", None, "Maximum output length = input length + this (default: the run's; §6.1 uses 50).",
    lower_bound=0)
BATCH_SIZE = flags.DEFINE_integer("batch_size", None, "Sentences per decoding batch (default: the run's).",
                                  lower_bound=1)
TEMPERATURE = flags.DEFINE_float("temperature", None, "Sampling temperature (--method=sample; 0 = greedy).",
                                 lower_bound=0.0)
TOP_K = flags.DEFINE_integer("top_k", None, "Sample among the k most likely tokens (--method=sample; 0 = all).",
                             lower_bound=0)
TOP_P = flags.DEFINE_float("top_p", None, "Nucleus sampling mass (--method=sample; 1 = all).", lower_bound=0.0,
                           upper_bound=1.0)

# config.decode field ← flag holder
_OVERRIDES = {"method": METHOD, "beam_size": BEAM_SIZE, "length_penalty": LENGTH_PENALTY,
              "max_length_offset": MAX_LENGTH_OFFSET, "batch_size": BATCH_SIZE, "temperature": TEMPERATURE,
              "top_k": TOP_K, "top_p": TOP_P}


def apply_decode_flags(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """Returns a copy of ``config`` whose ``decode`` section carries the decoding flags given on the command line.

    Args:
        config: a run's resolved config (from its config.json).

    Returns:
        A new ConfigDict; ``config`` itself is not modified.

    Raises:
        ValueError: the run's config has no ``decode`` section, or names an unknown decoding method.
    """
    values = config.to_dict()
    if "decode" not in values:
        raise ValueError("The run's config.json has no decode section; is it a transformer-jax run folder?")
    for field, holder in _OVERRIDES.items():
        if holder.value is not None:  # set in the dict: a flag's float may replace a field saved as an int
            values["decode"][field] = holder.value
    if values["decode"].get("method") not in METHODS:
        raise ValueError(f"Unknown config.decode.method {values['decode'].get('method')!r}; "
                         f"valid: {', '.join(METHODS)}.")
    return ml_collections.ConfigDict(values)


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


def restore_for_decoding(command: str) -> RestoredRun:
    """Restores ``--workdir`` at ``--checkpoint`` with the decoding flags applied; exits with one clear line on error.

    Args:
        command: the command's name, for the error message (``transformer-jax COMMAND: ...``).

    Returns:
        The restored run (config with the flags applied, tokenizer, mesh, graph and parameters).
    """
    if not WORKDIR.value:
        sys.exit(f"transformer-jax {command}: --workdir is required (the folder of a trained run).")
    try:
        run = restore_run(WORKDIR.value, CHECKPOINT.value)
        return dataclasses.replace(run, config=apply_decode_flags(run.config))
    except (ValueError, OSError) as e:  # a missing run/checkpoint, another vocabulary or other shapes
        sys.exit(f"transformer-jax {command}: {e}")
