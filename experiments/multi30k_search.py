r"""The Multi30k recipe search as a sweep: the settings of configs/multi30k_search.py, each a row on multi30k.

    transformer-jax sweep --experiment=multi30k_search --rows=tiny --workdir=runs/m30k_search --eval_splits=dev \
        --config.data.data_dir=../shared/data/multi30k
    transformer-jax compare runs/m30k_search/* --experiment=multi30k_search --out=experiments/results/multi30k/search
"""

from transformer_jax.configs import multi30k_search
from transformer_jax.experiments import Experiment, rows_experiment


def get_experiment() -> Experiment:
    """The search (no paper column: the paper has no Multi30k result)."""
    return rows_experiment("multi30k_search", "Multi30k EN→DE recipe search, chosen on the dev split (val 2016)",
                           multi30k_search)
