"""Tests for configs/: the paper's numbers (PAPER.md Table 2/3, §5) and the Table 3 rows as deltas on any base."""

import pytest
from absl import flags
from ml_collections import config_flags

from transformer_jax.configs import base, big, demo, demo_table3, multi30k, table3

# PAPER.md Table 3, written out (blank cells = base): N, d_model, d_ff, h, d_k, d_v, P_drop, ε_ls, steps, positions.
B = {"N": 6, "d_model": 512, "d_ff": 2048, "h": 8, "d_k": 64, "d_v": 64, "P_drop": 0.1, "ls": 0.1,
     "steps": 100_000, "positional": "sinusoidal"}
PAPER_TABLE3 = {
    "base": {},
    "A1": {"h": 1, "d_k": 512, "d_v": 512},
    "A2": {"h": 4, "d_k": 128, "d_v": 128},
    "A3": {"h": 16, "d_k": 32, "d_v": 32},
    "A4": {"h": 32, "d_k": 16, "d_v": 16},
    "B1": {"d_k": 16},
    "B2": {"d_k": 32},
    "C1": {"N": 2},
    "C2": {"N": 4},
    "C3": {"N": 8},
    "C4": {"d_model": 256, "d_k": 32, "d_v": 32},
    "C5": {"d_model": 1024, "d_k": 128, "d_v": 128},
    "C6": {"d_ff": 1024},
    "C7": {"d_ff": 4096},
    "D1": {"P_drop": 0.0},
    "D2": {"P_drop": 0.2},
    "D3": {"ls": 0.0},
    "D4": {"ls": 0.2},
    "E": {"positional": "learned"},
    "big": {"d_model": 1024, "d_ff": 4096, "h": 16, "P_drop": 0.3, "steps": 300_000},
}


def _row_values(c) -> dict:
    m = c.model
    assert m.num_encoder_layers == m.num_decoder_layers
    return {"N": m.num_encoder_layers, "d_model": m.d_model, "d_ff": m.d_ff, "h": m.num_heads, "d_k": m.d_k,
            "d_v": m.d_v, "P_drop": m.dropout_rate, "ls": c.train.label_smoothing, "steps": c.train.num_steps,
            "positional": m.positional}


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _changed_fields(before, after) -> dict:
    """{field: new value} for every field the row changed (name and the row tag excluded)."""
    a, b = _flatten(before.to_dict()), _flatten(after.to_dict())
    assert set(b) - set(a) == {"table3_row"}
    return {k: b[k] for k in a if a[k] != b[k] and k != "name"}


def test_rows_cover_table3():
    assert list(table3.ROWS) == list(PAPER_TABLE3)
    assert set(table3.PAPER) == set(PAPER_TABLE3)


@pytest.mark.parametrize("row", list(PAPER_TABLE3))
def test_row_on_the_paper_base_has_the_papers_values(row):
    c = table3.get_config(row)
    assert _row_values(c) == {**B, **PAPER_TABLE3[row]}
    assert c.table3_row == row
    assert c.model.vocab_size == 37000 and c.data.source == "wmt14_ende"
    # Nothing else moves: the changed fields are exactly the row's.
    changed = set(_changed_fields(base.get_config(), c))
    allowed = {"model.num_encoder_layers", "model.num_decoder_layers", "model.d_model", "model.d_ff",
               "model.num_heads", "model.d_k", "model.d_v", "model.dropout_rate", "train.label_smoothing",
               "train.num_steps", "model.positional", "decode.average_last", "train.checkpoint_every_steps"}
    assert changed <= allowed
    assert ("decode.average_last" in changed) == (row == "big")
    # §6.1 + §5.2: 10-minute checkpoints at 0.4 s (base) / 1.0 s (big) a step, so averaging spans the paper's steps
    assert c.train.checkpoint_every_steps == (600 if row == "big" else 1500)


def test_paper_base_recipe():
    c = base.get_config()
    m, t, d = c.model, c.train, c.decode
    assert (m.share_embeddings, m.scale_embeddings, m.norm_position) == (True, True, "post")
    assert (m.attention_dropout_rate, m.relu_dropout_rate) == (0.0, 0.0)
    assert (t.adam_b1, t.adam_b2, t.adam_eps, t.warmup_steps) == (0.9, 0.98, 1e-9, 4000)
    assert c.data.tokens_per_batch == 25000
    assert (d.beam_size, d.length_penalty, d.max_length_offset, d.average_last) == (4, 0.6, 50, 5)
    assert big.get_config().decode.average_last == 20


