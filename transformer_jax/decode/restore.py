"""Restoring a run for decoding: its resolved config, its vocabulary and a (possibly averaged) checkpoint.

``checkpoint`` is "latest", a step number, or "avgN" — the elementwise mean of the last N checkpoints
(§6.1: the paper averages the last 5 checkpoints for base and the last 20 for big). ``transformer-jax average``
writes such an average once, as ``<workdir>/averaged/avgN``, and later restores reuse it.
"""

import dataclasses
import os
import re

import jax
import ml_collections
import orbax.checkpoint as ocp
from flax import nnx

from transformer_jax.data.tokenizer import VOCAB_FILENAME, Tokenizer
from transformer_jax.train import sharding
from transformer_jax.train.checkpoint import Checkpointer, average_params
from transformer_jax.train.step import make_setup
from transformer_jax.train.trainer import load_config

AVERAGED_DIR = "averaged"


@dataclasses.dataclass
class RestoredRun:
    config: ml_collections.ConfigDict
    tokenizer: Tokenizer
    mesh: jax.sharding.Mesh
    graphdef: nnx.GraphDef
    params: dict
    checkpoint: str  # what was restored, e.g. "step 1500" or "avg5 (steps 1100..1500)"


def _steps_for(spec: str, steps: list[int]) -> list[int]:
    if not steps:
        raise FileNotFoundError("The run has no checkpoints yet.")
    if spec == "latest":
        return [steps[-1]]
    if spec.isdigit():
        if int(spec) not in steps:
            raise ValueError(f"No checkpoint at step {spec}; available: {', '.join(map(str, steps))}.")
        return [int(spec)]
    match = re.fullmatch(r"avg(\d+)", spec)
    if match:
        n = int(match.group(1))
        if not 1 <= n <= len(steps):
            raise ValueError(f"Cannot average the last {n} checkpoints: the run has {len(steps)}.")
        return steps[-n:]
    raise ValueError(f"Bad checkpoint {spec!r}: use latest, a step number, or avgN (e.g. avg5).")


def _restore_params(checkpointer: Checkpointer, step: int, abstract: dict, workdir: str) -> dict:
    try:
        return checkpointer.restore_params(step, abstract)
    except (ValueError, KeyError) as e:  # orbax names the mismatching leaf; say what it means for the user
        raise ValueError(f"Checkpoint {step} in {workdir} does not match the run's config.json (shapes or vocabulary "
                         f"differ): {e}") from None


def restore_run(workdir: str, checkpoint: str = "latest", mesh_config=None) -> RestoredRun:
    """Restores config, tokenizer and parameters of ``workdir`` onto a mesh (default: the run's mesh config)."""
    config = load_config(workdir)
    vocab = os.path.join(workdir, VOCAB_FILENAME)
    if not os.path.exists(vocab):
        raise FileNotFoundError(f"No {VOCAB_FILENAME} in {workdir}: the run's vocabulary is needed to decode.")
    tokenizer = Tokenizer.load(vocab, expected_vocab_size=config.model.vocab_size)
    mesh = sharding.make_mesh(mesh_config or config.train.mesh)
    setup = make_setup(config, mesh)
    abstract = setup.abstract_state["params"]
    averaged = os.path.join(os.path.abspath(workdir), AVERAGED_DIR, checkpoint)
    if checkpoint.startswith("avg") and os.path.isdir(averaged):
        params = ocp.StandardCheckpointer().restore(averaged, abstract)
        return RestoredRun(config, tokenizer, mesh, setup.graphdef, params, f"{checkpoint} ({averaged})")
    checkpointer = Checkpointer(workdir, keep=config.train.keep_checkpoints)
    steps = _steps_for(checkpoint, checkpointer.all_steps())
    trees = [_restore_params(checkpointer, s, abstract, workdir) for s in steps]
    if len(trees) == 1:
        return RestoredRun(config, tokenizer, mesh, setup.graphdef, trees[0], f"step {steps[0]}")
    mean = average_params([jax.device_get(t) for t in trees])
    params = jax.device_put(mean, setup.param_shardings)
    return RestoredRun(config, tokenizer, mesh, setup.graphdef, params,
                       f"{checkpoint} (steps {', '.join(map(str, steps))})")


def write_average(workdir: str, last: int) -> str:
    """Averages the last ``last`` checkpoints and saves them as ``<workdir>/averaged/avg<last>``; returns the path."""
    run = restore_run(workdir, f"avg{last}")
    path = os.path.join(os.path.abspath(workdir), AVERAGED_DIR, f"avg{last}")
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(path, run.params, force=True)
    checkpointer.wait_until_finished()
    return path
