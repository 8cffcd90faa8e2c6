"""One override vocabulary: ``--config.SECTION.FIELD=VALUE`` on every command that reads a config.

`train`, `describe`, `compile` and `sweep` apply the overrides to the config they build from ``--config`` (or
``--base``): ml_collections' config flag parses them against that config (launch/flags.py). `decode`, `evaluate`,
`average` and `attention` read a trained run's own ``<workdir>/config.json`` instead, once (:func:`run_config`),
and apply to it the overrides of the fields that may change after training: ``config.decode.*`` (§6.1: beam
size, α, the maximum output length; the method, the batch size, the number of checkpoints averaged), each value
typed by the run's own field; that config is then passed down to restoring and decoding (:func:`restore`). The
other sections say what the checkpoints mean (``model``) or how the run was trained and scored (``train``,
``data``): an override of them is refused with one line. The decoding settings are read from ``config.decode``
only; no command keeps a copy of its fields as flags.
"""

import sys
from collections.abc import Mapping
from typing import Any

import ml_collections

from transformer_jax.configs.base import decode_config
from transformer_jax.decode.restore import RestoredRun, restore_run
from transformer_jax.launch.flags import CHECKPOINT, WORKDIR
from transformer_jax.launch.verbs import refuse
from transformer_jax.run import checkpoint_spec, folder

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


_GIVEN: dict[str, str] = {}  # the command line's overrides as typed, e.g. {"decode.beam_size": "1"} (take_given)


def take_given(args: list[str]) -> list[str]:
    """``args`` without their ``--config.SECTION.FIELD=VALUE`` (or ``--config.SECTION.FIELD VALUE``) overrides,
    which :func:`given` returns from then on, as typed.

    launch/cli.py calls it for the commands that apply their overrides to a trained run: the run's config.json
    types them (:func:`run_config`), so the shared --config flag, whose default is the demo config, never sees them.

    Raises:
        ValueError: an override without a value.
    """
    _GIVEN.clear()
    rest, i = [], 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":  # what follows is positional
            return rest + args[i - 1:]
        name, has_value, text = arg.lstrip("-").partition("=")
        if not arg.startswith("-") or not name.startswith("config."):
            rest.append(arg)
            continue
        if not has_value:
            if i == len(args):
                raise ValueError(f"--{name} needs a value: --{name}=VALUE.")
            text, i = args[i], i + 1
        path = name.removeprefix("config.")
        _GIVEN.pop(path, None)  # given twice: the last value counts, in its place (as absl's flags)
        _GIVEN[path] = text
    return rest


def given() -> dict[str, str]:
    """The ``--config.SECTION.FIELD=VALUE`` overrides on the command line, in order, as typed:
    ``{"decode.beam_size": "1"}``."""
    return dict(_GIVEN)


def typed(name: str, text: str, current: Any) -> Any:
    """``text`` as the type of ``current``, the run's value of config field ``name`` (a bool: true or false).

    Raises:
        ValueError: ``text`` is not of that type.
    """
    try:
        if isinstance(current, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if isinstance(current, int):
            return int(text)
        if isinstance(current, float):
            return float(text)
        return text
    except ValueError:
        raise ValueError(f"{text!r} is not a {type(current).__name__} (the type of config.{name} in the run's "
                         "config.json).") from None


def apply_to_run(config: ml_collections.ConfigDict, overrides: Mapping[str, Any],
                 command: str = "decode") -> ml_collections.ConfigDict:
    """A copy of a trained run's ``config`` with ``overrides`` ({"decode.beam_size": "1", ...}) applied; a value
    given as text (from the command line) takes the type of the run's field. A ``decode`` field that did not exist
    when the run was trained (e.g. ``tree_constraint``) takes configs/base.py's default, so it can be overridden.

    Raises:
        ValueError: an override names a field outside config.decode (it cannot change on a trained run) or a field
            the config lacks, a text is not of its field's type, or the result names an unknown decoding method.
    """
    values = config.to_dict()
    # decoding options added after the run was trained take their defaults (its checkpoints do not depend on them)
    values["decode"] = {**decode_config().to_dict(), **values.get("decode", {})}
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
        if isinstance(value, str):
            try:
                value = typed(path, value, node[fields[-1]])
            except ValueError as e:
                raise ValueError(f"--config.{path}={value}: {e}") from None
        node[fields[-1]] = value
    method = values.get("decode", {}).get("method")
    if method not in METHODS:
        raise ValueError(f"Unknown config.decode.method {method!r}; valid: {', '.join(METHODS)}.")
    return ml_collections.ConfigDict(values)


def run_config(command: str) -> ml_collections.ConfigDict:
    """``--workdir``'s config.json, read once, with the command line's overrides applied: the config the command
    passes down (:func:`restore`). Exits with one line on a mistake: status 2 for an override the run refuses (a
    field it lacks or that training fixed, a value not of the field's type), 1 for a missing or unreadable run.

    Cheap (no parameters are read): commands call it first, so a mistake is found before any work.
    """
    if not WORKDIR.value:
        refuse(command, "--workdir is required (the folder of a trained run).")
    try:
        checkpoint_spec.parse(CHECKPOINT.value)
    except ValueError:
        refuse(command, f"--checkpoint={CHECKPOINT.value}: {checkpoint_spec.USAGE}.")
    try:
        config = folder.load_config(WORKDIR.value)
    except (ValueError, OSError) as e:
        sys.exit(f"transformer-jax {command}: {e}")
    try:
        return apply_to_run(config, given(), command)
    except ValueError as e:
        refuse(command, str(e))


def restore(command: str, config: ml_collections.ConfigDict | None = None) -> RestoredRun:
    """Restores ``--workdir`` at ``--checkpoint`` for ``config``, the command's :func:`run_config` (None: read
    here); exits with one clear line on a missing run or checkpoint, a bad checkpoint name, another vocabulary or
    other shapes."""
    if config is None:
        config = run_config(command)
    try:
        return restore_run(WORKDIR.value, CHECKPOINT.value, config=config)
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