# configs/demo_table3.py (the CPU sweep base): d_model 128, d_ff 512, h 4, d_k = d_v = 32, N = 3, P_drop 0.1, ε_ls 0.1.
DEMO_ROWS = {
    "base": {},
    "A1": {"model.num_heads": 1, "model.d_k": 128, "model.d_v": 128},
    "A2": {},  # h = 4 is already the demo's
    "A3": {"model.num_heads": 16, "model.d_k": 8, "model.d_v": 8},
    "A4": {"model.num_heads": 32, "model.d_k": 4, "model.d_v": 4},
    "B1": {"model.d_k": 8},
    "B2": {"model.d_k": 16},
    "C1": {"model.num_encoder_layers": 1, "model.num_decoder_layers": 1},  # round(3·2/6)
    "C2": {"model.num_encoder_layers": 2, "model.num_decoder_layers": 2},
    "C3": {"model.num_encoder_layers": 4, "model.num_decoder_layers": 4},
    "C4": {"model.d_model": 64, "model.d_k": 16, "model.d_v": 16},
    "C5": {"model.d_model": 256, "model.d_k": 64, "model.d_v": 64},
    "C6": {"model.d_ff": 256},
    "C7": {"model.d_ff": 1024},
    "D1": {"model.dropout_rate": 0.0},
    "D2": {"model.dropout_rate": 0.2},
    "D3": {"train.label_smoothing": 0.0},
    "D4": {"train.label_smoothing": 0.2},
    "E": {"model.positional": "learned"},
    "big": {"model.d_model": 256, "model.d_ff": 1024, "model.num_heads": 8, "model.dropout_rate": 0.3,
            "train.num_steps": 3 * demo_table3.get_config().train.num_steps, "decode.average_last": 20,
            "train.checkpoint_every_steps": 32},  # 80 × 0.4 s / 1.0 s: big's steps are 2.5× slower (§5.2)
}


@pytest.mark.parametrize("row", list(DEMO_ROWS))
def test_row_on_the_cpu_sweep_base_is_the_documented_delta(row):
    c = table3.get_config(f"{row},base=demo_table3")
    assert _changed_fields(demo_table3.get_config(), c) == DEMO_ROWS[row]
    assert c.name == f"demo_table3/{row}"
    m = c.model
    if row.startswith("A"):
        assert m.num_heads * m.d_k == m.num_heads * m.d_v == m.d_model


def test_every_row_on_multi30k_changes_what_it_changes_on_the_paper_base():
    """configs/multi30k.py (d_model 256, h 4): each row moves the fields it moves on the paper's base (A2 none: h is
    already 4), the A rows keep h·d_k = d_model, and the data stays Multi30k."""
    for row in table3.ROWS:
        c = table3.get_config(f"{row},base=multi30k")
        changed = set(_changed_fields(multi30k.get_config(), c))
        expected = set() if row == "A2" else set(_changed_fields(base.get_config(), table3.get_config(row)))
        assert changed == expected, row
        assert c.data.source == "multi30k_ende" and c.name == f"multi30k/{row}"
        if row.startswith("A"):
            assert c.model.num_heads * c.model.d_k == c.model.num_heads * c.model.d_v == c.model.d_model == 256


def test_apply_row_does_not_touch_its_input():
    c = demo.get_config()
    before = c.to_dict()
    table3.apply_row(c, "big")
    assert c.to_dict() == before


def test_unknown_row_lists_the_valid_ones():
    with pytest.raises(ValueError, match="Z9") as err:
        table3.get_config("Z9")
    for row in table3.ROWS:
        assert row in str(err.value)


@pytest.mark.parametrize("arg", ["B1,foo=bar", "B1,demo", "B1,base"])
def test_bad_option_raises(arg):
    with pytest.raises(ValueError, match="base=NAME"):
        table3.get_config(arg)


def test_unknown_base_raises():
    with pytest.raises(ValueError, match="no_such_config"):
        table3.get_config("B1,base=no_such_config")


