"""Named sweeps: a base config plus named deltas ("rows"), each row one run.

An :class:`Experiment` says which rows exist, which base they default to, what the paper reported for each, and
which configs/ file rebuilds one row from the command line — so that every run of a sweep, whether started
in-process or by a cluster launcher, is the same ``transformer-jax train --config=FILE:ROW,base=NAME`` command::

    from transformer_jax.experiments import get_experiment, resolve
    configs = resolve(get_experiment("table3"), "configs/demo.py", "A,B1,C")   # {row: ConfigDict}

Adding a sweep: write ``experiments/<name>.py`` with a ``get_experiment()`` and add its name to EXPERIMENTS.
"""

import dataclasses
import functools
import importlib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

import ml_collections

from transformer_jax import configs
from transformer_jax.configs import rows as config_rows

Config = ml_collections.ConfigDict

EXPERIMENTS = ("table3", "window", "multi30k_search")
CONFIGS_DIR = os.path.dirname(os.path.abspath(configs.__file__))


@dataclasses.dataclass(frozen=True)
class Experiment:
    """A sweep: rows (named deltas) applied to a base config.

    Attributes:
      name: the sweep's name (``--experiment``).
      description: one line for --help and reports.
      default_base: module of configs/ the rows apply to when no base is given.
      rows: row name → function(config) returning a new config with the row applied (input untouched).
      paper: row name → the paper's numbers for that row (e.g. {"dev_ppl": 4.92, "dev_bleu": 25.8, "params_m": 65}).
      config_file: the configs/ file that rebuilds one row on the command line (``FILE:ROW,base=NAME``).
      load_base: name of a configs/ module → its config (the same loader ``config_file`` uses).
      notes: row name → what the row changes, in words (compare's "change" column); may be empty.
    """

    name: str
    description: str
    default_base: str
    rows: Mapping[str, Callable[[Config], Config]]
    paper: Mapping[str, Mapping[str, float | None]]
    config_file: str
    load_base: Callable[[str], Config]
    notes: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def groups(self) -> dict[str, list[str]]:
        """Row groups named by their letter: rows A1..A4 form group "A" (a row of that name takes precedence)."""
        groups: dict[str, list[str]] = {}
        for row in self.rows:
            match = re.fullmatch(r"([A-Za-z]+)\d+", row)
            if match:
                groups.setdefault(match.group(1), []).append(row)
        return groups

    def config_arg(self, row: str, base: str) -> str:
        """What follows ``config_file:`` on the command line to rebuild ``row`` on base ``base``."""
        return f"{row},base={base}"


def rows_experiment(name: str, description: str, module: ModuleType,
                    paper: Mapping[str, Mapping[str, float | None]] | None = None) -> Experiment:
    """The sweep over a configs/ rows module (configs/rows.py): its ROWS, NOTES (if any), apply_row, load_base and
    default base (the base ``get_config`` falls back to)."""
    return Experiment(
        name=name,
        description=description,
        default_base=module.DEFAULT_BASE,
        rows={row: functools.partial(module.apply_row, row=row) for row in module.ROWS},
        paper=paper or {},
        config_file=module.__file__,
        load_base=module.load_base,
        notes=getattr(module, "NOTES", {}),
    )


def get_experiment(name: str) -> Experiment:
    """The experiment ``experiments/<name>.py`` defines; a clear error for an unknown name."""
    if name not in EXPERIMENTS:
        raise ValueError(f"Unknown experiment {name!r}; valid: {', '.join(EXPERIMENTS)}.")
    return importlib.import_module(f"transformer_jax.experiments.{name}").get_experiment()


def select_rows(experiment: Experiment, rows: str | Iterable[str] | None = None) -> list[str]:
    """Expands row names and group letters (``"A,B1,C"``) into rows, in the experiment's order; None → all."""
    if rows is None:
        return list(experiment.rows)
    names = [r.strip() for r in (rows.split(",") if isinstance(rows, str) else rows) if r.strip()]
    if not names:
        return list(experiment.rows)
    groups, chosen = experiment.groups, set()
    for name in names:
        if name in experiment.rows:
            chosen.add(name)
        elif name in groups:
            chosen.update(groups[name])
        else:
            raise ValueError(
                f"Unknown {experiment.name} row {name!r}; valid rows: {', '.join(experiment.rows)}; groups: "
                + ", ".join(f"{g} ({members[0]}..{members[-1]})" for g, members in groups.items()) + ".")
    return [row for row in experiment.rows if row in chosen]


def base_name(experiment: Experiment, base: str | None = None) -> str:
    """The configs/ module name of ``base``: a name (``demo``), a path (``configs/demo.py``) or None (default).

    A base must live in configs/: each row is rebuilt on the command line as ``configs/table3.py:ROW,base=NAME``.
    """
    if not base:
        return experiment.default_base
    if base.endswith(".py") or os.sep in base or "/" in base:
        path = os.path.abspath(base)
        if not os.path.isfile(path):
            raise ValueError(f"Base config {base!r} does not exist.")
        if os.path.realpath(os.path.dirname(path)) != os.path.realpath(CONFIGS_DIR):
            raise ValueError(f"Base config {base!r} is not a file of {CONFIGS_DIR}: rows are rebuilt from the command "
                             "line as configs/table3.py:ROW,base=NAME, so the base must be a module of configs/ "
                             "(copy it there) — or give its name, e.g. --base=demo.")
        base = os.path.splitext(os.path.basename(path))[0]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", base):
        raise ValueError(f"Bad base config name {base!r}; use a module of configs/, e.g. base, demo, multi30k.")
    return base


def apply_overrides(config: Config, overrides: Mapping[str, Any] | None) -> Config:
    """Sets dotted fields (``{"train.num_steps": 5}``) as ``--config.train.num_steps=5`` would."""
    return config_rows.set_fields(config, overrides)


def resolve(experiment: Experiment, base: str | None = None, rows: str | Iterable[str] | None = None,
            overrides: Mapping[str, Any] | None = None) -> dict[str, Config]:
    """Every selected row applied to the base (then ``overrides``): ``{row: resolved config}``."""
    name = base_name(experiment, base)
    base_config = experiment.load_base(name)
    return {row: apply_overrides(experiment.rows[row](base_config), overrides)
            for row in select_rows(experiment, rows)}
