"""The run folder, owned here: every file a run keeps in its ``--workdir`` and the rules for reading it.

    <workdir>/config.json          the resolved config (written by train; decode/evaluate/average read it)
    <workdir>/vocab.model          the shared SentencePiece vocabulary (§5.1)
    <workdir>/checkpoints/STEP     orbax checkpoints (run/checkpoints.py: the step schedule, safety saves)
    <workdir>/checkpoint_schedule.json   the steps saved on the schedule: a resume with another one keeps them
    <workdir>/averaged/avgN        averaged parameters (§6.1) with the steps they came from
    <workdir>/metrics.jsonl        one record per log/eval step (run/metrics.py); tensorboard/ beside it
    <workdir>/provenance.jsonl     commit, machine and command of every start
    <workdir>/translations_SPLIT.txt, eval_SPLIT.json   what `evaluate` (and train's final scoring) wrote
    <workdir>/export/FORMAT-CHECKPOINT-QUANTIZATION   a checkpoint exported for another engine (`export`,
                                   `decode --engine=ctranslate2`), with the steps it came from

The model section of config.json defines what the checkpoints mean: a run resumes only with the same model
(fields that only choose how it is computed — the dtype, the attention implementation — may change).
"""

import contextlib
import json
import os

import jax
import ml_collections

CONFIG_FILE = "config.json"
CHECKPOINT_DIR = "checkpoints"
SCHEDULE_FILE = "checkpoint_schedule.json"  # the steps saved on the step schedule (run/checkpoints.py)
AVERAGED_DIR = "averaged"
EXPORT_DIR = "export"
METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
PROVENANCE_FILE = "provenance.jsonl"

# Sections that define what a checkpoint means: they must not change when a run resumes ...
FROZEN_SECTIONS = ("model",)
# ... except fields that only choose how the same parameters are computed (a run may resume on another backend).
COMPUTE_ONLY_FIELDS = {"model": ("dtype", "attention_implementation")}


def record_files(workdir: str) -> list[str]:
    """A run's record: the small files a results table is built from (config.json, metrics.jsonl,
    provenance.jsonl, every eval_*.json and the decoding grids' decoding_*.jsonl), without checkpoints, vocabulary
    or translations. A folder holding only
    these is a run for ``compare``, so results committed this way can be tabulated again after the run is gone."""
    names = [CONFIG_FILE, METRICS_FILE, PROVENANCE_FILE]
    names += sorted(n for n in os.listdir(workdir) if n.startswith("eval_") and n.endswith(".json"))
    names += sorted(n for n in os.listdir(workdir) if n.startswith("decoding_") and n.endswith(".jsonl"))
    return [os.path.join(workdir, n) for n in names if os.path.isfile(os.path.join(workdir, n))]


def path(workdir: str, name: str) -> str:
    """``<workdir>/<name>`` for one of the names above."""
    return os.path.join(workdir, name)


def averaged_path(workdir: str, spec: str) -> str:
    """Where ``transformer-jax average`` keeps ``spec`` (e.g. "avg5")."""
    return os.path.join(os.path.abspath(workdir), AVERAGED_DIR, spec)


def export_path(workdir: str, engine: str, checkpoint: str, quantization: str) -> str:
    """Where a run keeps ``checkpoint`` (latest, a step, avgN) exported for ``engine`` with ``quantization``."""
    return os.path.join(os.path.abspath(workdir), EXPORT_DIR, f"{engine}-{checkpoint}-{quantization}")


def translations_path(workdir: str, split: str) -> str:
    return os.path.join(workdir, f"translations_{split}.txt")


def eval_path(workdir: str, split: str) -> str:
    return os.path.join(workdir, f"eval_{split}.json")


def changed_keys(old: dict, new: dict, free=()) -> list[str]:
    """The keys, sorted, whose values differ between two sections of saved configs, but for ``free`` ones."""
    return sorted(k for k in set(old) | set(new) if k not in free and old.get(k) != new.get(k))


def check_config(config: ml_collections.ConfigDict, workdir: str) -> None:
    """Raises ValueError if ``workdir`` holds a run whose config.json has another model (nothing is written)."""
    file = path(workdir, CONFIG_FILE)
    if not os.path.exists(file):
        return
    with open(file) as f:
        old = json.load(f)
    new = json.loads(config.to_json_best_effort())
    for section in FROZEN_SECTIONS:
        changed = changed_keys(old[section], new[section], COMPUTE_ONLY_FIELDS.get(section, ()))
        if changed:
            raise ValueError(f"{workdir} holds a run with a different config.{section} "
                             f"(changed: {', '.join(changed)}); use a new --workdir.")


def save_config(config: ml_collections.ConfigDict, workdir: str) -> None:
    """Writes the resolved config to ``<workdir>/config.json``; refuses a different model on an existing run."""
    check_config(config, workdir)
    if jax.process_index() != 0:  # one writer; every process checked the frozen sections above
        return
    os.makedirs(workdir, exist_ok=True)
    file = path(workdir, CONFIG_FILE)
    tmp = f"{file}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(json.loads(config.to_json_best_effort()), f, indent=2)
    os.replace(tmp, file)


def load_config(workdir: str) -> ml_collections.ConfigDict:
    """The resolved config a run saved in its workdir."""
    file = path(workdir, CONFIG_FILE)
    if not os.path.exists(file):
        raise FileNotFoundError(f"No {CONFIG_FILE} in {workdir}: is it a transformer-jax run folder?")
    with open(file) as f:
        return ml_collections.ConfigDict(json.load(f))


def checkpoint_steps(workdir: str) -> list[int]:
    """Steps of the complete checkpoints (orbax renames a checkpoint's folder to its step only once it is whole)."""
    directory = path(workdir, CHECKPOINT_DIR)
    with contextlib.suppress(OSError):  # no checkpoints folder (yet)
        return sorted(int(name) for name in os.listdir(directory)
                      if name.isdigit() and os.path.isdir(os.path.join(directory, name)))
    return []


def is_finished(workdir: str, num_steps: int) -> bool:
    """A run is finished when its last checkpoint is at ``num_steps`` and its test split has been scored."""
    steps = checkpoint_steps(workdir)
    return bool(steps) and steps[-1] == num_steps and os.path.exists(eval_path(workdir, "test"))
