r"""Transformer big (Table 3, last row; Table 2): base with twice the width, 16 heads, P_drop 0.3, 300K steps.

    transformer-jax train --config=configs/big.py --workdir=runs/big_ende
    transformer-jax train --config=configs/big.py:enfr --workdir=runs/big_enfr   # P_drop 0.1 (Table 2 note)
"""

import ml_collections

from transformer_jax.configs import table3


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    """Returns Transformer big for ``arg`` "ende" (default) or "enfr"."""
    return table3.get_config(f"big,pair={arg or 'ende'}")
