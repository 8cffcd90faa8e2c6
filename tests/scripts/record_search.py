"""Runs one `transformer-jax` command line while recording what the search that decodes actually receives.

    python tests/scripts/record_search.py RECORD.json decode --workdir=W --config.decode.beam_size=2 ...

Used by tests/test_decode_wiring.py. It wraps ``beam_search`` / ``greedy_search`` / ``sample`` where
decode/translate.py calls them (recording their keyword arguments when the decoder is traced) and the jitted decode
function that Translator builds (recording, for every batch, each row's number of source tokens and of output
tokens, EOS included), and counts how many times the run's config.json is opened; then it runs the CLI exactly as
the console script does. RECORD.json gets ``{"searches": [{"search": name, **kwargs, "num_best_returned": n}],
"batches": [{"source": [...], "output": [...], "source_length": S}], "config_reads": n}``, written even when the
command exits with an error.
"""

import builtins
import io
import json
import os
import sys


def _plain(value):
    """A JSON value for a static search argument (tracers, callables and arrays are left out)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return None


def count_config_reads(record: dict) -> None:
    """Counts every opening of a file named config.json (the run folder's resolved config) in ``record``."""
    plain_open = builtins.open

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.path.basename(os.fspath(file)) == "config.json":
            record["config_reads"] += 1
        return plain_open(file, *args, **kwargs)

    builtins.open = io.open = counting_open


def install(record: dict) -> None:
    import numpy as np

    from transformer_jax.decode import translate

    def recording(name: str, search):
        def wrapper(*args, **kwargs):
            entry = {"search": name, **{k: _plain(v) for k, v in kwargs.items() if _plain(v) is not None}}
            record["searches"].append(entry)
            out = search(*args, **kwargs)
            if name == "beam_search":
                entry["num_best_returned"] = int(out.sequences.shape[1])  # [B, num_best, T]
            return out
        return wrapper

    for name in ("beam_search", "greedy_search", "sample"):
        setattr(translate, name, recording(name, getattr(translate, name)))

    make_decode_fn = translate.make_decode_fn

    def recording_make_decode_fn(*args, **kwargs):
        decode = make_decode_fn(*args, **kwargs)

        def run(params, inputs, rng):
            ids = decode(params, inputs, rng)
            src, out = np.asarray(inputs), np.asarray(ids)
            record["batches"].append({"source": (src != 0).sum(-1).tolist(), "output": (out != 0).sum(-1).tolist(),
                                      "source_length": int(src.shape[1])})
            return ids
        return run

    translate.make_decode_fn = recording_make_decode_fn


def main() -> None:
    path, args = sys.argv[1], sys.argv[2:]
    sys.argv = ["transformer-jax", *args]
    record: dict = {"searches": [], "batches": [], "config_reads": 0}
    install(record)
    count_config_reads(record)
    from transformer_jax.launch.cli import run

    try:
        run(sys.argv)
    finally:
        with open(path, "w") as f:
            json.dump(record, f)


if __name__ == "__main__":
    main()
