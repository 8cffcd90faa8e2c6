"""`transformer-jax decode`: translate plain text with a trained (or averaged) checkpoint (§6.1).

    transformer-jax decode --workdir=runs/base newstest2014.en > newstest2014.de      # or --input=FILE, or stdin
    transformer-jax decode --workdir=runs/base --checkpoint=avg5 --input=newstest2014.en --output=out.de
    echo "The house is small." | transformer-jax decode --workdir=runs/demo --config.decode.method=greedy
    transformer-jax decode --workdir=runs/base --checkpoint=avg5 --engine=ctranslate2 --quantization=int8 test.en

The config and the vocabulary come from the run's workdir; decoding settings are the run's ``config.decode``
(beam 4, α 0.6, input length + 50), changed with ``--config.decode.FIELD=VALUE``. The input is one file (given as
--input or as the one argument) or stdin; one output line per input line, in order; empty lines stay empty. The
input, the output path and the checkpoint are checked before decoding starts, and translations are written as
they are made, so a late failure keeps what was done. A progress bar is drawn on stderr when the input is a file.
``--engine=ctranslate2`` translates with the checkpoint exported to CTranslate2 (kept in the run folder and reused
while up to date; launch/engine.py) under the same settings, input and output.
"""

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import TextIO

import jax
from absl import flags
from tqdm import tqdm

from transformer_jax.data.sources import read_lines
from transformer_jax.decode.translate import Translator
from transformer_jax.launch import cluster, engine, logs, overrides
from transformer_jax.launch.flags import ENGINE, WORKDIR
from transformer_jax.launch.overrides import describe_decoding
from transformer_jax.launch.verbs import Verb, refuse

INPUT = flags.DEFINE_string("input", "-", "Source text, one sentence per line (UTF-8); - reads stdin. The file may "
                            "also be given as the command's one argument.")
OUTPUT = flags.DEFINE_string("output", "-", "Where translations go, one line per input line; - writes stdout.")
for _name in ("workdir", "checkpoint", *engine.FLAG_NAMES, *cluster.FLAG_NAMES):
    flags.declare_key_flag(_name)

VERB = Verb("decode", positional="FILE", overrides=overrides.HELP, run_overrides=True,  # FILE: instead of --input
            flag_hints=overrides.flag_hints("decode"))
CHUNK_BATCHES = 16  # translations are written every CHUNK_BATCHES × config.decode.batch_size input lines

logger = logging.getLogger(__name__)


def check_output(path: str) -> None:
    """Raises ValueError unless ``path`` (``-``: stdout) can be written, without creating or changing it."""
    if path == "-":
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"--output={path} is a folder; give a file name.")
    if not os.path.isdir(folder):
        raise ValueError(f"--output={path}: the folder {folder} does not exist.")
    if not os.access(path if os.path.exists(path) else folder, os.W_OK):
        raise ValueError(f"--output={path}: permission denied (not writable).")


@contextlib.contextmanager
def open_output(path: str) -> Iterator[TextIO]:
    """``path`` opened for writing (``-``: stdout), UTF-8, closed afterwards."""
    if path == "-":
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8") as f:
        yield f


def translate_to(translator, texts: list[str], out: TextIO | None, progress: bool) -> None:
    """Translates ``texts`` a chunk at a time with ``translator`` (either engine's) and writes each chunk's lines to
    ``out`` (None: this host only decodes its share) as soon as they are made."""
    chunk = CHUNK_BATCHES * int(translator.config.decode.batch_size)
    rng = getattr(translator, "rng", None)  # the JAX engine's sampling key (CTranslate2 seeds its own generator)
    with tqdm(total=len(texts), desc="decode", unit="line", disable=not progress) as bar:
        for i, start in enumerate(range(0, len(texts), chunk)):
            if rng is not None:
                translator.rng = jax.random.fold_in(rng, i)  # sampling: fresh keys for every chunk
            translations = translator.translate(texts[start:start + chunk])
            if out is not None:
                out.writelines(line + "\n" for line in translations)
                out.flush()
            bar.update(len(translations))


def main(argv: list[str]) -> None:
    logs.setup()
    if argv[1:] and flags.FLAGS["input"].present:
        refuse("decode", f"the input is given twice (--input={INPUT.value} and {argv[1]}); give one.")
    source = argv[1] if argv[1:] else INPUT.value
    config = overrides.run_config("decode")  # the run and the overrides, checked before the input is read
    engine.check("decode")
    try:
        texts = list(read_lines(source))
        check_output(OUTPUT.value)
    except (ValueError, OSError) as e:
        sys.exit(f"transformer-jax decode: {e}")
    if ENGINE.value == "ctranslate2":
        translator, checkpoint = engine.ctranslate2_translator("decode", config)
    else:
        cluster.maybe_initialize()
        run = overrides.restore("decode", config)
        translator = Translator(run.config, run.graphdef, run.params, run.tokenizer, run.mesh)
        checkpoint = run.checkpoint
    logger.info("Decoding %d lines with %s of %s (%s)", len(texts), checkpoint, WORKDIR.value,
                describe_decoding(config))
    tic = time.monotonic()
    lead = jax.process_index() == 0  # every host decodes its share; the first one writes
    try:
        with open_output(OUTPUT.value) if lead else contextlib.nullcontext() as out:
            translate_to(translator, texts, out, progress=lead and source != "-")
    except OSError as e:
        sys.exit(f"transformer-jax decode: {e}")
    seconds = time.monotonic() - tic
    logger.info("Translated %d lines in %.1f s (%.1f lines/s, compilation included)", len(texts), seconds,
                len(texts) / max(seconds, 1e-9))
