"""Trains (or resumes) the tiny synthetic-data config with ``trainer.train``; for tests/test_train_resume.py.

    python tests/scripts/train_tiny.py WORKDIR [--hold_at=STEP --held_file=PATH]

The config is tiny_setup.resume_config(). ``--hold_at``: after step STEP's evaluation (the eval hook, which runs
every step and does not touch the train state, the RNG or the data position) the run writes PATH and waits there
until it has handled a SIGTERM, so a test can signal it at a known step instead of racing a running clock: a SIGKILL
then lands between two checkpoints, and a SIGTERM takes effect at the very next step (STEP + 1). Logs go to stderr
(INFO, including "Resumed from step N"); the last line of stdout is the JSON of the last logged metrics.
"""

import argparse
import json
import logging
import sys
import time

from tiny_setup import HOLD_DEADLINE_S, resume_config, set_xla_flags

set_xla_flags()

from transformer_jax.train import preemption, trainer


def note_sigterm(handled: list[bool]) -> None:
    """Makes the trainer's SIGTERM handler also set ``handled[0]`` (after its own flag, so the next step sees it).
    A plain flag, not a lock or an Event: a signal handler must not take a lock its thread may hold."""
    on_sigterm = preemption.PreemptionWatch._on_sigterm

    def wrapped(self, signum, frame):
        on_sigterm(self, signum, frame)
        handled[0] = True

    preemption.PreemptionWatch._on_sigterm = wrapped


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workdir")
    parser.add_argument("--hold_at", type=int, default=0)
    parser.add_argument("--held_file", default="")
    args = parser.parse_args()
    logging.basicConfig(format="%(name)s: %(message)s")
    logging.getLogger("transformer_jax").setLevel(logging.INFO)
    handled = [False]
    note_sigterm(handled)

    def hold(setup, params, step):
        if step == args.hold_at:
            with open(args.held_file, "w") as f:
                f.write(str(step))
            deadline = time.monotonic() + HOLD_DEADLINE_S
            while not handled[0]:
                time.sleep(0.01)  # the Python-level handler runs in this thread, between (or cutting short) sleeps
                if time.monotonic() > deadline:
                    sys.exit(f"held at step {step} for {HOLD_DEADLINE_S} s without a signal")
        return {}

    last = trainer.train(resume_config(), args.workdir, progress=False, eval_hook=hold if args.hold_at else None)
    print(json.dumps(last), flush=True)


if __name__ == "__main__":
    main()
