"""Tests for `transformer-jax describe`: parameter counts against Table 3, FLOPs per target token, the CLI."""

import json
import re
import subprocess

import pytest

from cli_runs import run_all
from transformer_jax.configs import demo, table3
from transformer_jax.launch.describe import _table, describe

# PAPER.md: a faithful count (one embedding matrix shared three ways, biases everywhere, 37000 vocabulary), ×10^6.
FAITHFUL = {"base": 63.1, "B1": 56.0, "B2": 58.4, "C1": 33.7, "C2": 48.4, "C3": 77.8, "C4": 26.8, "C5": 163.9,
            "C6": 50.5, "C7": 88.3, "big": 214.3}

_RESULTS: dict[str, dict] = {}


def result(row: str) -> dict:
    if row not in _RESULTS:
        _RESULTS[row] = describe(table3.get_config(row), 32)
    return _RESULTS[row]


def test_rows_with_a_params_column_are_the_faithful_ones():
    assert {row for row, (_, _, params) in table3.PAPER.items() if params is not None} == set(FAITHFUL)


@pytest.mark.parametrize("row", list(FAITHFUL))
def test_params_match_table3(row):
    total = result(row)["params_total"]
    paper = table3.PAPER[row][2] * 1e6
    assert abs(total - paper) <= 0.07 * paper, (row, total, paper)
    assert abs(total - FAITHFUL[row] * 1e6) <= 0.2e6, (row, total)


def count_by_hand(m) -> tuple[int, int]:
    """(embedding, non-embedding) parameters of a post-LN model, counted from its config alone: one shared
    vocab × d_model matrix (§3.4; three without sharing), one max_len × d_model table per side for learned positions
    (row E, as in ConvS2S [9] and tensor2tensor); per layer W^Q, W^K (d_model → h·d_k), W^V (→ h·d_v), W^O
    (h·d_v → d_model) and the FFN, each with a bias, and a LayerNorm (gain, bias) per sub-layer."""
    d, h = m.d_model, m.num_heads
    embedding = m.vocab_size * d * (1 if m.share_embeddings else 3)
    if m.positional == "learned":
        embedding += 2 * m.max_len * d
    attention = (d * h * m.d_k + h * m.d_k) * 2 + d * h * m.d_v + h * m.d_v + h * m.d_v * d + d
    ffn = d * m.d_ff + m.d_ff + m.d_ff * d + d
    norm = 2 * d
    encoder_layer, decoder_layer = attention + ffn + 2 * norm, 2 * attention + ffn + 3 * norm
    return embedding, m.num_encoder_layers * encoder_layer + m.num_decoder_layers * decoder_layer


def test_every_row_counts_as_by_hand():
    """Every Table 3 row, embedding and non-embedding apart: A keeps h·d_k = d_model (base's count), B shrinks only
    W^Q and W^K, C and the big model change N, d_model, d_ff or h, D changes no parameter, E adds only the two
    position tables."""
    for row in table3.ROWS:
        m = table3.get_config(row).model
        assert m.norm_position == "post"  # the formula has no final LayerNorm of pre-LN stacks
        embedding, nonembedding = count_by_hand(m)
        r = result(row)
        assert (r["params_embedding"], r["params_nonembedding"]) == (embedding, nonembedding), row


def test_base_embedding_is_one_shared_matrix():
    """§3.4: one 37000 × 512 matrix for source, target and pre-softmax projection."""
    assert result("base")["params_embedding"] == 37000 * 512
    assert result("C5")["params_embedding"] == 37000 * 1024
    unshared = table3.get_config("base")
    unshared.model.share_embeddings = False
    assert describe(unshared, 32)["params_total"] == result("base")["params_total"] + 2 * 37000 * 512


def test_base_count_by_hand():
    """63,082,496 = 37000·512 + 6 encoder layers + 6 decoder layers (+ biases and LayerNorms), by hand."""
    d, d_ff, v = 512, 2048, 37000
    attention = 4 * (d * d + d)  # W^Q, W^K, W^V (h·d_k = h·d_v = d), W^O, each with a bias
    ffn = d * d_ff + d_ff + d_ff * d + d
    norm = 2 * d
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    assert result("base")["params_total"] == v * d + 6 * encoder_layer + 6 * decoder_layer == 63_082_496


