"""The data-source registry: ``config.data.source`` names one entry of :data:`SOURCES` (§5.1, §6.3).

* ``wmt14_ende`` / ``wmt14_enfr`` — WMT 2014 from tensorflow-datasets, the paper's data (§5.1);
* ``multi30k_ende`` — Multi30k task 1, downloaded or from ``config.data.data_dir``;
* ``text`` — the user's aligned files; ``synthetic`` — the built-in offline EN↔DE corpus
  (all in :mod:`transformer_jax.data.translation`);
* ``ptb`` / ``trees`` / ``synthetic_parse`` — constituency parsing (§6.3): sentences and their linearised trees,
  :mod:`transformer_jax.data.ptb`.

A new data set is a :class:`~transformer_jax.data.corpus.Source` subclass in its own module, added here. This module
sits above the source modules, which import only the shared :mod:`~transformer_jax.data.corpus` and
:mod:`~transformer_jax.data.files` (no source module imports another or this one). It also re-exports the names
callers of the data sources use: :class:`DataError`, :class:`Source`, :func:`read_lines`.
"""

from __future__ import annotations

from typing import Any

from transformer_jax.data.corpus import SPLITS, DataError, Pair, Source, config_value
from transformer_jax.data.files import read_lines, read_parallel
from transformer_jax.data.ptb import PtbSource, SyntheticParseSource, TreesSource
from transformer_jax.data.translation import (
    Multi30kSource,
    SyntheticSource,
    TextSource,
    Wmt14EnDeSource,
    Wmt14EnFrSource,
)

__all__ = ["SOURCES", "SPLITS", "DataError", "Pair", "Source", "get_source", "read_lines", "read_parallel"]

SOURCES: dict[str, type[Source]] = {
    cls.name: cls for cls in (Wmt14EnDeSource, Wmt14EnFrSource, Multi30kSource, TextSource, SyntheticSource,
                              PtbSource, TreesSource, SyntheticParseSource)
}


def get_source(data_config: Any) -> Source:
    """Returns the source named by ``data_config.source`` (a key of :data:`SOURCES`).

    Raises:
        DataError: the name is unknown (the message lists the known ones) or the languages do not fit it.
    """
    name = str(config_value(data_config, "source", ""))
    if name not in SOURCES:
        raise DataError(f"Unknown data source {name!r}; known sources: {', '.join(sorted(SOURCES))}.")
    return SOURCES[name](data_config)
