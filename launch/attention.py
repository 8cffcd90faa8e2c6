"""`transformer-jax attention`: draw the attention weights of a trained run for one sentence (§3.2, Figures 3–5).

    transformer-jax attention --workdir=runs/demo --input="The man says that the woman has seen the dog." --out=att
    transformer-jax attention --workdir=runs/base --checkpoint=avg5 --input="..." --target="..." --out=att
    transformer-jax attention --workdir=runs/base --input="..." --layers=5,6 --heads=1-4 --layer=5 --head=5 --out=att
    transformer-jax attention --workdir=runs/demo --input="..." --lines=cross --out=att   # lines of the last layer
    transformer-jax attention --workdir=runs/demo --split=dev --index=7 --out=att  # the dev split's 7th sentence

The sentence is --input, or sentence N (from 1: line N of the split's source file and of ``translations_<split>.txt``)
of the run's dev or test split with --split and --index=N, read through the run's data source as `evaluate` reads it
(the synthetic corpus's sentences live in no file of the run folder).

Writes into --out: ``encoder.png``, ``decoder.png`` and ``cross.png`` (heat maps of encoder self-attention, decoder
masked self-attention and encoder-decoder attention: one panel per head, one row per layer, word pieces on the
axes), ``lines.png`` (the paper's Figure 3 view of one layer: a line from each query piece to each key piece with
opacity ∝ weight, all heads in different colours or one head), ``weights.npz`` (the raw weights, float32
[layers, heads, queries, keys] per kind, with the source and target pieces) and ``attention.json`` (the run, the
checkpoint, the sentence, the target and ``target_from``: ``given``, or the decoding method, ``beam``; with --split,
the split, the index and the split's reference translation).

The weights come from the model's own attention code (`Transformer.attention_weights`: one teacher-forced pass,
dropout off). Without --target the target is the run's own translation by ``config.decode`` (beam 4, α 0.6;
``--config.decode.FIELD=VALUE`` changes it). Layers and heads are numbered from 1, as in the paper's figures.
Decoder and encoder-decoder rows are labelled with the decoder's input pieces (``<s>``, then the target shifted
right; the row of ``<s>`` is the query that predicts the first target piece), and on the right of the grids with
the piece each row predicts.
"""

import json
import os
import re
import sys

from absl import flags

from transformer_jax.data.sources import DataError, get_source
from transformer_jax.evaluate import attention_maps
from transformer_jax.launch import compare, decode, logs, overrides  # noqa: F401 (compare, decode: see flag_help)
from transformer_jax.launch.cli import USAGE_ERROR
from transformer_jax.launch.evaluate import SPLIT
from transformer_jax.launch.flags import TARGET, WORKDIR
from transformer_jax.launch.overrides import describe_decoding
from transformer_jax.launch.verbs import Verb

LAYERS = flags.DEFINE_string("layers", "all", "Layers drawn in the heat-map grids, from 1: e.g. 1,2 or 5-6 or all.")
HEADS = flags.DEFINE_string("heads", "all", "Heads drawn in the heat-map grids, from 1: e.g. 1,3 or 1-4 or all.")
LINES = flags.DEFINE_enum("lines", "encoder", attention_maps.KINDS,
                          "The attention drawn in lines.png: encoder self-attention (Figures 3-5), decoder "
                          "self-attention or cross (encoder-decoder) attention.")
LAYER = flags.DEFINE_integer("layer", None, "Layer of lines.png, from 1 (default: the last layer of --lines).")
HEAD = flags.DEFINE_integer("head", None, "Head of lines.png, from 1 (default: all heads, one colour each).")
INDEX = flags.DEFINE_integer("index", None, "With --split: draw sentence N of the run's dev or test split, from 1 (line "
                             "N of the split's source file and of translations_<split>.txt); instead of --input.",
                             lower_bound=1)
flags.declare_key_flag("split")  # evaluate's --split (dev or test), here with --index
for _name in ("workdir", "checkpoint", "input", "out", "target"):
    flags.declare_key_flag(_name)

# --input (decode's, a file there), --out (compare's) and --target (compile's and describe's: what to compile for)
# are flags of other commands in absl's one namespace: this command shares them (importing compare and decode
# defines them) and says here what they mean for it.
VERB = Verb(
    "attention",
    overrides=overrides.HELP,
    run_overrides=True,
    flag_hints={**overrides.flag_hints("attention"), "output": "use --out=DIR (a folder).",
                "sentence": "use --input=\"...\"."},
    flag_help={"input": "The source sentence, e.g. --input=\"The man has seen the dog.\" (or --split with --index).",
               "split": "With --index: draw the source sentence from the run's dev or test split.",
               "target": "The target sentence to force (teacher forcing); default: the run's own translation of "
                         "--input by config.decode (beam search).",
               "out": "Folder for encoder.png, decoder.png, cross.png, lines.png, weights.npz, attention.json "
                      "(required; created if missing)."})


def fail(message: str) -> None:
    """One line on stderr and exit status 2 (a wrong flag), as the other commands do."""
    print(f"transformer-jax attention: {message}", file=sys.stderr)
    sys.exit(USAGE_ERROR)


def count(n: int, word: str) -> str:
    """``1 layer``, ``6 layers``."""
    return f"{n} {word}{'s' * (n != 1)}"


def numbers(flag: str, spec: str, count: int, what: str) -> list[int]:
    """``all``, ``1,3`` or ``2-4`` as sorted numbers from 1 to ``count``; exits with one line otherwise."""
    if spec.strip().lower() in ("all", ""):
        return list(range(1, count + 1))
    chosen: set[int] = set()
    for part in spec.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            fail(f"--{flag}={spec}: use numbers from 1, e.g. 1,2 or 1-{count} or all.")
        low, high = int(match[1]), int(match[2] or match[1])
        if not 1 <= low <= high <= count:
            fail(f"--{flag}={spec}: out of range; the run has {what}, valid: 1-{count}.")
        chosen.update(range(low, high + 1))
    return sorted(chosen)


