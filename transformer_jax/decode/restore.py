"""Restoring a run for decoding: its resolved config, its vocabulary and a (possibly averaged) checkpoint.

``checkpoint`` is "latest", a step number, or "avgN" — the elementwise mean of the last N checkpoints
(§6.1: the paper averages the last 5 checkpoints for base and the last 20 for big). ``transformer-jax average``
writes such an average once, as ``<workdir>/averaged/avgN``, and later restores reuse it.

A checkpoint that cannot be read is moved aside by run/checkpoints.py (one warning names where it went); "latest"
and "avgN" then fall back to the newest checkpoints that restore, while an explicit step number fails with one
line (:class:`CorruptCheckpointError`, an OSError).
"""

import dataclasses
import json
import logging
import os

import jax
import ml_collections
import orbax.checkpoint as ocp
from flax import nnx

from transformer_jax import sharding
from transformer_jax.data.tokenizer import VOCAB_FILENAME, Tokenizer
from transformer_jax.model.build import model_setup
from transformer_jax.run import checkpoint_spec, folder
from transformer_jax.run.checkpoints import CORRUPT_MARK, Checkpointer, average_params
from transformer_jax.run.disk_errors import CorruptCheckpointError, DiskFullError, is_disk_full
from transformer_jax.run.folder import load_config

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class RestoredRun:
    config: ml_collections.ConfigDict
    tokenizer: Tokenizer
    mesh: jax.sharding.Mesh
    graphdef: nnx.GraphDef
    params: dict
    checkpoint: str  # what was restored, e.g. "step 1500" or "avg5 (steps 1100..1500)"
    steps: tuple[int, ...] = ()  # the checkpoints it came from


def _steps_for(spec: str, checkpointer: Checkpointer) -> list[int]:
    """The steps ``spec`` names: latest or a step among all checkpoints; avgN from the step schedule only (a
    time-based safety save is resumed from, never averaged: run/checkpoints.py)."""
    steps = checkpointer.all_steps()
    if not steps:
        set_aside = sorted(n for n in os.listdir(checkpointer.directory) if CORRUPT_MARK in n)
        if set_aside:
            raise FileNotFoundError(f"The run has no readable checkpoint in {checkpointer.directory} (set aside as "
                                    f"unreadable: {', '.join(set_aside)}).")
        raise FileNotFoundError("The run has no checkpoints yet.")
    name = checkpoint_spec.parse(spec)
    if name.kind == "latest":
        return [steps[-1]]
    if name.kind == "step":
        if name.n not in steps:
            raise ValueError(f"No checkpoint at step {spec}; available: {', '.join(map(str, steps))}.")
        return [name.n]
    scheduled = checkpointer.scheduled_steps()
    if not 1 <= name.n <= len(scheduled):
        raise ValueError(f"Cannot average the last {name.n} checkpoints: the run has {len(scheduled)} on its step "
                         f"schedule (every {checkpointer.every_steps} steps: "
                         f"{', '.join(map(str, scheduled)) or 'none yet'}).")
    return scheduled[-name.n:]


def named_steps(workdir: str, spec: str, config: ml_collections.ConfigDict | None = None) -> list[int]:
    """The checkpoint steps ``spec`` (latest, a step, avgN) names in ``workdir``, found without restoring any;
    raises as :func:`restore_run` would (FileNotFoundError, ValueError). ``config``: the run's (None: read from its
    config.json)."""
    config = load_config(workdir) if config is None else config
    return _steps_for(spec, Checkpointer.for_run(workdir, config.train))


def _leaf_shapes(tree) -> dict[str, tuple]:
    """``{"decoder_layers/0/ffn/w_1": shape, ...}`` of a parameter tree."""
    def name(path) -> str:
        return "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)
    return {name(path): tuple(x.shape) for path, x in jax.tree_util.tree_flatten_with_path(tree)[0]}


def check_shapes(params, abstract, what: str) -> None:
    """Raises ValueError unless ``params`` has exactly the leaves and shapes of ``abstract`` (the config's model)."""
    want, got = _leaf_shapes(abstract), _leaf_shapes(params)
    problems = [f"{name} is missing from the checkpoint" for name in want if name not in got]
    problems += [f"{name} has shape {got[name]} in the checkpoint but {want[name]} in config.json"
                 for name in want if name in got and got[name] != want[name]]
    problems += [f"{name} is in the checkpoint but not in the model of config.json" for name in got if name not in want]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ValueError(f"{what} does not match the run's config.json (shapes or vocabulary differ): "
                         f"{problems[0]}{more}.")


