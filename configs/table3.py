r"""Table 3 of the paper: every row as a delta on a base config.

Each row is defined *relative to its base* so that on the paper's base (configs/base.py) it gives exactly the
paper's values, and on a CPU-sized base (configs/demo.py, configs/multi30k.py) the same ablation at small
scale: A rows change h keeping h·d_k = h·d_v = d_model; B1/B2 quarter/halve d_k (d_v unchanged); C1–C3 scale N
by 2/6, 4/6, 8/6; C4/C5 halve/double d_model with d_k, d_v (h and d_ff fixed); C6/C7 halve/double d_ff;
D1/D2 set P_drop to 0 / twice the base; D3/D4 set ε_ls to 0 / twice the base; E uses learned positions;
big doubles d_model and d_ff, doubles h (d_k = d_v unchanged), triples P_drop and the number of steps.

    transformer-jax train --config=configs/table3.py:B1 --workdir=runs/B1
    transformer-jax train --config=configs/table3.py:C4,base=demo_table3 --workdir=runs/demo_C4
    transformer-jax describe --config=configs/table3.py:C5 --json

``arg`` is ``ROW[,base=NAME][,pair=ende|enfr]``; NAME is a module of configs/ (base, demo, demo_table3, multi30k).
"""

from collections.abc import Callable

import ml_collections

from transformer_jax.configs import rows

Config = ml_collections.ConfigDict


def _heads(h: int) -> Callable[[Config], None]:
    def apply(c: Config) -> None:
        m = c.model
        if m.d_model % h:
            raise ValueError(f"row with h={h} needs d_model divisible by {h}, got d_model={m.d_model}")
        m.num_heads, m.d_k, m.d_v = h, m.d_model // h, m.d_model // h

    return apply


def _layers(numerator: int) -> Callable[[Config], None]:
    def apply(c: Config) -> None:
        for side in ("num_encoder_layers", "num_decoder_layers"):
            c.model[side] = max(1, round(c.model[side] * numerator / 6))

    return apply


def _set(section: str, key: str, fn: Callable) -> Callable[[Config], None]:
    def apply(c: Config) -> None:
        c[section][key] = fn(c[section][key])

    return apply


def _width(factor: float) -> Callable[[Config], None]:
    def apply(c: Config) -> None:
        m = c.model
        m.d_model, m.d_k, m.d_v = int(m.d_model * factor), int(m.d_k * factor), int(m.d_v * factor)

    return apply


def _big(c: Config) -> None:
    m = c.model
    m.d_model, m.d_ff, m.num_heads = 2 * m.d_model, 2 * m.d_ff, 2 * m.num_heads
    c.train.num_steps = 3 * c.train.num_steps
    # Table 2 note: big EN-FR used P_drop = 0.1, not 0.3.
    m.dropout_rate = m.dropout_rate if c.data.target_lang == "fr" else round(3 * m.dropout_rate, 6)
    c.decode.average_last = 20  # §6.1: big averages the last 20 checkpoints.
    # §5.2: big's steps took 1.0 s against base's 0.4 s, so its 10-minute checkpoints are 2.5× fewer steps apart
    # (600 on base: the last 20 span steps 288,600–300,000).
    c.train.checkpoint_every_steps = round(c.train.checkpoint_every_steps * 0.4)


def _learned_positions(c: Config) -> None:
    c.model.positional = "learned"


ROWS: dict[str, Callable[[Config], None]] = {
    "base": lambda c: None,
    "A1": _heads(1),
    "A2": _heads(4),
    "A3": _heads(16),
    "A4": _heads(32),
    "B1": _set("model", "d_k", lambda v: v // 4),
    "B2": _set("model", "d_k", lambda v: v // 2),
    "C1": _layers(2),
    "C2": _layers(4),
    "C3": _layers(8),
    "C4": _width(0.5),
    "C5": _width(2.0),
    "C6": _set("model", "d_ff", lambda v: v // 2),
    "C7": _set("model", "d_ff", lambda v: v * 2),
    "D1": _set("model", "dropout_rate", lambda v: 0.0),
    "D2": _set("model", "dropout_rate", lambda v: round(2 * v, 6)),
    "D3": _set("train", "label_smoothing", lambda v: 0.0),
    "D4": _set("train", "label_smoothing", lambda v: round(2 * v, 6)),
    "E": _learned_positions,
    "big": _big,
}

# The paper's Table 3 (EN-DE newstest2013, no averaging): dev PPL, dev BLEU, params ×10^6 (None = not given).
PAPER = {
    "base": (4.92, 25.8, 65), "A1": (5.29, 24.9, None), "A2": (5.00, 25.5, None), "A3": (4.91, 25.8, None),
    "A4": (5.01, 25.4, None), "B1": (5.16, 25.1, 58), "B2": (5.01, 25.4, 60), "C1": (6.11, 23.7, 36),
    "C2": (5.19, 25.3, 50), "C3": (4.88, 25.5, 80), "C4": (5.75, 24.5, 28), "C5": (4.66, 26.0, 168),
    "C6": (5.12, 25.4, 53), "C7": (4.75, 26.2, 90), "D1": (5.77, 24.6, None), "D2": (4.95, 25.5, None),
    "D3": (4.67, 25.3, None), "D4": (5.47, 25.7, None), "E": (4.92, 25.7, None), "big": (4.33, 26.4, 213),
}


load_base = rows.load_base
DEFAULT_BASE = "base"
apply_row, get_config = rows.row_functions(ROWS, "table3_row", "Table 3", DEFAULT_BASE, "configs/table3.py")
