r"""Transformer base, WMT 2014 English→German: the paper's recipe, every number in one place.

Every field below carries the paper's value (Vaswani et al., 2017); sections are cited beside each group.
This config is the single source of truth: no constant of the recipe is written anywhere else.

Train it (on an accelerator node; see README "Paper scale")::

    transformer-jax train --config=configs/base.py --workdir=runs/base_ende

Any field can be overridden from the command line, e.g. ``--config.model.num_heads=16``.
"""

import ml_collections


def model_config() -> ml_collections.ConfigDict:
    """§3: the encoder-decoder architecture of Transformer base (Table 3, row "base")."""
    m = ml_collections.ConfigDict()
    m.vocab_size = 37000  # §5.1: shared source-target BPE vocabulary (EN-DE); the tokenizer is trained to it.
    m.d_model = 512  # §3.1: width of every sublayer output and of the embeddings.
    m.d_ff = 2048  # §3.3: inner size of the position-wise feed-forward network.
    m.num_heads = 8  # §3.2.2: h.
    m.d_k = 64  # §3.2.2: queries/keys per head (Table 3 rows B change only this).
    m.d_v = 64  # §3.2.2: values per head.
    m.num_encoder_layers = 6  # §3.1: N.
    m.num_decoder_layers = 6  # §3.1: N.
    m.dropout_rate = 0.1  # §5.4: P_drop on sublayer outputs and embedding+position sums.
    m.attention_dropout_rate = 0.0  # The paper has none (tensor2tensor v1 also had 0).
    m.relu_dropout_rate = 0.0  # The paper has none.
    m.dropout_rng = "threefry"  # the masks' random bits: threefry (jax.random) | hash (~8x cheaper on CPU, same
    # keys; model/dropout.py). Not the paper's concern; changes which elements drop, not how many.
    m.positional = "sinusoidal"  # §3.5; "learned" is Table 3 row E; "none" shows order blindness.
    m.max_len = 512  # Length of the position table (learned) / longest sequence (sinusoidal).
    m.share_embeddings = True  # §3.4: one matrix for source, target and the pre-softmax projection.
    m.scale_embeddings = True  # §3.4: embeddings multiplied by sqrt(d_model).
    m.norm_position = "post"  # §3.1: LayerNorm(x + Dropout(Sublayer(x))); "pre" for the pre-LN variant.
    m.layer_norm_epsilon = 1e-6
    m.use_bias = True  # biases on every projection (the count in PAPER.md assumes them).
    # Compute dtype of the matmuls: "auto" = bfloat16 on GPU/TPU, float32 on CPU; or "float32" / "bfloat16".
    # Parameters, attention softmax, LayerNorm, residual sums, logits and loss stay float32 (model/precision.py).
    m.dtype = "auto"
    # §3.2.1 kernel, resolved when traced: "auto" = jax.nn.dot_product_attention on GPU/TPU (cuDNN's fused
    # kernel where it takes the shapes and dtype, else XLA's) and the einsum path tuned for XLA:CPU on CPU;
    # "cpu" / "xla" / "cudnn" force one. Cached decoding (and attention-weight dropout) always uses the einsum path.
    m.attention_implementation = "auto"
    # §4 / Table 1 row 4: restricted self-attention. 0 = full attention (the paper's models); r > 0 = each query
    # attends only to keys within distance r by position in its sentence (|i - j| ≤ r; causal in the decoder:
    # i - r ≤ j ≤ i). Self-attention only (encoder and decoder); encoder-decoder attention stays full.
    m.attention_window = 0
    return m


def data_config() -> ml_collections.ConfigDict:
    """§5.1: training data and batching."""
    d = ml_collections.ConfigDict()
    d.source = "wmt14_ende"  # wmt14_ende | wmt14_enfr | multi30k_ende | text | synthetic (parsing: ptb | trees |
    # synthetic_parse, configs/parsing.py); transformer_jax/data/sources.py lists them.
    d.source_lang = "en"  # the paper translates English → German / French.
    d.target_lang = "de"
    d.data_dir = ""  # tfds data_dir / local directory of raw files ("" = the source's default).
    d.train_files = ""  # `text` source: "src_path,tgt_path"; dev_files / test_files likewise.
    d.dev_files = ""
    d.test_files = ""
    d.tokens_per_batch = 25000  # §5.1: ~25000 source + ~25000 target tokens per step (whole job).
    d.max_length = 256  # pairs longer than this (either side, in tokens incl. EOS) are dropped and counted.
    d.pack = True  # pack sentences into rows (segment ids + positions) for a bounded set of shapes.
    d.num_length_buckets = 4  # row lengths compiled: max_length / 2**i for i < num_length_buckets.
    # tokens_per_batch counts REAL tokens: training measures each bucket's fill rate of packed rows and sizes the
    # steps to it (data/batch_plan.py); `describe` has no data and plans with this share instead.
    d.planning_fill_rate = 0.93
    d.shuffle_buffer = 100_000
    d.tokenizer_sample_size = 10_000_000  # sentences sampled (shuffled) to train SentencePiece.
    # multi-host: how long hosts other than process 0 wait for it to prepare the data (download, vocabulary, tokens)
    # before giving up; `transformer-jax train --prepare_only` does it once before the job instead.
    d.prepare_timeout_minutes = 240.0
    d.tokenizer_model_type = "bpe"
    d.tokenizer_split_by_script = True  # SentencePiece's split_by_unicode_script: no piece spans letters and
    # punctuation ("(NP" is "▁(" "NP"); configs/parsing.py turns it off so that each bracket of a tree is one piece.
    d.bpe_dropout = 0.0  # not the paper's (0 = off): BPE-dropout (Provilkov et al., 2020), each merge skipped with
    # this probability in training, a new segmentation every epoch (data/bpe_dropout.py); needs the "bpe" type.
    d.bpe_dropout_sides = "both"  # which sides BPE-dropout samples: both (Provilkov et al.) | source | target.
    d.synthetic = ml_collections.ConfigDict(dict(seed=0, train_size=100_000, dev_size=1_000, test_size=1_000))
    return d


