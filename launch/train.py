"""`transformer-jax train`: train (or resume) a run, then report dev/test BLEU and sample translations.

    transformer-jax train                                        # CPU demo on the built-in synthetic corpus
    transformer-jax train --config=configs/table3.py:B1 --workdir=runs/B1 --config.train.num_steps=50000

Running it again on the same --workdir resumes from the latest checkpoint. A SIGTERM (preemption, a Slurm time
limit) saves a checkpoint at the next step and exits with status 143.
"""

import json
import os
from collections.abc import Callable, Sequence

import ml_collections
from absl import flags

from launch import cluster, logs, provenance
from launch.flags import CONFIG, EVAL_CHECKPOINT, JSON, WORKDIR
from transformer_jax.decode.restore import restore_run
from transformer_jax.evaluate.evaluation import dev_bleu_hook, evaluate_split
from transformer_jax.train import sharding
from transformer_jax.train.preemption import Preempted
from transformer_jax.train.trainer import build_shared_tokenizer, train

EVAL_SPLITS = flags.DEFINE_list("eval_splits", ["dev", "test"],
                                "Splits translated and scored after training (empty: none).")
NUM_SAMPLES = flags.DEFINE_integer("num_samples", 3, "Sample translations printed after training.")


def run_training(config: ml_collections.ConfigDict, workdir: str, eval_splits: Sequence[str] = ("dev", "test"),
                 checkpoint: str = "latest", on_eval: Callable[[str, dict, str], None] | None = None,
                 command: list[str] | None = None) -> dict:
    """Trains (or resumes) ``config`` in ``workdir``, then scores ``eval_splits`` with ``checkpoint``.

    Each start appends the commit, machine and ``command`` (default: this process's command line) to
    ``<workdir>/provenance.jsonl`` (launch/provenance.py).
    Writes ``eval_<split>.json`` per split (see transformer_jax/evaluate/evaluation.py). ``on_eval(split, result,
    checkpoint)`` is called after each split (``result`` still holds its ``samples``). Returns the summary that
    `transformer-jax train` prints: workdir, step, train_loss, dev_ppl, <split>_bleu, <split>_tokenized_bleu,
    signature.
    """
    provenance.append(workdir, command)
    hook = None
    if config.train.eval_bleu:  # dev BLEU at every evaluation (decodes the dev set: slow on CPU)
        hook = dev_bleu_hook(config, build_shared_tokenizer(config, workdir), sharding.make_mesh(config.train.mesh))
    last = train(config, workdir, eval_hook=hook)
    summary = {"workdir": workdir, "step": last.get("step"), "train_loss": last.get("train_loss"),
               "dev_ppl": last.get("dev_ppl")}
    if eval_splits:
        run = restore_run(workdir, checkpoint)
        for split in eval_splits:
            result = evaluate_split(run, workdir, split)
            summary[f"{split}_bleu"] = result["sacrebleu"]
            summary[f"{split}_tokenized_bleu"] = result["tokenized_bleu"]
            if on_eval is not None:
                on_eval(split, result, run.checkpoint)
        summary["signature"] = result["signature"]
    return summary


def _print_eval(split: str, result: dict, checkpoint: str) -> None:
    print(f"{split}: sacreBLEU {result['sacrebleu']:.2f}  tokenized BLEU {result['tokenized_bleu']:.2f}  "
          f"chrF {result['chrf']:.2f}  ({result['num_sentences']} sentences, {checkpoint})")
    for src, hyp, ref in result["samples"][:NUM_SAMPLES.value]:
        print(f"  SRC {src}\n  OUT {hyp}\n  REF {ref}")


def main(argv: list[str]) -> None:
    del argv
    logs.setup()
    cluster.maybe_initialize()
    config = CONFIG.value
    workdir = WORKDIR.value or os.path.join("runs", config.name.replace("/", "_"))
    try:
        summary = run_training(config, workdir, EVAL_SPLITS.value, EVAL_CHECKPOINT.value,
                               on_eval=None if JSON.value else _print_eval)
    except Preempted as e:  # a SIGTERM (preemption, a Slurm time limit): the checkpoint is saved
        cluster.exit_preempted("train", e)
    print(json.dumps(summary))
