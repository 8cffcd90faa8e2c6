"""Packing never lets attention cross sentences: the loss of a packed batch equals the sum over its sentences alone."""

import numpy as np
from flax import nnx

from transformer_jax.configs import demo
from transformer_jax.data.batching import TokenizedPairs, make_rows
from transformer_jax.data.tokenizer import EOS_ID
from transformer_jax.model.transformer import Transformer
from transformer_jax.train.step import _model_sums


def test_packed_batch_loss_equals_sum_of_sentences_unpacked():
    c = demo.get_config()
    m = c.model
    m.update(vocab_size=50, d_model=32, d_ff=64, num_heads=4, d_k=8, d_v=8, num_encoder_layers=2,
             num_decoder_layers=2, max_len=32)
    model = Transformer(m, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)
    params = nnx.to_pure_dict(params)
    rng = np.random.RandomState(0)

    def sentence(n):
        return list(rng.randint(3, 50, n)) + [EOS_ID]

    pairs = [(sentence(n), sentence(k)) for n, k in [(5, 7), (3, 4), (8, 2), (4, 6)]]
    data = TokenizedPairs.from_lists(pairs)
    packed = make_rows(data, [[0, 1], [2, 3]], 16)  # two sentences per row
    assert packed["inputs_segmentation"].max() == 2
    total = _model_sums(graphdef, params, packed, 0.1, None)
    alone = [_model_sums(graphdef, params, make_rows(data, [[i]], 16), 0.1, None) for i in range(4)]
    for key in ("loss", "nll", "tokens"):
        np.testing.assert_allclose(float(total[key]), sum(float(a[key]) for a in alone), rtol=2e-5)
