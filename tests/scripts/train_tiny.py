"""Trains (or resumes) the tiny synthetic-data config with ``trainer.train``; for tests/test_train_resume.py.

    python tests/scripts/train_tiny.py WORKDIR [--pace_s=0.15]

The config is tiny_setup.resume_config(). ``--pace_s`` sleeps that long after every step (through the eval hook,
which runs every step and does not touch the train state, the RNG or the data position), so that a test can
SIGKILL the run between two checkpoints without a race. Logs go to stderr (INFO, including "Resumed from step N");
the last line of stdout is the JSON of the last logged metrics.
"""

import argparse
import json
import logging
import time

from tiny_setup import resume_config, set_xla_flags

set_xla_flags()

from transformer_jax.train import trainer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workdir")
    parser.add_argument("--pace_s", type=float, default=0.0)
    args = parser.parse_args()
    logging.basicConfig(format="%(name)s: %(message)s")
    logging.getLogger("transformer_jax").setLevel(logging.INFO)

    def pace(setup, params, step):
        time.sleep(args.pace_s)
        return {}

    last = trainer.train(resume_config(), args.workdir, progress=False, eval_hook=pace if args.pace_s else None)
    print(json.dumps(last), flush=True)


if __name__ == "__main__":
    main()
