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


def load_base(name: str, pair: str | None = None) -> rows.Config:
    """Returns ``configs/<name>.py``'s config (``pair`` passed on to it when given)."""
    return rows.load_base(name, pair)


def apply_row(config: rows.Config, row: str) -> rows.Config:
    """Returns a copy of ``config`` with window row ``row`` applied (name suffixed with the row)."""
    return rows.apply_row(config, row, ROWS, "sweep_row", "window")


def get_config(arg: str | None = None) -> rows.Config:
    """Parses ``ROW[,base=NAME][,pair=ende|enfr]`` and returns that window row (base default: demo_table3)."""
    return rows.get_row_config(arg, ROWS, "sweep_row", "window", "demo_table3", "configs/window.py")
