"""`transformer-jax evaluate --grid`: choose the decoding of a trained run on its dev split (§6.1).

The paper's beam size 4 and length penalty α 0.6 "were chosen after experimentation on the development set"; how
many checkpoints to average (the paper: the last 5 for base, 20 for big) is a choice of the same kind. A grid names
each axis once, as the field it sets::

    transformer-jax evaluate --workdir=runs/base --split=dev \\
        --grid=checkpoint=latest,avg5,avg10 --grid=decode.length_penalty=0.6,1.0,1.5 --grid=decode.beam_size=4,8

Every combination is translated and scored (each checkpoint restored or averaged once), one JSON line per
combination is appended to ``<workdir>/decoding_dev.jsonl`` (the run's record of every setting tried), and a table
marks the best by sacreBLEU (F1 for a parsing run). The grid writes no eval_dev.json and no translations: the
choice is then scored by a plain `evaluate` with that ``--checkpoint`` and ``--config.decode.*``, on the test split
once. A grid on the test split is refused (it would choose on the test set).
"""

import dataclasses
import itertools
import json
import logging
from typing import Any

import jax
import ml_collections

from transformer_jax.decode.restore import named_steps, restore_run
from transformer_jax.evaluate.evaluation import evaluate_split, score_line
from transformer_jax.launch.overrides import apply_to_run, typed
from transformer_jax.run import checkpoint_spec, folder

CHECKPOINT_AXIS = "checkpoint"
SPLIT = "dev"  # the only split a grid may choose on
HELP = ("evaluate: NAME=V1,V2,... (repeatable): translate the dev split with every combination, e.g. "
        "--grid=checkpoint=latest,avg5 --grid=decode.length_penalty=0.6,1.0; NAME is checkpoint or a config.decode "
        "field; results appended to <workdir>/decoding_dev.jsonl; dev only (§6.1)")

logger = logging.getLogger(__name__)


def grid_path(workdir: str, split: str = SPLIT) -> str:
    return folder.path(workdir, f"decoding_{split}.jsonl")


def _typed(name: str, text: str, current: Any) -> Any:
    """``text`` as the type of the run's ``current`` value of config field ``name`` (as an override's)."""
    try:
        return typed(name, text, current)
    except ValueError as e:
        raise ValueError(f"--grid={name}=...: {e}") from None


def parse_axes(specs: list[str], config: ml_collections.ConfigDict, overridden: dict[str, Any],
               checkpoint_given: bool) -> list[tuple[str, list]]:
    """``[(name, values), ...]`` from the ``--grid`` flags, checkpoint first; raises ValueError naming the mistake.

    ``overridden``: the command line's ``--config.decode.*`` overrides (an axis may not set one of them too);
    ``checkpoint_given``: whether ``--checkpoint`` was given (then there is no checkpoint axis).
    """
    axes: dict[str, list] = {}
    for spec in specs:
        name, sep, values = spec.partition("=")
        name = name.strip()
        if not sep or not name or not values.strip(","):
            raise ValueError(f"--grid={spec}: write NAME=V1,V2,... (e.g. --grid=decode.length_penalty=0.6,1.0).")
        if name in axes:
            raise ValueError(f"--grid: {name} is given twice; list all its values in one --grid={name}=V1,V2.")
        texts = [v.strip() for v in values.split(",") if v.strip()]
        if len(set(texts)) < len(texts):
            raise ValueError(f"--grid={spec}: a value is listed twice.")
        if name == CHECKPOINT_AXIS:
            if checkpoint_given:
                raise ValueError("--grid=checkpoint=... and --checkpoint both name the checkpoint; give one.")
            for text in texts:
                try:
                    checkpoint_spec.parse(text)
                except ValueError:
                    raise ValueError(f"--grid={spec}: bad checkpoint {text!r}: {checkpoint_spec.USAGE}.") from None
            axes[name] = texts
            continue
        section, _, field = name.partition(".")
        if section != "decode" or field not in config.decode:
            raise ValueError(f"--grid={spec}: NAME is checkpoint or a field of config.decode "
                             f"({', '.join(sorted(config.decode.keys()))}).")
        if name in overridden:
            raise ValueError(f"--grid={spec} and --config.{name} both set config.{name}; give one.")
        axes[name] = [_typed(name, text, config.decode[field]) for text in texts]
    ordered = sorted(axes.items(), key=lambda item: item[0] != CHECKPOINT_AXIS)  # restore each checkpoint once
    return ordered


