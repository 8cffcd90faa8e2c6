"""`transformer-jax average`: average the last N checkpoints of a run into one (§6.1).

    transformer-jax average --workdir=runs/base --last=5     # base: the last 5 checkpoints (10-minute intervals)
    transformer-jax average --workdir=runs/big --last=20     # big: the last 20
    transformer-jax evaluate --workdir=runs/base --split=test --checkpoint=avg5

Writes the elementwise mean of the parameters as ``<workdir>/averaged/avgN`` and prints its path (the last line);
`decode` and `evaluate` then restore it with ``--checkpoint=avgN``. Running it again recomputes the average from
the run's current last N checkpoints.
"""

import json
import os
import sys

from absl import flags

from transformer_jax.decode.restore import write_average
from transformer_jax.launch import cluster, logs, overrides
from transformer_jax.launch.flags import JSON, WORKDIR
from transformer_jax.launch.verbs import Verb

LAST = flags.DEFINE_integer(
    "last", None, "Number of most recent checkpoints to average (default: the run's config.decode.average_last; "
    "§6.1: 5 for base, 20 for big).", lower_bound=1)
for _name in ("workdir", "json", *cluster.FLAG_NAMES):
    flags.declare_key_flag(_name)
VERB = Verb("average", overrides="override a field of the run's config.json (decode.* only): "
                                  "--config.decode.average_last=20 is --last=20.",
            run_overrides=True, flag_hints=overrides.flag_hints("average"))


def main(argv: list[str]) -> None:
    del argv
    logs.setup()
    config = overrides.run_config("average")  # --config.decode.average_last=N, like --last=N
    workdir = WORKDIR.value
    if not os.access(workdir, os.W_OK):
        sys.exit(f"transformer-jax average: {workdir} is not writable (the average goes to {workdir}/averaged).")
    cluster.maybe_initialize()
    try:
        last = LAST.value or int(config.decode.average_last)
        path, steps = write_average(workdir, last, config)
    except (ValueError, OSError) as e:  # no run, too few checkpoints, or a checkpoint that does not fit config.json
        sys.exit(f"transformer-jax average: {e}")
    if JSON.value:
        print(json.dumps({"path": path, "checkpoint": f"avg{last}", "steps": steps}))
    else:
        print(f"Averaged the last {last} checkpoints of {workdir} (steps {', '.join(map(str, steps))}) into:")
        print(path)
