r"""Offline parsing demo (§6.3 on the synthetic grammar): a small Transformer parses the built-in corpus' English.

The synthetic grammar (transformer_jax/data/synthetic.py) generates each English sentence with its Penn Treebank
tree; the ``synthetic_parse`` source linearises them as configs/parsing.py does for the WSJ. The model is the
CPU demo's size (d_model 128, 2+2 layers), 1500 steps of ~4K tokens ending in a 500-step linear cooldown; decoding
keeps §6.3's α 0.3 and input length + 300, with beam 4 instead of 21 to keep decoding on a CPU short, under the tree
constraint (every output a tree over the input's words). The whole command takes under 20 minutes on a quiet 2-core
machine (experiments/results/parsing_synthetic/demo/NOTES.md: the settings tried, chosen on dev)::

    transformer-jax train --config=configs/parsing_demo.py --workdir=runs/parsing_demo
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
    m.dropout_rate = m.attention_dropout_rate = 0.0  # each training pair is seen about once: nothing to overfit
    d = c.data
    d.source = "synthetic_parse"
    # 200K pairs, about as many as the run reads: at 40K (WSJ's size) it overfits without dropout
    # (experiments/results/parsing_synthetic/demo/NOTES.md: the settings tried)
    d.synthetic = ml_collections.ConfigDict(dict(seed=0, train_size=200_000, dev_size=500, test_size=1_000))
    d.tokenizer_split_by_script = False  # "(NP" one piece, not "▁(" "NP": about a third fewer target pieces
    d.tokens_per_batch = 4096
    d.max_length = 256
    d.num_length_buckets = 2
    d.tokenizer_sample_size = 100_000
    t = c.train
    t.num_steps = 1500
    t.warmup_steps = 300
    t.learning_rate_scale = 0.5  # the demo's peak, 2.6e-3 at step 300
    t.cooldown_steps = 500  # not the paper's: the rate falls linearly to 0 over the last third (NOTES.md: the gain)
    t.checkpoint_every_steps = 500
    t.eval_every_steps = 500
    t.log_every_steps = 50
    c.decode.beam_size = 4
    c.decode.batch_size = 128
    return c
