r"""A sweep's rows as named deltas on a base config, rebuilt on the command line as ``FILE:ROW[,base=NAME][,pair=P]``.

configs/table3.py (the paper's Table 3), configs/window.py (restricted self-attention, Table 1 row 4) and
configs/multi30k_search.py (the Multi30k recipe search) each define ``ROWS = {row: function(config) -> None}``
(mutating a copy) and take their ``apply_row`` and ``get_config`` from :func:`row_functions`; the matching
experiments/<name>.py names the sweep for ``transformer-jax sweep`` and ``compare``.
"""

import importlib
from collections.abc import Callable, Mapping

import ml_collections

Config = ml_collections.ConfigDict
Row = Callable[[Config], None]


def load_base(name: str, pair: str | None = None) -> Config:
    """Returns ``configs/<name>.py``'s config (``pair`` passed on to it when given)."""
    try:
        module = importlib.import_module(f"transformer_jax.configs.{name}")
    except ModuleNotFoundError:
        raise ValueError(f"Unknown base config {name!r}; use a module of configs/, e.g. base, demo_table3, multi30k.")
    return module.get_config(pair) if pair else module.get_config()


def apply_row(config: Config, row: str, rows: Mapping[str, Row], tag: str, what: str) -> Config:
    """A copy of ``config`` with ``rows[row]`` applied, named ``<base name>/<row>`` and tagged ``config[tag] = row``.

    ``what`` names the sweep in the error for an unknown row ("Table 3", "window").
    """
    if row not in rows:
        raise ValueError(f"Unknown {what} row {row!r}; valid rows: {', '.join(rows)}.")
    c = ml_collections.ConfigDict(config.to_dict())
    rows[row](c)
    c.name = f"{config.name}/{row}"
    c[tag] = row
    return c


def get_row_config(arg: str | None, rows: Mapping[str, Row], tag: str, what: str, default_base: str,
                   file: str) -> Config:
    """Parses ``ROW[,base=NAME][,pair=ende|enfr]`` (the text after ``file:``) and returns that row's config."""
    if not arg:
        raise ValueError(f"{file} needs a row, e.g. {file}:{next(iter(rows))}; valid rows: {', '.join(rows)}.")
    row, *options = arg.split(",")
    opts = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or key not in ("base", "pair"):
            raise ValueError(f"Bad option {option!r} in {arg!r}; expected base=NAME or pair=ende|enfr.")
        opts[key] = value
    return apply_row(load_base(opts.get("base", default_base), opts.get("pair")), row, rows, tag, what)



def row_functions(rows: Mapping[str, Row], tag: str, what: str, default_base: str,
                  file: str) -> tuple[Callable[[Config, str], Config], Callable[[str | None], Config]]:
    """A rows module's ``apply_row(config, row)`` (a copy of ``config`` with the row applied, named
    ``<base>/<row>``, ``config[tag] = row``) and ``get_config(arg)`` (parses ``ROW[,base=NAME][,pair=P]``; the base
    defaults to ``default_base``); ``what`` names the sweep in errors, ``file`` is the module's configs/ path."""

    def apply(config: Config, row: str) -> Config:
        return apply_row(config, row, rows, tag, what)

    def get_config(arg: str | None = None) -> Config:
        return get_row_config(arg, rows, tag, what, default_base, file)

    return apply, get_config


def set_fields(config: Config, fields: Mapping[str, object] | None) -> Config:
    """Sets dotted fields (``{"train.num_steps": 5}``) in place, as ``--config.train.num_steps=5`` would."""
    for path, value in (fields or {}).items():
        *parents, key = path.split(".")
        node = config
        for part in parents:
            if part not in node:
                raise ValueError(f"Unknown config field {path!r} in an override.")
            node = node[part]
        if key not in node:
            raise ValueError(f"Unknown config field {path!r} in an override.")
        node[key] = value
    return config


def setting(fields: Mapping[str, object]) -> Row:
    """A row that sets dotted fields (``{"model.d_model": 128}``), as ``--config.model.d_model=128`` would."""
    return lambda c: set_fields(c, fields) and None
