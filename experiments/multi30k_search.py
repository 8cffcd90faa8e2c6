r"""The Multi30k recipe search as a sweep: the settings of configs/multi30k_search.py, each a row on multi30k.

    transformer-jax sweep --experiment=multi30k_search --rows=tiny --workdir=runs/m30k_search \
        --config.data.data_dir=../shared/data/multi30k
    transformer-jax compare runs/m30k_search/* --experiment=multi30k_search --out=experiments/results/multi30k_search
"""

import functools

from transformer_jax.configs import multi30k_search
from transformer_jax.experiments import Experiment


def get_experiment() -> Experiment:
    """The search (no paper column: the paper has no Multi30k result)."""
    return Experiment(
        name="multi30k_search",
        description="Multi30k EN→DE recipe search, chosen on the dev split (val 2016)",
        default_base="multi30k",
        rows={row: functools.partial(multi30k_search.apply_row, row=row) for row in multi30k_search.ROWS},
        paper={},
        config_file=multi30k_search.__file__,
        load_base=multi30k_search.load_base,
        notes=multi30k_search.NOTES,
    )
