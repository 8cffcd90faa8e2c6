"""What every data source is: aligned (input, output) pairs of the train / dev / test splits (§5.1, §6.3).

A translation source yields (source sentence, target sentence) pairs, a parsing source (sentence, linearised tree)
pairs; both are a :class:`Source`, configured by ``config.data``. Bad input raises one :class:`DataError` with a
message that names the file and line. Empty lines are skipped (and counted in :attr:`Source.num_skipped_empty`) in
training data only: dev/test are never filtered (and outputs are put back in the split's order), so an empty source
line is still translated and outputs line up with the references.

This module is below every source module (:mod:`~transformer_jax.data.translation`,
:mod:`~transformer_jax.data.ptb`) and the registry above them (:mod:`~transformer_jax.data.sources`), so that no
source module imports another.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any, ClassVar

logger = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
Pair = tuple[str, str]


class DataError(ValueError):
    """Bad input data or data configuration; the message says what and where."""


def config_value(config: Any, field: str, default: Any = None) -> Any:
    """``config.<field>``, or ``default`` when the field is absent or None (ml_collections or any object)."""
    value = getattr(config, field, default)
    return default if value is None else value


def synthetic_kwargs(data_config: Any) -> dict[str, Any]:
    """``config.data.synthetic`` as keyword arguments of the synthetic grammar's split generators."""
    kwargs = config_value(data_config, "synthetic", {})
    return dict(kwargs.to_dict() if hasattr(kwargs, "to_dict") else kwargs)


class Source:
    """Base class: aligned sentence pairs of one translation task.

    Subclasses implement :meth:`_raw_pairs`; callers use :meth:`pairs` (a stream) or :meth:`load` (a list).

    Attributes:
        num_skipped_empty: per split, training pairs skipped because one side was empty (after the stream ended).
    """

    name: ClassVar[str] = ""
    languages: ClassVar[tuple[str, ...]] = ()  # languages the source has; () = any (user files)

    def __init__(self, data_config: Any):
        self.config = data_config
        self.source_lang = str(config_value(data_config, "source_lang", "en"))
        self.target_lang = str(config_value(data_config, "target_lang", "de"))
        if self.languages and (
            {self.source_lang, self.target_lang} - set(self.languages) or self.source_lang == self.target_lang
        ):
            raise DataError(
                f"Source {self.name!r} translates between {' and '.join(self.languages)}; got "
                f"source_lang={self.source_lang!r}, target_lang={self.target_lang!r}."
            )
        self.num_skipped_empty: dict[str, int] = {}

    def _raw_pairs(self, split: str) -> Iterator[Pair]:
        raise NotImplementedError

    def cache_key(self, split: str) -> str:
        """A string that changes whenever the pairs of ``split`` may change (for caching tokenized data)."""
        fields = ("source", "source_lang", "target_lang", "data_dir")
        return json.dumps({"split": split, **{f: str(config_value(self.config, f, "")) for f in fields}},
                          sort_keys=True)

    def pairs(self, split: str) -> Iterator[Pair]:
        """Yields the ``(src, tgt)`` pairs of ``split`` ("train" | "dev" | "test"), whitespace-stripped.

        Training pairs with an empty side are skipped and counted; dev/test pairs are all kept, in order.
        """
        if split not in SPLITS:
            raise DataError(f"Unknown split {split!r}; valid: {', '.join(SPLITS)}.")
        skipped = 0
        for src, tgt in self._raw_pairs(split):
            src, tgt = src.strip(), tgt.strip()
            if split == "train" and (not src or not tgt):
                skipped += 1
                continue
            yield src, tgt
        self.num_skipped_empty[split] = skipped
        if skipped:
            logger.warning("%s/%s: skipped %d training pairs with an empty side.", self.name, split, skipped)

    def load(self, split: str) -> list[Pair]:
        """Returns all pairs of ``split`` as a list (see :meth:`pairs`)."""
        return list(self.pairs(split))
