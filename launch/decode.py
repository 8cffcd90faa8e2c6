"""`transformer-jax decode`: translate plain text with a trained (or averaged) checkpoint (§6.1).

    transformer-jax decode --workdir=runs/base < newstest2014.en > newstest2014.de
    transformer-jax decode --workdir=runs/base --checkpoint=avg5 --input=newstest2014.en --output=out.de
    echo "The house is small." | transformer-jax decode --workdir=runs/demo --method=greedy

The config and the vocabulary come from the run's workdir; decoding settings are the run's ``config.decode``
(beam 4, α 0.6, input length + 50) unless a flag overrides them. One output line per input line, in order;
empty lines stay empty. A progress bar is drawn on stderr when --input is a file.
"""

import logging
import sys
import time

import jax
from absl import flags

from launch import cluster, decode_flags, logs
from launch.decode_flags import describe_decoding, restore_for_decoding
from transformer_jax.decode.translate import Translator

INPUT = flags.DEFINE_string("input", "-", "Source text, one sentence per line (UTF-8); - reads stdin.")
OUTPUT = flags.DEFINE_string("output", "-", "Where translations go, one line per input line; - writes stdout.")
flags.adopt_module_key_flags(decode_flags)  # list --beam_size, --method, ... in `transformer-jax decode --help`

logger = logging.getLogger(__name__)


def read_lines(path: str) -> list[str]:
    """The lines of ``path`` (``-``: stdin) without their line ends; only ``\\n`` (or ``\\r\\n``) ends a line.

    Args:
        path: a file, or ``-`` for standard input.

    Returns:
        One string per line; a final line end does not start another (empty) line.

    Raises:
        OSError: the file cannot be read.
        ValueError: a line is not valid UTF-8 (the message names the line).
    """
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(path, "rb") as f:
            data = f.read()
    data = data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark is not part of the first sentence
    if not data:
        return []
    raw = data.split(b"\n")  # not str.splitlines: it also splits on \x0b, \x1c, U+2028, ... and would shift lines
    if raw[-1] == b"":
        raw.pop()
    lines = []
    for number, line in enumerate(raw, start=1):
        try:
            lines.append(line.removesuffix(b"\r").decode("utf-8"))
        except UnicodeDecodeError as e:
            name = "stdin" if path == "-" else path
            raise ValueError(f"{name}: line {number} is not valid UTF-8 ({e.reason} at byte {e.start}).") from None
    return lines


def write_lines(path: str, lines: list[str]) -> None:
    """Writes ``lines`` to ``path`` (``-``: stdout), each followed by ``\\n``."""
    if path == "-":
        sys.stdout.writelines(line + "\n" for line in lines)
        sys.stdout.flush()
        return
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def main(argv: list[str]) -> None:
    del argv
    logs.setup()
    cluster.maybe_initialize()
    try:
        texts = read_lines(INPUT.value)
    except (ValueError, OSError) as e:
        sys.exit(f"transformer-jax decode: {e}")
    run = restore_for_decoding("decode")
    logger.info("Decoding %d lines with %s of %s (%s)", len(texts), run.checkpoint, decode_flags.WORKDIR.value,
                describe_decoding(run.config))
    tic = time.monotonic()
    translator = Translator(run.config, run.graphdef, run.params, run.tokenizer, run.mesh)
    lead = jax.process_index() == 0  # every host decodes its share; the first one writes
    translations = translator.translate(texts, progress=lead and INPUT.value != "-")
    seconds = time.monotonic() - tic
    logger.info("Translated %d lines in %.1f s (%.1f lines/s, compilation included)", len(texts), seconds,
                len(texts) / max(seconds, 1e-9))
    if lead:
        try:
            write_lines(OUTPUT.value, translations)
        except OSError as e:
            sys.exit(f"transformer-jax decode: {e}")
