r"""The CPU-scale base of the Table 3 sweep on the synthetic corpus: the demo model at 3+3 layers, 400 steps.

The demo (configs/demo.py) has 2+2 layers, where the C rows' N·2/6, N·4/6, N·8/6 round to 1, 1 and 3 layers
(C1 = C2); at 3+3 they give 1, 2 and 4. The run is shortened to 400 steps (≈5 minutes a row here) so that the
twenty rows fit an afternoon of a 2-core machine; every row applies its delta to this base (configs/table3.py)::

    transformer-jax sweep --experiment=table3 --base=demo_table3 --workdir=runs/table3_demo
    transformer-jax compare runs/table3_demo/*
"""

import ml_collections

from transformer_jax.configs import demo


def get_config() -> ml_collections.ConfigDict:
    """Returns the demo config at 3+3 layers and 400 steps (the same peak learning rate, reached sooner)."""
    c = demo.get_config()
    c.name = "demo_table3"
    c.model.num_encoder_layers = c.model.num_decoder_layers = 3
    t = c.train
    t.num_steps = 400
    t.warmup_steps = 150
    t.learning_rate_scale = 0.35  # peak 2.5e-3 at step 150, the demo's peak
    t.checkpoint_every_steps = 80  # 5 checkpoints a row: `--eval_checkpoint=avg5` works as in §6.1.
    t.eval_every_steps = 400
    return c
