"""``--engine`` of `decode` and `evaluate`: what translates, under the same ``config.decode`` (§6.1) either way.

``jax`` (the default): the checkpoint is restored and this library's beam search decodes it, on every host of a
multi-host job (transformer_jax/decode/translate.py). ``ctranslate2``: the checkpoint's CTranslate2 export in the run
folder (``<workdir>/export/ctranslate2-CHECKPOINT-QUANTIZATION``, made or remade when missing or stale by
transformer_jax/export/exported.py) decodes on this host (transformer_jax/decode/ctranslate2_engine.py says how its
search is held to ours); ``--quantization`` says how its weights are stored.
"""

import sys

import ml_collections
from absl import flags

from transformer_jax.export.ctranslate2 import NotExpressible
from transformer_jax.launch import cluster
from transformer_jax.launch.flags import CHECKPOINT, ENGINE, QUANTIZATION, WORKDIR
from transformer_jax.launch.verbs import refuse

FLAG_NAMES = ("engine", "quantization")


def check(command: str) -> None:
    """Refuses (status 2) ``--quantization`` without ``--engine=ctranslate2``, and the multi-host flags with it."""
    if ENGINE.value != "ctranslate2":
        if flags.FLAGS["quantization"].present:
            refuse(command, "--quantization is how a CTranslate2 export stores its weights; add --engine=ctranslate2.")
        return
    given = [name for name in cluster.FLAG_NAMES if flags.FLAGS[name].present]
    if given:
        refuse(command, f"--{given[0]}: --engine=ctranslate2 decodes on one host; leave out the multi-host flags.")


def ctranslate2_translator(command: str, config: ml_collections.ConfigDict):
    """(translator, what it decodes with) on the run folder's up-to-date export of ``--checkpoint``; exits with one
    line: status 2 for a model or decoding setting CTranslate2 cannot follow, 1 when the work cannot be done (no
    checkpoint, ctranslate2 not installed)."""
    from transformer_jax.decode import ctranslate2_engine  # (imports ctranslate2 only when it translates)

    try:
        return ctranslate2_engine.for_run(WORKDIR.value, CHECKPOINT.value, QUANTIZATION.value, config)
    except NotExpressible as e:
        refuse(command, f"--engine=ctranslate2: CTranslate2 cannot express this run: {e}")
    except (ValueError, OSError, ImportError) as e:
        sys.exit(f"transformer-jax {command}: {e}")
