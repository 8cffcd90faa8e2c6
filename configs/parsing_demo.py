r"""Offline parsing demo (§6.3 on the synthetic grammar): a small Transformer parses the built-in corpus' English.

The synthetic grammar (transformer_jax/data/synthetic.py) generates each English sentence with its Penn Treebank
tree; the ``synthetic_parse`` source linearises them as configs/parsing.py does for the WSJ. The model is the
CPU demo's size (d_model 128, 2+2 layers), 1200 steps of ~4K tokens: the whole command takes ~17 minutes on a
quiet 2-core machine (experiments/results/README.md; its targets are ~4× longer than the translation demo's). Decoding keeps §6.3's α 0.3 and input length + 300, with beam 4
instead of 21 to keep decoding on a CPU short (``evaluate --config.decode.beam_size=21`` decodes with the paper's
beam)::

    transformer-jax train --config=configs/parsing_demo.py --workdir=runs/parsing_demo --eval_splits=test
"""

import ml_collections

from transformer_jax.configs import demo, parsing


def get_config() -> ml_collections.ConfigDict:
    """Returns configs/parsing.py's task and decoding on the synthetic trees, at the CPU demo's model size."""
    c = parsing.get_config()
    c.name = "parsing_demo"
    c.model = demo.get_config().model
    m = c.model
    m.vocab_size = 2000  # the grammar's words and the bracket labels
    m.max_len = 512  # positions: inputs ≤ 60 words + 300
    m.share_embeddings = False  # as configs/parsing.py
    d = c.data
    d.source = "synthetic_parse"
    d.synthetic = ml_collections.ConfigDict(dict(seed=0, train_size=40_000, dev_size=500, test_size=1_000))
    d.tokens_per_batch = 4096
    d.max_length = 256
    d.num_length_buckets = 2
    d.tokenizer_sample_size = 100_000
    t = c.train
    t.num_steps = 1200
    t.warmup_steps = 300
    t.learning_rate_scale = 0.5  # the demo's peak, 2.6e-3 at step 300
    t.checkpoint_every_steps = 400
    t.eval_every_steps = 400
    t.log_every_steps = 50
    c.decode.beam_size = 4
    c.decode.batch_size = 128
    return c