def _restore_params(checkpointer: Checkpointer, step: int, setup, workdir: str) -> dict:
    """Restores step ``step``'s parameters as saved, checks them against the config, places them on the mesh."""
    abstract = setup.abstract_params
    params = checkpointer.restore_params(step, abstract)
    check_shapes(params, abstract, f"Checkpoint step {step} of {workdir}")
    return jax.device_put(params, setup.param_shardings)


def load_tokenizer(workdir: str, config: ml_collections.ConfigDict) -> Tokenizer:
    """The run's vocabulary (§5.1), checked against its config; FileNotFoundError when the run has none."""
    vocab = os.path.join(workdir, VOCAB_FILENAME)
    if not os.path.exists(vocab):
        raise FileNotFoundError(f"No {VOCAB_FILENAME} in {workdir}: the run's vocabulary is needed to decode.")
    return Tokenizer.load(vocab, expected_vocab_size=config.model.vocab_size)


def restore_run(workdir: str, checkpoint: str = "latest", mesh_config=None,
                config: ml_collections.ConfigDict | None = None) -> RestoredRun:
    """Restores config, tokenizer and parameters of ``workdir`` onto a mesh (default: the run's mesh config).

    ``config`` is the run's config as the caller already holds it (its config.json with the command line's
    ``config.decode`` overrides: launch/overrides.py), returned in the RestoredRun; None reads config.json.
    """
    config = load_config(workdir) if config is None else config
    tokenizer = load_tokenizer(workdir, config)
    mesh = sharding.make_mesh(mesh_config or config.train.mesh)
    setup = model_setup(config, mesh)  # parameters only: decoding builds no optimizer
    averaged = folder.averaged_path(workdir, checkpoint)
    checkpointer = Checkpointer.for_run(workdir, config.train)
    while True:  # until the steps ``checkpoint`` names all restore (unreadable ones are moved aside on the way)
        steps = _steps_for(checkpoint, checkpointer)
        if len(steps) > 1 and _saved_average_steps(averaged) == steps:  # written by `average` for these very steps
            params = ocp.StandardCheckpointer().restore(os.path.join(averaged, "params"), setup.abstract_params)
            return RestoredRun(config, tokenizer, mesh, setup.graphdef, params, f"{checkpoint} ({averaged})",
                               tuple(steps))
        try:
            trees = [_restore_params(checkpointer, s, setup, workdir) for s in steps]
            break
        except CorruptCheckpointError as error:
            if checkpoint_spec.parse(checkpoint).kind == "step":  # the step asked for: nothing to fall back to
                raise
            logger.warning("%s Using the checkpoints that remain for %s.", error, checkpoint)
    if len(trees) == 1:
        return RestoredRun(config, tokenizer, mesh, setup.graphdef, trees[0], f"step {steps[0]}", tuple(steps))
    mean = average_params([jax.device_get(t) for t in trees])
    params = jax.device_put(mean, setup.param_shardings)
    return RestoredRun(config, tokenizer, mesh, setup.graphdef, params,
                       f"{checkpoint} (steps {', '.join(map(str, steps))})", tuple(steps))


def _saved_average_steps(path: str) -> list[int] | None:
    """The steps an averaged checkpoint was made from (None if there is none)."""
    try:
        with open(os.path.join(path, "steps.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_average(workdir: str, last: int, config: ml_collections.ConfigDict | None = None) -> tuple[str, list[int]]:
    """Averages the last ``last`` checkpoints into ``<workdir>/averaged/avg<last>``; returns (path, steps).

    The average is recomputed from the step checkpoints every time (a stale one is replaced) and records its steps,
    so ``--checkpoint=avgN`` reuses it only while the last N steps are still the same. ``config``: the run's (None:
    read from its config.json).
    """
    path = folder.averaged_path(workdir, f"avg{last}")
    config = load_config(workdir) if config is None else config
    _steps_for(f"avg{last}", Checkpointer.for_run(workdir, config.train))  # too few: one line, before invalidating
    if os.path.exists(os.path.join(path, "steps.json")) and jax.process_index() == 0:
        os.remove(os.path.join(path, "steps.json"))  # invalidate before computing, so it is never reused
    run = restore_run(workdir, f"avg{last}", config=config)
    steps = list(run.steps)  # the last N that could be read (an unreadable one is replaced by an older one)
    checkpointer = ocp.StandardCheckpointer()
    try:
        checkpointer.save(os.path.join(path, "params"), run.params, force=True)
        checkpointer.wait_until_finished()
        if jax.process_index() == 0:
            with open(os.path.join(path, "steps.json"), "w") as f:
                json.dump(steps, f)
    except Exception as error:  # orbax and tensorstore report a full disk with many types
        if not is_disk_full(error):
            raise
        raise DiskFullError(f"No space left on the disk of {path}: cannot write the average of steps "
                            f"{', '.join(map(str, steps))}. Free space there and run the same command again.") from None
    return path, steps