def test_flops_per_target_token_by_hand():
    """The bench shape: d_model 128, 2+2 layers, h 4 (d_k = d_v = 32), d_ff 512, vocab 8000, seq_len 32."""
    c = demo.get_config()
    m = c.model
    m.d_model, m.d_ff, m.num_heads, m.d_k, m.d_v, m.vocab_size = 128, 512, 4, 32, 32, 8000
    m.num_encoder_layers = m.num_decoder_layers = 2
    # Forward multiply-adds per target token (one source token per target token), ×2 FLOPs, ×3 for training:
    attn_proj = 4 * 128 * 128  # W^Q, W^K, W^V: 128 → 4·32; W^O: 4·32 → 128
    ffn = 128 * 512 + 512 * 128
    encoder = 2 * (attn_proj + ffn)  # 2 layers
    decoder = 2 * (2 * attn_proj + ffn)  # self- and cross-attention
    softmax_proj = 128 * 8000
    scores = 32 * 4 * (32 + 32)  # per attention: q·k over 32 keys and the weighted sum of 32 values, 4 heads
    attention = 2 * scores + 2 * 2 * scores  # 2 encoder self-attentions, 2 × (self + cross) in the decoder
    expected = 3 * 2 * (encoder + decoder + softmax_proj + attention)
    assert expected == 11_943_936
    assert describe(c, 32)["flops_per_target_token"] == expected
    # The attention term is the only one that grows with the sentence length.
    assert describe(c, 64)["flops_per_target_token"] - expected == 3 * 2 * attention


def test_an_average_longer_than_the_kept_checkpoints_is_a_warning():
    """decode.average_last = 5 with one scheduled checkpoint (400 steps, saved every 400): `evaluate
    --checkpoint=avg5` would fail after training, so describe warns (table and JSON) instead of showing a 0-step
    window; the same for keep_checkpoints below 5, and for time-based saves kept fewer than 5."""
    config = demo.get_config()
    config.train.num_steps = config.train.checkpoint_every_steps = 400
    planned = describe(config, 32)
    assert (planned["average_steps"], planned["average_available"]) == ([400], 1)
    warning, = [line for line in planned["warnings"] if "average_last" in line]
    assert "avg5 has 1 checkpoint" in warning and "checkpoint_every_steps to at most 80" in warning
    table = _table(planned)
    assert re.search(r"^warning +decode.average_last=5 but the step schedule saves 1 ", table, re.MULTILINE), table
    assert re.search(r"^avg5 window +only 1 of 5 checkpoints: step 400$", table, re.MULTILINE), table

    config.train.checkpoint_every_steps, config.train.keep_checkpoints = 80, 3
    planned = describe(config, 32)
    assert (planned["average_steps"], planned["average_available"]) == ([240, 320, 400], 3)
    assert any("keep_checkpoints=3 keeps 3" in line for line in planned["warnings"])
    config.train.checkpoint_every_steps = 0
    planned = describe(config, 32)
    assert planned["average_available"] is None and any("at most 3" in line for line in planned["warnings"])

    config.train.keep_checkpoints = 20
    for fitting in (config, demo.get_config(), table3.get_config("big")):  # the schedules the paper's avgN fits
        assert not [line for line in describe(fitting, 32)["warnings"] if "average_last" in line], fitting.name


# --- the command line, end to end ------------------------------------------------------------------------------


CLI_CASES = {
    "c5": ["describe", "--config=configs/table3.py:C5", "--json"],
    "typo": ["describe", "--config=configs/table3.py:C5", "--config.model.d_modell=3", "--json"],
    "row": ["describe", "--config=configs/table3.py:Z9", "--json"],
    "layout": ["describe", "--config=configs/base.py", "--num_processes=8", "--devices_per_process=4",
               "--config.train.grad_accum_steps=2", "--json"],
    "table": ["describe", "--config=configs/base.py", "--num_processes=8", "--devices_per_process=4",
              "--config.train.grad_accum_steps=2"],
    "print_config": ["describe", "--config=configs/table3.py:C5", "--print_config"],
    "both": ["describe", "--config=configs/table3.py:C5", "--print_config", "--json"],
}