@pytest.mark.parametrize("arg", [None, ""])
def test_a_row_is_required(arg):
    with pytest.raises(ValueError, match="valid rows"):
        table3.get_config(arg)


def test_heads_row_needs_divisible_width():
    c = demo.get_config()
    c.model.d_model = 100
    with pytest.raises(ValueError, match="divisible"):
        table3.apply_row(c, "A4")  # 100 % 32 ≠ 0


def test_enfr():
    """§5.1: EN-FR is WMT 2014 with a 32000 word-piece vocabulary; big EN-FR keeps P_drop 0.1 (Table 2 note)."""
    c = base.get_config("enfr")
    assert (c.model.vocab_size, c.data.source, c.data.source_lang, c.data.target_lang) == (
        32000, "wmt14_enfr", "en", "fr")
    ende = base.get_config()
    assert (ende.model.vocab_size, ende.data.source, ende.data.target_lang) == (37000, "wmt14_ende", "de")
    assert base.get_config("ende").to_dict() == ende.to_dict()

    big_fr, big_de = big.get_config("enfr"), big.get_config()
    assert big_fr.model.dropout_rate == 0.1
    assert big_de.model.dropout_rate == 0.3
    assert (big_fr.model.vocab_size, big_fr.data.target_lang) == (32000, "fr")
    for c in (big_fr, big_de):
        assert (c.model.d_model, c.model.d_ff, c.model.num_heads, c.train.num_steps) == (1024, 4096, 16, 300_000)
    assert table3.get_config("big,pair=enfr").to_dict() == big_fr.to_dict()
    with pytest.raises(ValueError, match="ende"):
        base.get_config("xx")


def test_multi30k_config():
    c = multi30k.get_config()
    assert c.data.source == "multi30k_ende" and c.model.vocab_size == 8000
    assert c.model.num_heads * c.model.d_k == c.model.d_model


def _parse(*args):
    """Loads a config the way the CLI does (ml_collections.config_flags, which locks it)."""
    argv = ["prog", *args]
    fv = flags.FlagValues()
    holder = config_flags.DEFINE_config_file("config", flag_values=fv, sys_argv=argv)  # overrides come from argv
    fv(argv)
    return holder.value


def test_cli_flag_overrides_apply_after_the_row():
    c = _parse("--config=configs/table3.py:B1", "--config.model.num_heads=16", "--config.train.num_steps=7")
    assert (c.model.num_heads, c.model.d_k, c.model.d_v, c.train.num_steps) == (16, 16, 64, 7)


def test_cli_flag_config_is_locked_against_typos():
    with pytest.raises(Exception, match='"d_model"'):  # ml_collections suggests the field ("did you mean")
        _parse("--config=configs/base.py", "--config.model.d_modell=3")
    c = _parse("--config=configs/base.py")
    with pytest.raises(AttributeError):
        c.model.d_modell = 3  # locked: no new fields by accident
    with pytest.raises(AttributeError):
        _ = c.model.d_modell


def test_config_names_are_the_files_that_define_a_config():
    """`--config=NAME` lists and accepts only real configs: configs/rows.py (the sweeps' row machinery) is none."""
    from transformer_jax.launch.flags import config_file, config_names

    names = config_names()
    assert {"base", "big", "demo", "tiny", "table3", "window", "multi30k_search"} <= set(names)
    assert "rows" not in names
    with pytest.raises(ValueError, match="no config named 'rows'"):
        config_file("rows")


@pytest.mark.parametrize("name,arg,spec", [
    ("demo", None, "avg5"), ("demo_table3", None, "avg5"), ("table3", "B1,base=demo_table3", "avg5"),
    ("multi30k", None, "avg5"), ("base", None, "avg5"), ("big", None, "avg20")])
def test_the_documented_averages_exist_on_each_configs_schedule(name, arg, spec):
    """The README's `average --last=5` / `--checkpoint=avg5` (big: 20, §6.1) find that many scheduled checkpoints:
    the demo and the Table 3 demo rows once kept one or two, so the walkthrough's avg5 failed after training."""
    import importlib

    from transformer_jax.launch.flags import check_eval_checkpoint

    module = importlib.import_module(f"transformer_jax.configs.{name}")
    config = module.get_config(arg) if arg else module.get_config()
    check_eval_checkpoint(spec, config.train)
