r"""Restricted self-attention (§4, Table 1 row 4) as a sweep: the same base with window r ∈ {1, 2, 4, 8} and full.

Each row sets ``model.attention_window`` (configs/base.py) on its base; "full" is the base itself (r = 0)::

    transformer-jax sweep --experiment=window --base=demo_table3 --workdir=runs/window
    transformer-jax train --config=configs/window.py:r4,base=demo --workdir=runs/demo_r4
    transformer-jax compare runs/window/* --experiment=window

``arg`` is ``ROW[,base=NAME][,pair=ende|enfr]``; NAME is a module of configs/ (default: demo_table3).
"""

from transformer_jax.configs import rows

WINDOWS = (1, 2, 4, 8)
ROWS: dict[str, rows.Row] = {f"r{r}": rows.setting({"model.attention_window": r}) for r in WINDOWS}
ROWS["full"] = rows.setting({"model.attention_window": 0})
NOTES = {**{f"r{r}": f"each query sees keys within {r} positions" for r in WINDOWS},
         "full": "full self-attention (the paper's models)"}


load_base = rows.load_base
DEFAULT_BASE = "demo_table3"
apply_row, get_config = rows.row_functions(ROWS, "sweep_row", "window", DEFAULT_BASE, "configs/window.py")