@pytest.fixture(scope="module")
def cli_runs() -> dict[str, subprocess.CompletedProcess]:
    """The CLI runs, started together (each pays the jax import) from the repository root."""
    return run_all(CLI_CASES)


def test_cli_describe_json(cli_runs):
    """--json: stdout is exactly one JSON document, describe() for the row the --config names (no table, no config
    dump)."""
    run = cli_runs["c5"]
    assert run.returncode == 0, run.stderr
    assert len(run.stdout.strip().splitlines()) == 1
    printed = json.loads(run.stdout)
    expected = result("C5")
    assert printed["config"]["table3_row"] == "C5" and printed["config"] == expected["config"]
    for key in ("params_total", "params_embedding", "params_nonembedding", "flops_per_target_token"):
        assert printed[key] == expected[key], key


def test_cli_typo_in_an_override_fails_and_names_the_field(cli_runs):
    """DESIGN.md: unknown config rows/keys give one clear error message, not a Python traceback."""
    run = cli_runs["typo"]
    assert run.returncode != 0
    assert "Traceback (most recent call last)" not in run.stderr, run.stderr
    assert re.search(r"d_model(?!l)", run.stderr), run.stderr  # the suggestion, not only the typo echoed back


def test_cli_unknown_row_fails_and_lists_the_rows(cli_runs):
    run = cli_runs["row"]
    assert run.returncode != 0
    assert "Traceback (most recent call last)" not in run.stderr, run.stderr
    assert "Z9" in run.stderr
    assert all(row in run.stderr for row in ("A1", "B2", "C7", "D4", "E", "big")), run.stderr


def test_cli_plans_a_cluster_layout(cli_runs):
    """describe --num_processes=P --devices_per_process=D: the step shapes, real tokens, checkpoint schedule and
    averaging window that training would use on that layout (train/plan.py)."""
    run = cli_runs["layout"]
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["num_processes"] == 8 and result["devices_per_process"] == 4 and result["grad_accum_steps"] == 2
    assert [length for _, length in result["batch_shapes"]] == [32, 64, 128, 256]
    for (rows, length), per_device in zip(result["batch_shapes"], result["rows_per_device"]):
        assert rows % 64 == 0 and per_device == rows // 64  # 32 devices × 2 micro-batches
    assert all(abs(t - 25_000) <= 750 for t in result["tokens_per_step"])  # real tokens, ±3%
    assert result["checkpoint_every_steps"] == 1500
    assert result["average_steps"] == [94_500, 96_000, 97_500, 99_000, 100_000]
    assert result["average_window_steps"] == 5_500



def test_cli_without_json_prints_only_the_table(cli_runs):
    """Without --json a person gets the table (the same plan), not the config's every field nor a JSON line."""
    run = cli_runs["table"]
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert lines[0].split()[0] == "config" and lines[0].split()[1].startswith("base")
    assert re.search(r"^avg5 window +steps 94,500–100,000 \(5,500 steps\)$", run.stdout, re.MULTILINE), run.stdout
    assert re.search(r"^layout +8 processes × 4 devices, 2 accumulation step\(s\)$", run.stdout, re.MULTILINE)
    assert re.search(r"^training +100,000 steps, warmup 4,000, P_drop 0.1, ε_ls 0.1$", run.stdout, re.MULTILINE)
    assert not any(line.lstrip().startswith(("{", "adam_b1")) for line in lines), run.stdout
    assert all(re.match(r"\S.*\S  +\S", line) for line in lines), run.stdout  # every line a "key  value" row


def test_cli_print_config_adds_every_field_above_the_table(cli_runs):
    run = cli_runs["print_config"]
    assert run.returncode == 0, run.stderr
    config_part, table_part = run.stdout.split("\nconfig ", 1)
    assert "adam_b1: 0.9" in config_part and "table3_row: C5" in config_part and "{" not in run.stdout
    assert "params total" in table_part
    both = cli_runs["both"]
    assert both.returncode == 2 and not both.stdout and "--print_config" in both.stderr.strip()
    assert len(both.stderr.strip().splitlines()) == 1
