r"""Table 3 of the paper as a sweep: the rows of configs/table3.py (base, A1–A4, B1–B2, C1–C7, D1–D4, E, big).

The row logic lives in configs/table3.py only (``table3.apply_row``); this file names the sweep, its default base
(the paper's, configs/base.py) and the paper's dev PPL / BLEU / parameter count per row (``table3.PAPER``)::

    transformer-jax sweep --experiment=table3 --base=demo_table3 --rows=A,B1,C --workdir=runs/table3_demo
    transformer-jax compare runs/table3_demo/*
"""

from transformer_jax.configs import table3
from transformer_jax.experiments import Experiment, rows_experiment


def get_experiment() -> Experiment:
    """The Table 3 sweep (EN-DE newstest2013, beam search, no checkpoint averaging)."""
    paper = {row: {"dev_ppl": ppl, "dev_bleu": bleu, "params_m": params}
             for row, (ppl, bleu, params) in table3.PAPER.items()}
    return rows_experiment(
        "table3", "Table 3: variations on Transformer base (heads, d_k, size, dropout, label smoothing, positions)",
        table3, paper)