def check_out(path: str) -> None:
    """Exits with one line unless ``path`` is (or can be made as) a writable folder."""
    if os.path.exists(path) and not os.path.isdir(path):
        fail(f"--out={path} is a file; give a folder.")
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(os.path.abspath(existing))
    if not os.access(existing, os.W_OK):
        fail(f"--out={path}: permission denied (not writable).")


def check_sentence_flags() -> None:
    """Exits with one line unless the sentence is given once: --input, or --split with --index."""
    given, from_split = flags.FLAGS["input"].present, SPLIT.value is not None or INDEX.value is not None
    if given and from_split:
        fail("the sentence is given twice: --input=\"...\" or --split=dev --index=N, not both.")
    if not given and not from_split:
        fail("--input is required: the source sentence, e.g. --input=\"The man has seen the dog.\" (or "
             "--split=dev --index=N: sentence N of the run's dev split).")
    if from_split and (SPLIT.value is None or INDEX.value is None):
        fail("--split and --index go together: --split=dev --index=N draws sentence N of the run's dev split.")
    if given and not (flags.FLAGS["input"].value or "").strip():
        fail("--input is empty; give a sentence.")


def split_sentence(config, split: str, index: int) -> tuple[str, str]:
    """(source, reference) of sentence ``index`` (from 1) of the run's ``split``, read through its data source as
    `evaluate` reads it; exits with one line when ``index`` is out of range (2) or the split cannot be read (1)."""
    try:
        pairs = get_source(config.data).load(split)
    except (DataError, OSError) as e:
        field = f" (config.data.{split}_files of the run's config.json)" if config.data.source == "text" else ""
        sys.exit(f"transformer-jax attention: the {split} split{field}: {e}")
    if index > len(pairs):
        fail(f"--index={index}: out of range; the {split} split has {len(pairs)} sentences, valid: 1-{len(pairs)}.")
    return pairs[index - 1]


def main(argv: list[str]) -> None:
    logs.setup()
    check_sentence_flags()
    sentence, target = flags.FLAGS["input"].value or "", TARGET.value
    if target is not None and not target.strip():
        fail("--target is empty; give a sentence, or leave --target out to use the run's own translation.")
    if not flags.FLAGS["out"].value:
        fail("--out is required: the folder for the figures and weights, e.g. --out=attention.")
    out = flags.FLAGS["out"].value
    check_out(out)
    config = overrides.run_config("attention")  # the run and the overrides, before any parameter is read
    reference = None
    if SPLIT.value is not None:
        sentence, reference = split_sentence(config, SPLIT.value, INDEX.value)
    m = config.model
    depth = min(m.num_encoder_layers, m.num_decoder_layers)
    layers_what = (count(depth, "layer") if m.num_encoder_layers == m.num_decoder_layers
                   else f"{m.num_encoder_layers} encoder and {m.num_decoder_layers} decoder layers")
    layers = numbers("layers", LAYERS.value, depth, layers_what)
    heads = numbers("heads", HEADS.value, m.num_heads, count(m.num_heads, "head"))
    lines_depth = m.num_encoder_layers if LINES.value == "encoder" else m.num_decoder_layers
    layer = lines_depth if LAYER.value is None else LAYER.value
    if not 1 <= layer <= lines_depth:
        fail(f"--layer={layer}: out of range; the {LINES.value} has {count(lines_depth, 'layer')}, valid: 1-{lines_depth}.")
    if HEAD.value is not None and not 1 <= HEAD.value <= m.num_heads:
        fail(f"--head={HEAD.value}: out of range; the run has {count(m.num_heads, 'head')}, valid: 1-{m.num_heads}.")
    lines_heads = list(range(1, m.num_heads + 1)) if HEAD.value is None else [HEAD.value]

    run = overrides.restore("attention", config)
    given = f"sentence {INDEX.value} of the {SPLIT.value} split" if reference is not None else "--input"
    for what, text in ((given, sentence), ("--target", target)):
        length = len(attention_maps.encode(run.tokenizer, text)) if text is not None else 0
        if length > m.max_len:
            fail(f"{what} is {length} pieces long; the model's positions (config.model.max_len) cover {m.max_len}.")
    att = attention_maps.sentence_attention(run.config, run.graphdef, run.params, run.tokenizer, sentence, target)
    files = attention_maps.write_all(att, out, layers, heads, LINES.value, layer, lines_heads)
    record = {
        "workdir": os.path.abspath(WORKDIR.value), "checkpoint": run.checkpoint, "steps": list(run.steps),
        "sentence": sentence, **({"split": SPLIT.value, "index": INDEX.value, "reference": reference}
                                 if reference is not None else {}),
        "target": target if target is not None else run.tokenizer.decode(att.target_ids),
        "target_from": "given" if target is not None else run.config.decode.method,
        "decoding": None if target is not None else describe_decoding(run.config),
        "source_pieces": att.source_pieces, "target_pieces": att.target_pieces,
        "layers": layers, "heads": heads, "lines": {"kind": LINES.value, "layer": layer, "heads": lines_heads},
    }
    files["json"] = os.path.join(out, "attention.json")
    with open(files["json"], "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, ensure_ascii=False)
    if reference is not None:
        print(f"Sentence {INDEX.value} of the {SPLIT.value} split: {sentence}")
        print(f"Reference: {reference}")
    print(f"Target ({record['target_from']}): {record['target']}")
    print(f"Wrote to {os.path.abspath(out)}:")
    for path in files.values():
        print(f"  {path}")
