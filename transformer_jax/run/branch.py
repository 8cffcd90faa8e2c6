"""Branching a run: a new run that starts from another run's checkpoint of step S and is, up to S, exactly the run
its own config trains from scratch (a tool of the recipe search, not a section of the paper).

Training resumes exactly (DESIGN.md "Contracts": parameters, optimizer state, dropout keys and the data position
travel with each checkpoint), and nothing before step S depends on how a run ends, except a learning-rate cooldown
(``train.cooldown_steps``, train/optimizer.py). So a config that differs from the source's only in what acts
after S — more or fewer steps, a cooldown starting at or after S, the evaluation and checkpoint cadence, the mesh,
decoding, its name and row labels — may start from the source's step-S checkpoint and save the S steps' time::

    transformer-jax train --config=configs/multi30k_search.py:tiny_8k_cd2k --workdir=runs/cd2k \\
        --branch_from=runs/tiny_8k --branch_step=6000

copies into the new workdir the source's vocabulary and token caches, its checkpoints up to S (so an average may
reach back before S), its metrics up to S and the provenance of the starts that made them, then trains as a resume
would (TensorBoard events are not copied: the branch's start at S). Any other difference (the model, the data, the
seed, the optimizer, the schedule before S) is refused with the fields named. Running the same command again on a
workdir that already has checkpoints resumes it and copies nothing.
"""

import glob
import json
import logging
import os
import shutil

import jax
import ml_collections

from transformer_jax.data.tokenizer import VOCAB_FILENAME
from transformer_jax.run import folder
from transformer_jax.run.checkpoints import copy_schedule
from transformer_jax.run.metrics import START_EVENT, read_metrics

logger = logging.getLogger(__name__)

# Fields that act only after the branch step (or only choose how the same run is computed or scored).
FREE_FIELDS = {
    "": ("name", "sweep_row", "table3_row"),  # labels of the row a run was made from
    "decode": None,  # None: the whole section
    "train": ("num_steps", "cooldown_steps", "checkpoint_every_steps", "checkpoint_every_minutes",
              "keep_checkpoints", "eval_every_steps", "eval_bleu", "log_every_steps", "mesh"),
    "model": folder.COMPUTE_ONLY_FIELDS["model"],
}
DEFAULTS = {"train": {"cooldown_steps": 0}}  # fields a config.json written before they existed does not have


def _fields(config: dict, section: str) -> dict:
    values = config if section == "" else config.get(section, {})
    if section == "":
        values = {k: v for k, v in values.items() if not isinstance(v, dict)}
    return {**DEFAULTS.get(section, {}), **values}


def changed_fields(source: dict, branch: dict) -> list[str]:
    """``config.SECTION.FIELD (old → new)`` for every difference that would change steps 1..S."""
    changed = []
    for section in sorted({"", *(k for k, v in {**source, **branch}.items() if isinstance(v, dict))}):
        free = FREE_FIELDS.get(section, ())
        if free is None:
            continue
        old, new = _fields(source, section), _fields(branch, section)
        for key in folder.changed_keys(old, new, free):
            name = f"config.{section}.{key}" if section else f"config.{key}"
            changed.append(f"{name} ({old.get(key)!r} → {new.get(key)!r})")
    return changed


def cooldown_start(train: dict) -> int:
    """The last step trained at the §5.3 rate: num_steps - cooldown_steps + 1, whose factor is still N/N
    (train/optimizer.py), or num_steps without a cooldown."""
    cooldown = int(train.get("cooldown_steps") or 0)
    return int(train["num_steps"]) - cooldown + (1 if cooldown else 0)


def check(config: ml_collections.ConfigDict, source: str, step: int) -> None:
    """Raises ValueError (FileNotFoundError for a missing run) unless ``config`` may start from ``source``'s
    checkpoint of ``step`` and be the run it would be from scratch up to that step."""
    old = json.loads(folder.load_config(source).to_json_best_effort())
    new = json.loads(config.to_json_best_effort())
    steps = folder.checkpoint_steps(source)
    if step not in steps:
        shown = ", ".join(map(str, steps[-10:])) or "none"
        raise ValueError(f"--branch_step={step}: {source} has no checkpoint of step {step} (it has: {shown}).")
    changed = changed_fields(old, new)
    if changed:
        raise ValueError(f"--branch_from={source}: the config differs in what steps 1..{step} depend on: "
                         f"{'; '.join(changed)}. Only the run's end, its cooldown, evaluation, checkpoint cadence, "
                         "mesh and decoding may change.")
    if int(new["train"]["num_steps"]) <= step:
        raise ValueError(f"--branch_step={step}: config.train.num_steps={new['train']['num_steps']} leaves nothing "
                         "to train after it.")
    for which, train in (("the branch's", new["train"]), (f"{source}'s", old["train"])):
        if cooldown_start(train) < step:
            raise ValueError(f"--branch_step={step}: {which} cooldown starts after step {cooldown_start(train)} "
                             f"(num_steps {train['num_steps']}, cooldown_steps {train.get('cooldown_steps')}), "
                             f"before the branch: the two runs' rates differ before step {step}.")


def _starts_before(records: list[dict], step: int) -> int:
    return sum(1 for r in records if r.get("event") == START_EVENT and int(r["step"]) < step)


def copy(source: str, step: int, workdir: str) -> None:
    """Copies ``source``'s run up to ``step`` into ``workdir``, which must hold no run; call :func:`check` first.

    Raises ValueError if ``workdir`` holds a run's files (a branch that already has checkpoints is resumed as any
    run is, without this copy).
    """
    if folder.checkpoint_steps(workdir) or os.path.exists(folder.path(workdir, folder.CONFIG_FILE)):
        raise ValueError(f"--workdir={workdir} already holds a run: a branch needs a new --workdir.")
    if jax.process_index() == 0:
        _copy(source, step, workdir)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("transformer_jax: branch copied")
    logger.info("Branched %s at step %d into %s.", source, step, workdir)


def _copy(source: str, step: int, workdir: str) -> None:
    checkpoints = folder.path(workdir, folder.CHECKPOINT_DIR)
    os.makedirs(checkpoints, exist_ok=True)
    for name in [VOCAB_FILENAME, *map(os.path.basename, glob.glob(folder.path(source, "tokens-*.npz")))]:
        if os.path.isfile(folder.path(source, name)):
            shutil.copy2(folder.path(source, name), folder.path(workdir, name))
    for s in folder.checkpoint_steps(source):
        if s <= step:
            shutil.copytree(os.path.join(source, folder.CHECKPOINT_DIR, str(s)), os.path.join(checkpoints, str(s)))
    copy_schedule(source, workdir, step)
    records = read_metrics(source)
    kept = [r for r in records if int(r.get("step", 0)) < step or (r.get("step") == step
                                                                      and r.get("event") != START_EVENT)]
    with open(folder.path(workdir, folder.METRICS_FILE), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in kept)
    if os.path.exists(folder.path(source, folder.PROVENANCE_FILE)):  # one record per start, as metrics has
        with open(folder.path(source, folder.PROVENANCE_FILE)) as f:
            lines = [line for line in f if line.strip()]
        with open(folder.path(workdir, folder.PROVENANCE_FILE), "w") as f:
            f.writelines(lines[:_starts_before(records, step)])
