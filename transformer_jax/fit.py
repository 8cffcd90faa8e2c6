"""When a run does not fit its target: a configuration that does, found by compiling a few candidates.

MaxText's ahead-of-time compile only fails; this says what to change. The candidates, in the order a researcher
would accept them (the paper's recipe unchanged first):

1. ``train.mesh.fsdp``: parameters and Adam moments sharded over more devices (same math, more communication);
2. ``train.grad_accum_steps``: the ~25K-token step as k micro-batches (same math: the loss is normalised by the
   step's token count, train/step.py), activations / k;
3. both;
4. ``train.mesh.tensor``: heads, the FFN's inner dimension and the vocabulary split over devices (same math);
5. ``data.tokens_per_batch`` halved — changes the recipe (§5.1), so last.

Each candidate's memory is first predicted from the failing program (state / shards + temporaries / micro-batches +
code and batch); each kind is tried from its smallest change predicted to fit, and on to larger ones of the same
kind if the compile needs more (micro-batches do not shrink the logits' and the optimizer's buffers), at most
``max_compiles`` in all; a candidate is the answer only when XLA's compile for the target fits every bucket (the
failing ones first).
"""

from __future__ import annotations

import dataclasses

import ml_collections

from transformer_jax import sharding
from transformer_jax.aot import Compiler, Program, state_bytes
from transformer_jax.target import Target

HEADROOM = 0.9  # a kind's candidates are tried from the first whose predicted memory is under this share of the budget


@dataclasses.dataclass
class Candidate:
    overrides: dict[str, int]  # config field (section.field) → value
    predicted_bytes: float
    changes_recipe: bool = False

    @property
    def flags(self) -> str:
        return " ".join(f"--config.{k}={v}" for k, v in self.overrides.items())


@dataclasses.dataclass
class Suggestion:
    candidate: Candidate
    programs: list[Program]  # every bucket compiled with it

    @property
    def largest(self) -> Program:
        return max(self.programs, key=lambda p: p.total_bytes)


def with_overrides(config: ml_collections.ConfigDict, overrides: dict[str, int]) -> ml_collections.ConfigDict:
    """A copy of ``config`` with ``section.field`` (or ``section.sub.field``) overrides applied."""
    config = ml_collections.ConfigDict(config.to_dict())
    for key, value in overrides.items():
        *path, field = key.split(".")
        node = config
        for part in path:
            node = node[part]
        node[field] = value
    return config


def candidates(config: ml_collections.ConfigDict, target: Target, worst: Program, state: int,
               budget: int) -> list[Candidate]:
    """The candidates of the module docstring, in the order to try them: kind by kind (in the order above), each
    kind from its smallest change predicted to fit ``budget`` to its largest (a compile may need more than the
    prediction: the next size of the same kind is then tried before the next kind)."""
    devices = target.num_devices
    _, fsdp, tensor = sharding.mesh_shape(config.train.mesh, devices)
    accum, heads = int(config.train.grad_accum_steps), int(config.model.num_heads)
    # what micro-batches shrink (temporaries: activations, gradients) and what they do not (code, the batch); a
    # program the compiler refused has no breakdown: all but the state counts as temporaries
    if worst.memory:
        scaled, fixed = worst.memory["temp"], max(worst.total_bytes - state - worst.memory["temp"], 0.0)
    else:
        scaled, fixed = max(worst.total_bytes - state, 0.0), 0.0
    rest = scaled + fixed

    def mesh(f: int, t: int) -> dict[str, int]:
        return {"train.mesh.data": -1, "train.mesh.fsdp": f, "train.mesh.tensor": t}

    def shard_factors(start: int, limit: int) -> list[int]:
        out, f = [], start * 2
        while f <= limit and limit % f == 0:
            out.append(f)
            f *= 2
        return out

    kinds: list[list[Candidate]] = [
        [Candidate({**mesh(f, tensor)}, state * fsdp / f + rest) for f in shard_factors(fsdp, devices // tensor)],
        [Candidate({"train.grad_accum_steps": accum * k}, state + scaled / k + fixed) for k in (2, 4, 8, 16)],
        [Candidate({**mesh(f, tensor), "train.grad_accum_steps": accum * k}, state * fsdp / f + scaled / k + fixed)
         for k in (2, 4, 8) for f in shard_factors(fsdp, devices // tensor)],
        [Candidate({**mesh(fsdp, t)}, (state + rest) * tensor / t)
         for t in shard_factors(tensor, devices // fsdp) if heads % t == 0],
        [Candidate({"data.tokens_per_batch": int(config.data.tokens_per_batch) // 2 ** i},
                   state + scaled / 2 ** i + fixed, changes_recipe=True) for i in (1, 2, 3)],
    ]
    chosen = []
    for kind in kinds:
        first = next((i for i, c in enumerate(kind) if c.predicted_bytes <= HEADROOM * budget), None)
        for candidate in kind[first:] if first is not None else []:
            candidate.overrides = {k: v for k, v in candidate.overrides.items() if _current(config, k) != v}
            chosen.append(candidate)
    return chosen


def _current(config: ml_collections.ConfigDict, key: str):
    node = config
    for part in key.split("."):
        node = node[part]
    return node


def suggest(config: ml_collections.ConfigDict, target: Target, failing: list[Program], budget: int,
            max_compiles: int = 4, progress=None) -> Suggestion | None:
    """The first candidate whose compile fits every bucket of ``config`` on ``target``, or None.

    Args:
      failing: the programs (buckets) that did not fit; they are compiled first for each candidate.
      budget: bytes per device (the chip's usable memory or --hbm_gib).
      max_compiles: candidates compiled at most.
      progress: optional ``fn(message)`` told which candidate is compiled.
    """
    worst = max(failing, key=lambda p: p.total_bytes)
    compiler = Compiler.for_target(config, target, budget)
    for candidate in candidates(config, target, worst, state_bytes(config, compiler.mesh), budget)[:max_compiles]:
        if progress:
            progress(f"compiling candidate {candidate.flags} (predicted {candidate.predicted_bytes / 2**30:.2f} GiB)")
        try:
            trial = Compiler.for_target(with_overrides(config, candidate.overrides), target, budget)
        except ValueError:  # e.g. the mesh does not divide the devices
            continue
        failing_lengths = [p.length for p in failing]
        first = trial.train(failing_lengths)
        if not all(p.fits for p in first):
            continue
        others = [b.length for b in trial.plan.buckets if b.length not in failing_lengths]
        rest = trial.train(others) if others else []
        if all(p.fits for p in rest):
            return Suggestion(candidate, first + rest)
    return None