def combinations(axes: list[tuple[str, list]]) -> list[dict[str, Any]]:
    """Every combination of the axes' values, the first axis slowest: ``[{name: value, ...}, ...]``."""
    names = [name for name, _ in axes]
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(v for _, v in axes))]


def score_key(result: dict) -> float:
    """What the grid maximises: sacreBLEU, or F1 for a parsing run (§6.3)."""
    return result["f1"] if "f1" in result else result["sacrebleu"]


def run_grid(workdir: str, config: ml_collections.ConfigDict, axes: list[tuple[str, list]], checkpoint: str,
             command: str = "evaluate", progress: bool = True) -> list[dict]:
    """Translates the dev split of ``workdir`` with every combination; returns (and appends) one record each.

    ``config`` is the run's config.json with the command line's ``--config.decode.*`` overrides applied (they hold
    for every combination); ``checkpoint`` is used when there is no checkpoint axis. Every checkpoint and setting is
    checked before the first translation.
    """
    points = combinations(axes)
    specs = list(dict.fromkeys(p.get(CHECKPOINT_AXIS, checkpoint) for p in points))
    for spec in specs:
        named_steps(workdir, spec, config)
    # A combination the config refuses (e.g. an unknown method) fails here, not mid-grid.
    configs = [apply_to_run(config, _decode_fields(point), command) for point in points]
    lead = jax.process_index() == 0
    records = []
    for spec in specs:
        run = restore_run(workdir, spec, config=config)
        for point, point_config in zip(points, configs, strict=True):
            if point.get(CHECKPOINT_AXIS, checkpoint) != spec:
                continue
            logger.info("Grid point %d/%d: %s", len(records) + 1, len(points), _describe(point, spec))
            result = evaluate_split(dataclasses.replace(run, config=point_config), workdir, SPLIT, progress=progress,
                                    write=False)
            result.pop("samples")
            record = {"grid": {CHECKPOINT_AXIS: spec, **_decode_fields(point)}, **result}
            if lead:
                logger.info("%s", score_line(result))
                with open(grid_path(workdir), "a") as f:
                    f.write(json.dumps(record) + "\n")
            records.append(record)
    return records


def _decode_fields(point: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in point.items() if name != CHECKPOINT_AXIS}


def _describe(point: dict[str, Any], spec: str) -> str:
    return ", ".join([f"checkpoint={spec}", *(f"{k}={v}" for k, v in _decode_fields(point).items())])


# The score columns of the table: (key in a record, header, format), for translation and for parsing (§6.3). The
# brevity penalty shows where α is too small for the data (BP < 1: outputs shorter than the references).
SCORE_COLUMNS = [("sacrebleu", "sacreBLEU", ".2f"), ("sacrebleu_lowercase", "lowercased", ".2f"),
                 ("chrf", "chrF", ".2f"), ("tokenized_bleu", "tokenized BLEU", ".2f"), ("brevity_penalty", "BP", ".3f")]
PARSING_COLUMNS = [("f1", "F1", ".2f"), ("precision", "precision", ".2f"), ("recall", "recall", ".2f")]


def table(records: list[dict]) -> str:
    """A Markdown table of the grid, one row per combination, the best marked with ``*``."""
    names = list(records[0]["grid"])
    scores = PARSING_COLUMNS if "f1" in records[0] else SCORE_COLUMNS
    heads = [*names, *(head for _, head, _ in scores), "seconds"]
    top = best(records)
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for r in records:
        cells = [str(r["grid"][n]) for n in names] + [format(r[key], fmt) for key, _, fmt in scores]
        cells.append(f"{r['decode_seconds']:.0f}")
        if r is top:
            cells[len(names)] = f"**{cells[len(names)]}** *"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best(records: list[dict]) -> dict:
    """The record with the highest :func:`score_key` (the first of equals)."""
    return max(records, key=score_key)
