"""A run's checkpoint exported for CTranslate2, kept in a folder with a record of what it holds.

``transformer-jax export`` writes one where ``--out`` says; ``decode --engine=ctranslate2`` (and ``evaluate``) keep
one per checkpoint name and quantization in the run folder (``<workdir>/export/ctranslate2-avg5-none``, see
run/folder.py) and reuse it while it is up to date: the same checkpoint steps (a new checkpoint changes what
``latest`` or ``avg5`` names), the same vocabulary, the same CTranslate2 version and the same mapping
(:data:`EXPORTER_VERSION`). The record (``transformer_jax_export.json`` beside CTranslate2's files) says so.
"""

import json
import os

import ml_collections

from transformer_jax.data.tokenizer import Tokenizer
from transformer_jax.decode.restore import load_tokenizer, named_steps, restore_run
from transformer_jax.export import ctranslate2 as ct2
from transformer_jax.run import folder

ENGINE = "ctranslate2"
RECORD_FILE = "transformer_jax_export.json"
EXPORTER_VERSION = 1  # raise when transformer_jax/export/ctranslate2.py maps anything differently: exports redone


def record(checkpoint: str, quantization: str, steps: list[int], vocabulary: str) -> dict:
    """What an up-to-date export of ``checkpoint`` (``steps``: the ones it names now) with ``quantization`` holds;
    ``vocabulary`` is the run's tokenizer fingerprint."""
    return {"engine": ENGINE, "exporter_version": EXPORTER_VERSION, "ctranslate2": ct2.require().__version__,
            "checkpoint": checkpoint, "steps": list(steps), "quantization": quantization, "vocabulary": vocabulary}


def read_record(out: str) -> dict | None:
    """The record of the export in ``out`` (None when there is none)."""
    try:
        with open(os.path.join(out, RECORD_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _check_out(out: str) -> None:
    """Refuses to replace a folder that holds anything but an export (``save`` replaces ``out`` whole)."""
    if os.path.isdir(out) and os.listdir(out) and read_record(out) is None:
        raise ValueError(f"--out={out} is a folder that holds no transformer-jax export; give a new or empty folder.")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out={out} is a file; give a folder.")


def export(workdir: str, checkpoint: str, quantization: str, out: str,
           config: ml_collections.ConfigDict | None = None) -> dict:
    """Restores (or averages) ``checkpoint`` of ``workdir`` and writes it to ``out`` as a CTranslate2 model whose
    weights are stored as ``quantization``; returns its record. ``config``: the run's (None reads config.json).

    Raises:
        NotExpressible: the run's model is one CTranslate2 cannot compute (checked before anything is restored).
        ValueError, OSError: a bad checkpoint name, a missing run or checkpoint, an ``out`` that is no export.
        ImportError: ctranslate2 is not installed.
    """
    config = folder.load_config(workdir) if config is None else config
    ct2.check_expressible(config.model)
    ct2.require()
    _check_out(out)
    run = restore_run(workdir, checkpoint, config=config)
    ct2.save(ct2.transformer_spec(run.config, run.params, ct2.vocabulary(run.tokenizer)), out, quantization)
    written = record(checkpoint, quantization, list(run.steps), run.tokenizer.fingerprint)
    with open(os.path.join(out, RECORD_FILE), "w") as f:
        json.dump({**written, "workdir": os.path.abspath(workdir)}, f, indent=2)  # (where from: not compared)
    return written


def up_to_date(workdir: str, checkpoint: str, quantization: str, config: ml_collections.ConfigDict | None = None,
               tokenizer: Tokenizer | None = None) -> tuple[str, bool]:
    """The run folder's export of ``checkpoint`` with ``quantization``, made or remade if it is missing or stale:
    (its folder, whether it was reused as it was). ``config`` and ``tokenizer``: the run's, as the caller holds them
    (None reads them from the run folder)."""
    config = folder.load_config(workdir) if config is None else config
    tokenizer = load_tokenizer(workdir, config) if tokenizer is None else tokenizer
    out = folder.export_path(workdir, ENGINE, checkpoint, quantization)
    wanted = record(checkpoint, quantization, named_steps(workdir, checkpoint, config), tokenizer.fingerprint)
    if {k: v for k, v in (read_record(out) or {}).items() if k in wanted} == wanted:
        return out, True
    export(workdir, checkpoint, quantization, out, config)
    return out, False
