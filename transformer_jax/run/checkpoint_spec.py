"""How a command names the checkpoint to score: ``latest``, a step number, or ``avgN`` (§6.1).

§6.1 scores "a single model obtained by averaging the last 5 checkpoints" (base; 20 for big); ``avgN`` names that
average, ``latest`` the newest checkpoint and a number one step. The grammar is parsed here only, so that
``--eval_checkpoint`` (checked against the step schedule before training), ``--checkpoint`` (resolved against a
run's checkpoints, decode/restore.py) and ``--grid=checkpoint=...`` (launch/grid.py) accept exactly the same names.
Nothing heavy is imported: ``sweep --launcher=print`` checks its flags without orbax or JAX.
"""

import dataclasses
import re

USAGE = "use latest, a step number, or avgN (e.g. avg5)"


@dataclasses.dataclass(frozen=True)
class CheckpointSpec:
    """A parsed checkpoint name: ``kind`` is "latest", "step" (``n`` = the step) or "avg" (``n`` = how many)."""

    kind: str
    n: int = 0


def parse(spec: str) -> CheckpointSpec:
    """Parses ``spec``; raises ValueError (``Bad checkpoint 'x': use latest, ...``) for anything else."""
    if spec == "latest":
        return CheckpointSpec("latest")
    if spec.isdigit():
        return CheckpointSpec("step", int(spec))
    match = re.fullmatch(r"avg(\d+)", spec)
    if match:
        return CheckpointSpec("avg", int(match.group(1)))
    raise ValueError(f"Bad checkpoint {spec!r}: {USAGE}.")
