r"""Multi30k task 1 EN→DE (29K training pairs): a real-text base that trains on one CPU or a small GPU.

    transformer-jax train --config=configs/multi30k.py --config.data.data_dir=../shared/data/multi30k \
        --workdir=runs/multi30k
    transformer-jax sweep --experiment=table3 --base=configs/multi30k.py --rows=base,A1,C4,D1,E ...
"""

import ml_collections

from configs import base


def get_config() -> ml_collections.ConfigDict:
    """Returns the Multi30k base (the paper's recipe at 256 wide, 3+3 layers, an 8000 shared BPE)."""
    c = base.get_config()
    c.name = "multi30k"
    m = c.model
    m.vocab_size = 8000
    m.d_model, m.d_ff, m.num_heads, m.d_k, m.d_v = 256, 1024, 4, 64, 64
    m.num_encoder_layers = m.num_decoder_layers = 3
    m.max_len = 256
    m.dropout_rate = 0.3  # 29K pairs over-fit quickly: heavier dropout, as small-data Transformers use.
    d = c.data
    d.source = "multi30k_ende"
    d.tokens_per_batch = 4096
    d.max_length = 128
    d.tokenizer_sample_size = 100_000
    t = c.train
    t.num_steps = 12_000
    t.warmup_steps = 1000
    t.learning_rate_scale = 1.5
    t.checkpoint_every_steps = 1000
    t.eval_every_steps = 1000
    t.log_every_steps = 50
    return c
