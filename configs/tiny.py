r"""Tiny: configs/demo.py shrunk until a run (train, dev/test BLEU) takes seconds on one CPU core — for tests.

d_model 32, d_ff 64, h 2 (d_k = d_v = 16), 1+1 layers, a 512-piece vocabulary, 2000 synthetic training pairs and
20 steps. Every Table 3 row resolves on it (A4: h = 32 gives d_k = d_v = 1)::

    transformer-jax train --config=configs/tiny.py --workdir=/tmp/tiny
    transformer-jax sweep --experiment=table3 --base=tiny --rows=base,D1 --workdir=/tmp/table3_tiny
"""

import ml_collections

from transformer_jax.configs import demo


def get_config() -> ml_collections.ConfigDict:
    """Returns the tiny test config (every field not set here is the demo's, hence the paper's)."""
    c = demo.get_config()
    c.name = "tiny"
    m = c.model
    m.vocab_size = 512  # the least a byte-fallback BPE (256 byte pieces + characters) fits in
    m.d_model, m.d_ff, m.num_heads, m.d_k, m.d_v = 32, 64, 2, 16, 16
    m.num_encoder_layers = m.num_decoder_layers = 1
    m.max_len = 64
    d = c.data
    d.tokens_per_batch = 1024
    d.max_length = 64
    d.num_length_buckets = 1
    d.synthetic.train_size, d.synthetic.dev_size, d.synthetic.test_size = 2000, 30, 30
    t = c.train
    t.num_steps = 20
    t.warmup_steps = 10
    t.checkpoint_every_steps = 10
    t.eval_every_steps = 10
    t.log_every_steps = 5
    c.decode.batch_size = 16
    return c
