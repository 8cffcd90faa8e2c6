"""Decoding settings reach the search that runs (§6.1: beam size, α, maximum length = input length + offset).

Every setting of ``config.decode`` that shapes the search (the method, beam size, length penalty α, maximum-length
offset, and the sampling temperature / top-k / top-p) must go from the run's config.json, and from every
``--config.decode.FIELD=VALUE`` override on `decode` and `evaluate`, into the search function that decodes. The
commands run as the console script does, in subprocesses (overrides are flags defined from the command line when
the CLI is imported), under tests/scripts/record_search.py, which records the keyword arguments the search is
called with and, for every batch, each sentence's source and output token counts, and how many times config.json
was read (once: the overrides are applied to it once, and that config is passed down). The tiny model is trained
for 20 steps only: it never emits EOS, so every output runs to its length limit and the offset is visible in the
output lengths, not just in the arguments.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tiny_setup as tiny
from transformer_jax.train.trainer import train

pytestmark = pytest.mark.slow  # decode/evaluate subprocesses on a trained run (~1 min on 2 cores): the slow step

HERE = Path(__file__).parent
REPO = HERE.parent
RECORDER = HERE / "scripts" / "record_search.py"

# The run's own config.decode (what config.json says): not the paper's defaults, so a default cannot pass for it.
RUN_DECODE = {"method": "beam", "beam_size": 3, "length_penalty": 1.3, "max_length_offset": 2}
MAX_LEN = 64  # tiny config.model.max_len
SENTENCES = ["The house is small.", "A dog runs.",
             "My neighbour repairs the old red bicycle in the garden every Sunday morning."]

# name: (command line after the workdir, the search that must run, its expected arguments, the offset in force).
# Fields a command does not override must come from config.json (RUN_DECODE).
COMMANDS = {
    "decode_config": (["decode"], "beam_search", {"beam_size": 3, "length_penalty": 1.3}, 2),
    "decode_beam": (["decode", "--config.decode.beam_size=2", "--config.decode.length_penalty=0.8",
                     "--config.decode.max_length_offset=5"], "beam_search", {"beam_size": 2, "length_penalty": 0.8}, 5),
    "decode_greedy": (["decode", "--config.decode.method=greedy", "--config.decode.max_length_offset=4"],
                      "greedy_search", {}, 4),
    "decode_sample": (["decode", "--config.decode.method=sample", "--config.decode.temperature=0.5",
                       "--config.decode.top_k=7", "--config.decode.top_p=0.9"],
                      "sample", {"temperature": 0.5, "top_k": 7, "top_p": 0.9}, 2),
    "evaluate_beam_size": (["evaluate", "--split=test", "--config.decode.beam_size=5"], "beam_search",
                           {"beam_size": 5, "length_penalty": 1.3}, 2),
    "evaluate_penalty_offset": (["evaluate", "--split=test", "--config.decode.length_penalty=0.2",
                                 "--config.decode.max_length_offset=1"], "beam_search",
                                {"beam_size": 3, "length_penalty": 0.2}, 1),
    "evaluate_greedy": (["evaluate", "--split=test", "--config.decode.method=greedy",
                         "--config.decode.max_length_offset=3"], "greedy_search", {}, 3),
    "evaluate_sample": (["evaluate", "--split=test", "--config.decode.method=sample", "--config.decode.temperature=0.7",
                         "--config.decode.top_k=1", "--config.decode.top_p=0.5", "--config.decode.max_length_offset=6"],
                        "sample", {"temperature": 0.7, "top_k": 1, "top_p": 0.5}, 6),  # top-k 1: sentences run on
    # On a copy of the run whose config.json has a decoding field that configs/demo.py (the default of the shared
    # --config flag) lacks: the overrides are typed by the run's own config, so its field is accepted (it was
    # refused as an unknown field while the overrides were parsed against the demo config).
    "decode_run_field": (["decode", "--config.decode.extra_field=3", "--config.decode.beam_size=2"], "beam_search",
                         {"beam_size": 2, "length_penalty": 1.3}, 2),
}
RUN_FIELD_COMMANDS = ("decode_run_field",)  # the commands that run on that copy


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("wiring") / "run"
    config = tiny.tiny_config(num_steps=20, checkpoint_every_steps=20)
    config.data.synthetic.dev_size = config.data.synthetic.test_size = 8
    config.decode.update(RUN_DECODE)
    train(config, str(path), progress=False)
    return path


@pytest.fixture(scope="module")
def recorded(workdir, tmp_path_factory) -> dict:
    """{name: (CompletedProcess, record)} of every command in COMMANDS, started together."""
    tmp = tmp_path_factory.mktemp("records")
    source = tmp / "in.txt"
    source.write_text("".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    with_field = tmp / "run_with_field"
    shutil.copytree(workdir, with_field)
    config = json.loads((with_field / "config.json").read_text())
    config["decode"]["extra_field"] = 1
    (with_field / "config.json").write_text(json.dumps(config))
    procs = {}
    for name, (args, *_) in COMMANDS.items():
        command, *rest = args
        io = [f"--input={source}", f"--output={tmp / (name + '.txt')}"] if command == "decode" else []
        run = with_field if name in RUN_FIELD_COMMANDS else workdir
        procs[name] = subprocess.Popen(
            [sys.executable, str(RECORDER), str(tmp / f"{name}.json"), command, f"--workdir={run}", *io, *rest],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        with open(tmp / f"{name}.json") as f:
            results[name] = (subprocess.CompletedProcess(proc.args, proc.returncode, out, err), json.load(f))
    return results


@pytest.mark.parametrize("name", list(COMMANDS))
def test_decode_settings_reach_the_search(recorded, name):
    _, search, expected, _ = COMMANDS[name]
    proc, record = recorded[name]
    assert proc.returncode == 0, proc.stderr[-2000:]
    calls = record["searches"]
    assert calls and {c["search"] for c in calls} == {search}, calls  # the method picked the search, and only it
    for call in calls:
        assert {k: call[k] for k in expected} == expected, call
        if search == "beam_search":  # translation asks for the 1-best only, and gets it
            assert call["num_best"] == 1 and call["num_best_returned"] == 1, call


@pytest.mark.parametrize("name", list(COMMANDS))
def test_outputs_stop_at_source_length_plus_offset(recorded, name):
    """§6.1's maximum output length: each sentence's own source length (EOS included) + the offset in force."""
    _, _, _, offset = COMMANDS[name]
    proc, record = recorded[name]
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [(s, o) for batch in record["batches"] for s, o in zip(batch["source"], batch["output"]) if s]
    expected_rows = len(SENTENCES) if name.startswith("decode") else 8
    assert len(rows) == expected_rows, record["batches"]
    assert all(out <= src + offset for src, out in rows), (offset, rows)
    # The model (almost) never ends a sentence, so the limit binds: outputs have the allowed length (≤ max_len).
    assert sum(out == min(src + offset, MAX_LEN) for src, out in rows) * 2 >= len(rows), (offset, rows)
    assert any(src + offset < MAX_LEN for src, _ in rows), rows  # (not all capped by max_len instead)
    # The static cache length is the padded source length + the offset (bounded by max_len).
    for batch in record["batches"]:
        assert batch["source_length"] + offset >= max(batch["output"]), batch
    lengths = {min(b["source_length"] + offset, MAX_LEN) for b in record["batches"]}
    assert lengths == {c["max_decode_len"] for c in record["searches"]}, (lengths, record["searches"])


@pytest.mark.parametrize("name", list(COMMANDS))
def test_config_json_is_read_once(recorded, name):
    """decode and evaluate read config.json once, apply the overrides to it once and pass that config down (they
    read it, and applied the overrides, a second time when restoring the checkpoint)."""
    proc, record = recorded[name]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert record["config_reads"] == 1, record["config_reads"]


def test_run_config_json_holds_the_settings_the_search_got(workdir):
    """The settings the config-only commands decoded with came from config.json, not from a default."""
    with open(os.path.join(workdir, "config.json")) as f:
        decode = json.load(f)["decode"]
    assert {k: decode[k] for k in RUN_DECODE} == RUN_DECODE
