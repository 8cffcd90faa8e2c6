r"""Data pipeline throughput (§5.1 batching): tokens/s of tokenize + batch, and the packing fill rate.

    python bench/data_throughput.py --data-dir=../shared/data/multi30k
    python bench/data_throughput.py --sources=multi30k --tokens-per-batch=25000 --max-length=256

For each corpus (Multi30k from --data-dir, the built-in synthetic one) it trains the shared tokenizer once (timed
apart), tokenizes the training split, then draws one epoch of packed training batches. The last line printed is one
JSON object.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from typing import Any

import numpy as np

from transformer_jax.configs import demo, multi30k
from transformer_jax.data import pipeline


def measure(config: Any, workdir: str, row_multiple: int) -> dict[str, Any]:
    """Times tokenizer training, tokenization of the training split and one epoch of batches."""
    t0 = time.perf_counter()
    tokenizer = pipeline.build_tokenizer(config, workdir)
    t1 = time.perf_counter()
    data = pipeline.tokenized_split(config, tokenizer, "train")  # no cache: timed
    t2 = time.perf_counter()
    d = config.data
    batches = pipeline.TrainBatches(
        data,
        tokens_per_batch=d.tokens_per_batch,
        max_length=d.max_length,
        num_length_buckets=d.num_length_buckets,
        seed=config.seed,
        row_multiple=row_multiple,
        pack=d.pack,
        window=d.shuffle_buffer,
    )
    t3 = time.perf_counter()
    real_tokens = 0
    while batches.get_state()["epoch"] == 0:
        batch = next(batches)
        real_tokens += int((batch["inputs_segmentation"] > 0).sum() + (batch["targets_segmentation"] > 0).sum())
    t4 = time.perf_counter()
    all_tokens = len(data.src) + len(data.tgt)
    return {
        "pairs": len(data),
        "vocab_size": tokenizer.vocab_size,
        "tokens": all_tokens,
        "tokenizer_train_s": round(t1 - t0, 3),
        "tokenize_s": round(t2 - t1, 3),
        "batch_s": round(t4 - t3, 3),
        "tokenize_tokens_per_s": round(all_tokens / (t2 - t1)),
        "batch_tokens_per_s": round(real_tokens / (t4 - t3)),
        "pipeline_tokens_per_s": round(all_tokens / (t4 - t1)),  # tokenize + batch, per training token
        "batches_per_epoch": batches.stats["batches"],
        "fill_rate": round(batches.stats["fill_rate"], 4),
        "src_tokens_per_batch": round(batches.stats["src_tokens_per_batch"], 1),
        "tgt_tokens_per_batch": round(batches.stats["tgt_tokens_per_batch"], 1),
        "shapes": batches.shapes,
        "dropped_too_long": batches.num_dropped_too_long,
        "mean_pair_length": float(np.maximum(data.src_lengths, data.tgt_lengths).mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default="../shared/data/multi30k", help="Multi30k raw files")
    parser.add_argument("--sources", default="multi30k,synthetic", help="comma-separated: multi30k, synthetic")
    parser.add_argument("--tokens-per-batch", type=int, default=0, help="0 = the config's")
    parser.add_argument("--max-length", type=int, default=0, help="0 = the config's")
    parser.add_argument("--row-multiple", type=int, default=1)
    parser.add_argument("--no-pack", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    results: dict[str, Any] = {}
    for name in args.sources.split(","):
        config = {"multi30k": multi30k, "synthetic": demo}[name].get_config()
        if name == "multi30k":
            config.data.data_dir = args.data_dir
        if args.tokens_per_batch:
            config.data.tokens_per_batch = args.tokens_per_batch
        if args.max_length:
            config.data.max_length = args.max_length
        config.data.pack = not args.no_pack
        with tempfile.TemporaryDirectory() as workdir:
            try:
                results[name] = {
                    "tokens_per_batch": config.data.tokens_per_batch,
                    "max_length": config.data.max_length,
                    **measure(config, workdir, args.row_multiple),
                }
            except (ImportError, OSError, ValueError) as e:  # report it, go on with the other corpus
                results[name] = {"error": f"{type(e).__name__}: {e}"}
        print(f"{name}: {results[name]}", flush=True)
    print(json.dumps({"benchmark": "data_throughput", "pack": not args.no_pack, "results": results}))


if __name__ == "__main__":
    main()
