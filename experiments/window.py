r"""Restricted self-attention (§4, Table 1 row 4) as a sweep: rows r1, r2, r4, r8 and full of configs/window.py.

    transformer-jax sweep --experiment=window --base=demo_table3 --workdir=runs/window
    transformer-jax compare runs/window/* --experiment=window --out=experiments/results/window_synthetic
"""

from transformer_jax.configs import window
from transformer_jax.experiments import Experiment, rows_experiment


def get_experiment() -> Experiment:
    """The window sweep (the paper reports no BLEU for restricted attention: no paper column)."""
    return rows_experiment(
        "window", "Restricted self-attention: each query attends to keys within r positions (Table 1 row 4)", window)
