"""`transformer-jax train`: train (or resume) a run, then report dev/test BLEU and sample translations.

    transformer-jax train                                        # CPU demo on the built-in synthetic corpus
    transformer-jax train --config=configs/table3.py:B1 --workdir=runs/B1 --config.train.num_steps=50000

Running it again on the same --workdir resumes from the latest checkpoint.
"""

import json
import os

from absl import flags

from launch import cluster, logs
from launch.flags import CONFIG, JSON, WORKDIR
from transformer_jax.decode.restore import restore_run
from transformer_jax.evaluate.evaluation import evaluate_split
from transformer_jax.train.trainer import train

EVAL_SPLITS = flags.DEFINE_list("eval_splits", ["dev", "test"],
                                "Splits translated and scored after training (empty: none).")
EVAL_CHECKPOINT = flags.DEFINE_string(
    "eval_checkpoint", "latest", "Checkpoint scored after training: latest, a step, or avgN.")
NUM_SAMPLES = flags.DEFINE_integer("num_samples", 3, "Sample translations printed after training.")


def main(argv: list[str]) -> None:
    del argv
    logs.setup()
    cluster.maybe_initialize()
    config = CONFIG.value
    workdir = WORKDIR.value or os.path.join("runs", config.name.replace("/", "_"))
    last = train(config, workdir)
    summary = {"workdir": workdir, "step": last.get("step"), "train_loss": last.get("train_loss"),
               "dev_ppl": last.get("dev_ppl")}
    if EVAL_SPLITS.value:
        run = restore_run(workdir, EVAL_CHECKPOINT.value)
        for split in EVAL_SPLITS.value:
            result = evaluate_split(run, workdir, split)
            samples = result.pop("samples")
            summary[f"{split}_bleu"] = result["sacrebleu"]
            summary[f"{split}_tokenized_bleu"] = result["tokenized_bleu"]
            if not JSON.value:
                print(f"{split}: sacreBLEU {result['sacrebleu']:.2f}  tokenized BLEU {result['tokenized_bleu']:.2f}  "
                      f"chrF {result['chrf']:.2f}  ({result['num_sentences']} sentences, {run.checkpoint})")
                for src, hyp, ref in samples[:NUM_SAMPLES.value]:
                    print(f"  SRC {src}\n  OUT {hyp}\n  REF {ref}")
        summary["signature"] = result["signature"]
    print(json.dumps(summary))
