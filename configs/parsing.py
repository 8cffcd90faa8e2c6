r"""English constituency parsing (§6.3, Table 4): WSJ only, the paper's 4-layer d_model 1024 Transformer.

The input is a sentence's words, the output its linearised tree (Vinyals & Kaiser et al. 2015, "Grammar as a
Foreign Language": "(S (NP XX XX )NP (VP XX ... )VP XX )S", transformer_jax/parsing/trees.py); decoded trees are
repaired into trees over the input words and scored with EVALB / COLLINS.prm (transformer_jax/evaluate/)::

    transformer-jax train --config=configs/parsing.py --config.data.data_dir=/path/to/treebank_3/parsed/mrg \
        --workdir=runs/parsing_wsj            # sections 02–21 train, 22 dev, 23 test
    transformer-jax evaluate --workdir=runs/parsing_wsj --split=test --checkpoint=avg5
    transformer-jax train --config=configs/parsing_demo.py   # offline: the synthetic grammar's trees, ~10 min

What the paper states (§6.3, PAPER.md) is set as stated: 4 layers, d_model 1024, a 16K vocabulary (WSJ only),
maximum output length = input length + 300, beam 21, α 0.3; "everything else as the EN-DE base model". The
dropout (attention and residual), learning rate and beam size "were chosen by a few experiments on section 22"
and are not given: we take them from the authors' code, tensor2tensor's ``transformer_parsing_base`` (the
hparams set for WSJ-only parsing): residual and attention dropout 0.2, warm-up 16,000 steps, learning rate 0.05
against the base's 0.1 (scale 0.5), untied embeddings and softmax, sequences up to 512 tokens, h = 8 heads of
1024 / 8 = 128 and d_ff 2048 (t2t derives d_k = d_model / h and keeps the base's filter size). The number of
steps is not given either: the base's 100K is kept.
"""

import ml_collections

from transformer_jax.configs import base


def get_config() -> ml_collections.ConfigDict:
    """Returns the §6.3 WSJ-only parsing recipe (the ``ptb`` source: your LDC copy in config.data.data_dir)."""
    c = base.get_config()
    c.name = "parsing_wsj"
    c.task = "parsing"
    m = c.model
    m.vocab_size = 16000  # §6.3: 16K tokens for WSJ only
    m.num_encoder_layers = m.num_decoder_layers = 4  # §6.3
    m.d_model, m.num_heads, m.d_k, m.d_v, m.d_ff = 1024, 8, 128, 128, 2048  # §6.3 d_model; t2t's h, d_k, d_ff
    m.dropout_rate = 0.2  # t2t transformer_parsing_base: layer_prepostprocess_dropout
    m.attention_dropout_rate = 0.2  # t2t transformer_parsing_base: attention_dropout
    m.share_embeddings = False  # t2t transformer_parsing_base: shared_embedding_and_softmax_weights = False
    m.max_len = 812  # positions for decoding: the longest input (512) + 300
    d = c.data
    d.source = "ptb"
    d.source_lang, d.target_lang = "en", "tree"  # (the treebank sources have no language pair)
    d.max_length = 512  # t2t transformer_parsing_base: max_length
    d.pos_tags = False  # Vinyals et al.: every POS tag is XX in the output
    # which .mrg files of data_dir train / dev / test: wsj (sections 02–21 / 22 / 23) | ratio:80,10,10 (any folder, by
    # file in name order, e.g. NLTK's WSJ sample) | list:PATH (lines "SPLIT GLOB …"); transformer_jax/data/ptb.py.
    d.ptb_split = "wsj"
    t = c.train
    t.warmup_steps = 16000  # t2t transformer_parsing_base
    t.learning_rate_scale = 0.5  # t2t: learning_rate 0.05 against transformer_base's 0.1
    dec = c.decode
    dec.beam_size = 21  # §6.3
    dec.length_penalty = 0.3  # §6.3: α
    dec.max_length_offset = 300  # §6.3: maximum output length = input length + 300
    dec.tree_constraint = True  # beyond the paper: well-formed trees by construction (configs/base.py)
    return c
