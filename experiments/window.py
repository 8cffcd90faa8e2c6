r"""Restricted self-attention (§4, Table 1 row 4) as a sweep: rows r1, r2, r4, r8 and full of configs/window.py.

    transformer-jax sweep --experiment=window --base=demo_table3 --workdir=runs/window --eval_checkpoint=last
    transformer-jax compare runs/window/* --experiment=window --out=experiments/results/window_synthetic
"""

import functools

from transformer_jax.configs import window
from transformer_jax.experiments import Experiment


def get_experiment() -> Experiment:
    """The window sweep (the paper reports no BLEU for restricted attention: no paper column)."""
    return Experiment(
        name="window",
        description="Restricted self-attention: each query attends to keys within r positions (Table 1 row 4)",
        default_base="demo_table3",
        rows={row: functools.partial(window.apply_row, row=row) for row in window.ROWS},
        paper={},
        config_file=window.__file__,
        load_base=window.load_base,
        notes=window.NOTES,
    )
