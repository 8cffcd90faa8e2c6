"""`transformer-jax export`: a trained (or averaged) checkpoint as a model another engine loads as it is.

    transformer-jax export --workdir=runs/base --checkpoint=avg5 --format=ctranslate2 --out=base_ct2
    transformer-jax export --workdir=runs/base --checkpoint=avg5 --format=ctranslate2 --quantization=int8
    python -c "import ctranslate2; ctranslate2.Translator('base_ct2')"      # loads as it is

CTranslate2 (the optional extra: pip install -e ".[ctranslate2]") gets the paper's post-LN Transformer (or the
pre-LN variant) with √d_model embedding scaling, the run's positions (sinusoidal, learned), shared or separate
embeddings and the run's SentencePiece pieces as its vocabulary (transformer_jax/export/ctranslate2.py);
``--quantization`` stores the weights as int8 or float16. Without ``--out`` the model goes to the run folder
(``<workdir>/export/ctranslate2-CHECKPOINT-QUANTIZATION``), where ``decode --engine=ctranslate2`` and
``evaluate --engine=ctranslate2`` reuse it while it is up to date. A model CTranslate2 cannot compute (d_k ≠ d_v as in
Table 3 rows B, restricted self-attention) is refused in one line. Prints the folder (the last line; with --json,
what it holds).
"""

import json
import sys

from absl import flags

from transformer_jax.export import exported
from transformer_jax.export.ctranslate2 import NotExpressible
from transformer_jax.launch import compare, logs
from transformer_jax.launch.flags import CHECKPOINT, JSON, QUANTIZATION, WORKDIR
from transformer_jax.launch.verbs import Verb, refuse
from transformer_jax.run import checkpoint_spec, folder

FORMAT = flags.DEFINE_enum("format", exported.ENGINE, [exported.ENGINE], "The engine to export for.")
for _name in ("workdir", "checkpoint", "json", "out", "quantization"):
    flags.declare_key_flag(_name)
# --out is compare's flag in absl's one namespace (importing compare defines it): shared, with its meaning here.
VERB = Verb("export", flag_hints={"config": "export reads the run's config.json; the model is fixed by training."},
            flag_help={"out": "The model folder to write (replaced if it holds an earlier export); default: the run "
                              "folder's export/ctranslate2-CHECKPOINT-QUANTIZATION, which decode --engine reuses."})


def main(argv: list[str]) -> None:
    del argv
    logs.setup()
    if not WORKDIR.value:
        refuse("export", "--workdir is required (the folder of a trained run).")
    try:
        checkpoint_spec.parse(CHECKPOINT.value)
    except ValueError:
        refuse("export", f"--checkpoint={CHECKPOINT.value}: {checkpoint_spec.USAGE}.")
    out = compare.OUT.value or folder.export_path(WORKDIR.value, FORMAT.value, CHECKPOINT.value, QUANTIZATION.value)
    try:
        record = exported.export(WORKDIR.value, CHECKPOINT.value, QUANTIZATION.value, out)
    except NotExpressible as e:  # the command line asks for what the format cannot express: status 2
        refuse("export", f"CTranslate2 cannot express this model: {e}")
    except (ValueError, OSError, ImportError) as e:  # no run, a bad checkpoint name, no ctranslate2, a bad --out
        sys.exit(f"transformer-jax export: {e}")
    if JSON.value:
        print(json.dumps({"path": out, **record}))
    else:
        print(f"Exported {CHECKPOINT.value} of {WORKDIR.value} (steps {', '.join(map(str, record['steps']))}) for "
              f"{FORMAT.value}, weights {QUANTIZATION.value}, into:")
        print(out)
