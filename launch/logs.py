"""Console logging for the commands: our INFO lines, quieter third-party libraries."""

import logging

from absl import logging as absl_logging


def setup() -> None:
    absl_logging.set_verbosity(absl_logging.INFO)
    absl_logging.set_stderrthreshold(absl_logging.INFO)
    for noisy in ("orbax", "absl", "jax", "tensorflow_datasets", "etils"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # orbax logs through absl's logger; keep its chatter out of the console but keep ours (transformer_jax.*).
    absl_logging.get_absl_handler().addFilter(lambda record: record.name.startswith("transformer_jax")
                                              or record.levelno >= logging.WARNING)