def train_config() -> ml_collections.ConfigDict:
    """§5.2-§5.4: optimizer, schedule, regularization, checkpoints."""
    t = ml_collections.ConfigDict()
    t.num_steps = 100_000  # §5.2: base trains 100K steps (12 h on 8 P100).
    t.warmup_steps = 4000  # §5.3.
    t.learning_rate_scale = 1.0  # multiplies d_model^-0.5 · min(step^-0.5, step·warmup^-1.5).
    t.cooldown_steps = 0  # not the paper's (0 = off): the rate falls linearly to 0 over the last N steps.
    t.adam_b1 = 0.9  # §5.3.
    t.adam_b2 = 0.98  # §5.3.
    t.adam_eps = 1e-9  # §5.3.
    t.label_smoothing = 0.1  # §5.4: ε_ls.
    t.rdrop_alpha = 0.0  # not the paper's (0 = off): R-Drop (Liang et al., 2021): every row runs twice with
    # independent dropout masks and α·½(KL(p₁‖p₂) + KL(p₂‖p₁)) is added to the loss (train/loss.py); a step then
    # costs ~2x the compute of its tokens_per_batch real tokens.
    t.grad_accum_steps = 1  # micro-batches per optimizer step (tokens_per_batch is per step).
    t.grad_clip_norm = 0.0  # 0 = off (the paper has none).
    t.weight_decay = 0.0  # 0 = off (the paper has none); decoupled (AdamW): each step shrinks weights by lr·this.
    t.weight_decay_params = "all"  # what decays: "all", "matrices" (W and embeddings: spares biases and LayerNorm
    # gains/biases, as BERT) or "vectors" (only the biases and LayerNorm gains/biases).
    # §6.1: checkpoints "written at 10-minute intervals" = every 1,500 steps at the paper's 0.4 s a step (§5.2).
    # Saved on this STEP schedule (plus the final step), so averaging spans the same steps on any hardware.
    t.checkpoint_every_steps = 1500
    t.checkpoint_every_minutes = 10.0  # safety saves for preemption (resumed from, never averaged).
    t.keep_checkpoints = 20  # scheduled checkpoints kept, ≥ the 20 averaged for big.
    t.eval_every_steps = 1000
    t.eval_bleu = False  # also decode the dev set at each eval (slow).
    t.log_every_steps = 100
    t.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, tensor=1))  # -1 = the remaining devices.
    return t


def decode_config() -> ml_collections.ConfigDict:
    """§6.1: beam search settings."""
    d = ml_collections.ConfigDict()
    d.beam_size = 4
    d.length_penalty = 0.6  # α of the GNMT length penalty ((5+|Y|)/6)^α.
    d.max_length_offset = 50  # maximum output length = input length + 50.
    d.batch_size = 64  # sentences per decoding batch.
    d.average_last = 5  # §6.1: base averages the last 5 checkpoints (big: 20).
    d.method = "beam"  # beam | greedy | sample
    d.temperature = 1.0
    d.top_k = 0
    d.top_p = 1.0
    # Parsing only (§6.3; beyond the paper): beam search takes only pieces after which the output can still end as
    # one tree over exactly the input's words (transformer_jax/parsing/constraint.py); no output needs repair.
    d.tree_constraint = False
    return d


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    """Returns the paper's Transformer base recipe; ``arg`` "ende" (default) or "enfr" picks the task.

    ``--config=configs/base.py:enfr`` is EN→FR: WMT 2014 EN-FR with a 32000 word-piece vocabulary (§5.1).
    """
    c = ml_collections.ConfigDict()
    c.name = "base"
    c.task = "translation"  # translation (BLEU) | parsing (§6.3: linearised trees, EVALB F1; configs/parsing.py)
    c.seed = 0
    c.model = model_config()
    c.data = data_config()
    c.train = train_config()
    c.decode = decode_config()
    return set_language_pair(c, arg or "ende")


LANGUAGE_PAIRS = {
    # §5.1: EN-DE uses a ~37000 shared BPE vocabulary, EN-FR a 32000 word-piece vocabulary.
    "ende": dict(source="wmt14_ende", target_lang="de", vocab_size=37000),
    "enfr": dict(source="wmt14_enfr", target_lang="fr", vocab_size=32000),
}


def set_language_pair(c: ml_collections.ConfigDict, pair: str) -> ml_collections.ConfigDict:
    """Points ``c`` at the paper's EN→DE or EN→FR task (WMT 2014)."""
    if pair not in LANGUAGE_PAIRS:
        raise ValueError(f"Unknown language pair {pair!r}; valid: {', '.join(LANGUAGE_PAIRS)}.")
    p = LANGUAGE_PAIRS[pair]
    c.data.source, c.data.target_lang, c.model.vocab_size = p["source"], p["target_lang"], p["vocab_size"]
    c.name = f"{c.name}_{pair}"
    return c
