r"""Multi30k task 1 EN→DE (29K training pairs): a real-text base that trains on one CPU or a small GPU.

    transformer-jax train --config=configs/multi30k.py --config.data.data_dir=../shared/data/multi30k \
        --workdir=runs/multi30k
    transformer-jax sweep --experiment=table3 --base=configs/multi30k.py --rows=base,A1,C4,D1,E ...
"""

import ml_collections

from transformer_jax.configs import base


def get_config() -> ml_collections.ConfigDict:
    """Returns the Multi30k base (the paper's recipe at 256 wide, 3+3 layers, an 8000 shared BPE)."""
    c = base.get_config()
    c.name = "multi30k"
    m = c.model
    m.vocab_size = 8000
    m.d_model, m.d_ff, m.num_heads, m.d_k, m.d_v = 256, 1024, 4, 64, 64
    m.num_encoder_layers = m.num_decoder_layers = 3
    m.max_len = 256
    m.dropout_rate = 0.2  # 29K pairs over-fit quickly: more dropout than the paper's 0.1 (0.3 learns too slowly
    # for a ~20-epoch CPU budget).
    d = c.data
    d.source = "multi30k_ende"
    d.tokens_per_batch = 2048  # ~1.8K target tokens a step: ~230 updates an epoch (small data likes small batches)
    d.max_length = 128
    d.tokenizer_sample_size = 100_000
    t = c.train
    t.num_steps = 4500  # ~20 epochs: about an hour on a 2-core CPU
    t.warmup_steps = 800
    t.learning_rate_scale = 0.6  # peak 1.3e-3 at step 800, 5.6e-4 at the end
    t.checkpoint_every_steps = 500
    t.eval_every_steps = 500
    t.log_every_steps = 50
    return c
