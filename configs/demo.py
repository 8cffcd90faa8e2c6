r"""CPU demo: a small Transformer on the built-in synthetic EN→DE corpus (the offline default).

It is the paper's recipe (post-LN, shared embeddings, sinusoids, Adam 0.9/0.98/1e-9, inverse-sqrt warmup, label
smoothing 0.1, beam 4 with α 0.6) at a size that trains on a 2-core machine in under 10 minutes::

    transformer-jax train                                  # this config, workdir runs/demo
    transformer-jax train --config.model.positional=none   # order-blind ablation: far lower BLEU
    transformer-jax sweep --experiment=table3 --base=demo_table3 --workdir=runs/table3_demo  # 3+3, 400 steps
"""

import ml_collections

from transformer_jax.configs import base


def get_config() -> ml_collections.ConfigDict:
    """Returns the CPU demo config (every field not set here is the paper's, from configs/base.py)."""
    c = base.get_config()
    c.name = "demo"
    m = c.model
    m.vocab_size = 3000  # ~word-level on this corpus: shorter sequences than a smaller BPE
    m.d_model, m.d_ff, m.num_heads, m.d_k, m.d_v = 128, 512, 4, 32, 32
    m.num_encoder_layers = m.num_decoder_layers = 2  # 2+2 learns this corpus faster per second than 3+3
    m.max_len = 128  # positions for decoding: source length + 50
    d = c.data
    d.source = "synthetic"
    d.tokens_per_batch = 4096
    d.max_length = 64  # one row length, one compiled shape; drops ~0.1% of the training pairs (> 64 pieces)
    d.num_length_buckets = 1
    d.tokenizer_sample_size = 200_000
    t = c.train
    t.num_steps = 1000
    t.warmup_steps = 300  # scaled with the smaller batch and shorter run.
    t.learning_rate_scale = 0.5  # peak 2.6e-3 at step 300; larger peaks made the 3+3 post-LN model unstable.
    t.checkpoint_every_steps = 200  # 5 checkpoints: `average --last=5` / `--checkpoint=avg5` work as in §6.1.
    t.checkpoint_every_minutes = 10.0
    t.eval_every_steps = 500
    t.log_every_steps = 50
    c.decode.batch_size = 256
    return c
