"""The command line as a contract (issue 13): strict verbs, one-line errors found before the work, and a failed
start that leaves its workdir as it was.

Each verb takes only its own flags (a stray argument or another verb's flag: one line, exit status 2), and its
--help shows `transformer-jax VERB` and its own flags. Every user mistake a command can see before training is
reported before training, in one line naming what to change; a start that fails before its first checkpoint
leaves no config.json and no provenance record, so the corrected command runs in the same --workdir.

The quick commands start together (each pays the jax import); one chain of `train` runs on aligned text files
(configs/tiny.py, ~30 s on 2 cores) covers two failed starts (together), the corrected rerun and re-scoring the
finished run.
The decode-side contract (a positional input file, --config.decode.* reaching the search, a bad --output refused
before decoding) is in tests/test_decode_cli.py, beside its trained run.
"""

import json
import os
import subprocess
import sys

import ml_collections
import pytest

from cli_runs import run_all
from transformer_jax.configs import tiny
from transformer_jax.data.sources import get_source
from transformer_jax.launch import cli
from transformer_jax.launch import train as train_cli
from transformer_jax.launch.flags import check_eval_checkpoint

TINY = os.path.join("configs", "tiny.py")


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The one line a failed command printed (asserts: failed, one line on stderr, no traceback, nothing on stdout)."""
    assert proc.returncode != 0, proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not proc.stdout.strip(), proc.stdout
    return lines[0]


def write_pairs(folder, name: str, pairs: list[tuple[str, str]]) -> str:
    """``folder/name.en`` and ``folder/name.de``; returns "src,tgt" for config.data.*_files."""
    src, tgt = folder / f"{name}.en", folder / f"{name}.de"
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return f"{src},{tgt}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, str]:
    """configs/tiny.py's synthetic corpus as aligned text files: {split: "src_path,tgt_path"}."""
    folder = tmp_path_factory.mktemp("corpus")
    source = get_source(tiny.get_config().data)
    return {split: write_pairs(folder, split, source.load(split)) for split in ("train", "dev", "test")}


def text_args(files: dict[str, str]) -> list[str]:
    return ["--config.data.source=text", *(f"--config.data.{split}_files={files[split]}" for split in files)]


@pytest.fixture(scope="module")
def quick(corpus, tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Commands refused before any work, and --help of four verbs, all started together."""
    tmp = tmp_path_factory.mktemp("quick")
    a_file = tmp / "a_file"
    a_file.write_text("not a folder\n")
    bad_test = {**corpus, "test": f"{tmp / 'missing.en'},{tmp / 'missing.de'}"}
    return run_all({
        "stray": ["train", TINY],
        "foreign": ["train", f"--config={TINY}", "--checkpoint=avg5"],
        "two_inputs": ["decode", "--workdir=runs/x", "a.en", "b.en"],
        "avg5": ["train", f"--config={TINY}", f"--workdir={tmp / 'avg5'}", "--eval_checkpoint=avg5"],
        "test_files": ["train", f"--config={TINY}", f"--workdir={tmp / 'test_files'}", *text_args(bad_test)],
        "workdir_file": ["train", f"--config={TINY}", f"--workdir={a_file}"],
        "no_config": ["train", "--config=configs/no_such_config.py", f"--workdir={tmp / 'no_config'}"],
        "branch_half": ["train", f"--config={TINY}", f"--workdir={tmp / 'branch_half'}", "--branch_step=4"],
        "branch_nothing": ["train", f"--config={TINY}", f"--workdir={tmp / 'branch_nothing'}",
                           f"--branch_from={tmp / 'no_run'}", "--branch_step=4"],
        **{f"help_{verb}": [verb, "--help"] for verb in ("train", "decode", "evaluate", "sweep")},
    })


def workdir_of(proc: subprocess.CompletedProcess) -> str:
    return next(arg for arg in proc.args if arg.startswith("--workdir=")).removeprefix("--workdir=")


def test_a_stray_argument_is_one_line_with_status_2(quick):
    """`train configs/tiny.py` (no --config=) started the 13-minute demo."""
    message = one_line_error(quick["stray"])
    assert quick["stray"].returncode == 2
    assert message.startswith("transformer-jax train: unexpected argument 'configs/tiny.py'")
    assert "--config=configs/tiny.py" in message
    assert quick["two_inputs"].returncode == 2 and "takes one FILE" in one_line_error(quick["two_inputs"])


def test_a_flag_of_another_verb_is_refused(quick):
    message = one_line_error(quick["foreign"])
    assert quick["foreign"].returncode == 2
    assert "--checkpoint is not a flag of `transformer-jax train`" in message and "--eval_checkpoint" in message


@pytest.mark.parametrize("verb,foreign", [("train", ["--checkpoint", "--input", "--split", "--experiment"]),
                                          ("decode", ["--config", "--eval_checkpoint", "--json", "--split"]),
                                          ("evaluate", ["--config", "--input", "--last", "--eval_splits"]),
                                          ("sweep", ["--config", "--checkpoint", "--input", "--split"])])
def test_help_names_the_verb_and_lists_only_its_flags(quick, verb, foreign):
    proc = quick[f"help_{verb}"]
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: transformer-jax {verb} [flags]")
    assert f"`transformer-jax {verb}`:" in proc.stdout  # the description
    assert "--workdir:" in proc.stdout
    for flag in foreign:
        assert f"  {flag}:" not in proc.stdout and f"  --[no]{flag[2:]}:" not in proc.stdout, flag
    assert sys.executable not in proc.stdout


def test_help_flags_are_the_verbs_declared_flags():
    from transformer_jax.launch import decode, describe, evaluate, sweep

    assert set(cli.command_flags(train_cli)) >= {"config", "workdir", "eval_checkpoint", "eval_splits", "json"}
    assert "checkpoint" not in cli.command_flags(train_cli)
    assert "config" not in cli.command_flags(sweep) and "config" not in cli.command_flags(decode)
    assert "config" in cli.command_flags(describe) and "split" in cli.command_flags(evaluate)


def test_a_checkpoint_the_run_will_not_have_is_refused_before_training(quick):
    """tiny saves at steps 10 and 20: avg5 was found only after training."""
    message = one_line_error(quick["avg5"])
    assert "--eval_checkpoint=avg5" in message and "N <= 2" in message
    assert not os.path.exists(workdir_of(quick["avg5"]))


def test_missing_test_files_are_refused_before_training(quick):
    message = one_line_error(quick["test_files"])
    assert "File not found" in message and "missing.en" in message
    assert not os.path.exists(workdir_of(quick["test_files"]))


def test_a_workdir_that_is_a_file_is_refused(quick):
    assert "is a file, not a folder" in one_line_error(quick["workdir_file"])


def test_a_branch_needs_a_run_and_a_step(quick):
    """--branch_step alone, or a --branch_from that is no run: one line each, nothing written."""
    assert "--branch_from and --branch_step go together" in one_line_error(quick["branch_half"])
    message = one_line_error(quick["branch_nothing"])
    assert "No config.json in" in message and "no_run" in message
    for name in ("branch_half", "branch_nothing"):
        assert not os.path.exists(workdir_of(quick[name]))


def test_a_config_file_that_cannot_be_loaded_is_one_line(quick):
    message = one_line_error(quick["no_config"])
    assert quick["no_config"].returncode == 2
    assert message.startswith("transformer-jax train: --config:") and "no_such_config.py" in message


def test_check_eval_checkpoint_follows_the_step_schedule():
    t = ml_collections.ConfigDict(dict(checkpoint_every_steps=10, num_steps=45, keep_checkpoints=3))  # 30, 40, 45
    for spec in ("latest", "avg1", "avg3", "30", "45"):
        check_eval_checkpoint(spec, t)
    for spec, match in [("avg4", "keep 3 checkpoints"), ("20", "no checkpoint at step 20"), ("50", "step 50"),
                        ("best", "use latest, a step number, or avgN"), ("avg0", "N <= 3")]:
        with pytest.raises(ValueError, match=match):
            check_eval_checkpoint(spec, t)


def test_a_failed_start_leaves_the_workdir_as_it_was_and_the_corrected_rerun_trains(corpus, tmp_path):
    """Misaligned files (in a new folder) and a vocabulary too large for the corpus (in a folder that already holds
    a file), started together: one line each, no config.json lock and no provenance record; then the corrected
    command trains in the same workdir, and running it again on the finished run re-scores it with its training
    figures (not null)."""
    fresh, workdir = tmp_path / "fresh", tmp_path / "run"
    src, tgt = corpus["train"].split(",")
    with open(tgt, encoding="utf-8") as f:
        lines = f.readlines()
    short = tmp_path / "short.de"
    short.write_text("".join(lines[:-1]), encoding="utf-8")
    workdir.mkdir()
    (workdir / "notes.txt").write_text("mine\n")  # a folder that held something before the start

    def train_in(folder) -> list[str]:
        return ["train", f"--config={TINY}", f"--workdir={folder}", "--eval_splits=", "--json"]

    base = train_in(workdir)
    refused = run_all({"misaligned": [*train_in(fresh), *text_args({**corpus, "train": f"{src},{short}"})],
                       "too_big": [*base, *text_args(corpus), "--config.model.vocab_size=100000"]})
    assert "are not aligned" in one_line_error(refused["misaligned"])
    assert not fresh.exists()
    assert "Set config.model.vocab_size <=" in one_line_error(refused["too_big"])
    assert sorted(os.listdir(workdir)) == ["notes.txt"]  # no config.json, vocab.model, provenance.jsonl, ...

    first, = run_all({"run": [*base, *text_args(corpus)]}).values()
    assert first.returncode == 0, first.stderr
    trained = json.loads(first.stdout.strip().splitlines()[-1])
    assert trained["step"] == 20 and trained["train_loss"] is not None and trained["dev_ppl"] is not None

    again, = run_all({"run": [*base, *text_args(corpus)]}).values()
    assert again.returncode == 0, again.stderr
    rescored = json.loads(again.stdout.strip().splitlines()[-1])
    assert rescored["step"] == 20
    assert rescored["train_loss"] == pytest.approx(trained["train_loss"])
    assert rescored["dev_ppl"] == pytest.approx(trained["dev_ppl"])
    with open(workdir / "provenance.jsonl") as f:
        assert len(f.readlines()) == 2  # the two starts that ran, not the refused ones


def test_every_command_imports_beside_the_others():
    """absl's flags are one namespace: two commands defining a flag of the same name (attention's --target sentence
    and compile's --target slice did) fail at import; shared names are defined once (launch/flags.py, a Verb's
    flag_help)."""
    import subprocess
    import sys

    from transformer_jax.launch.cli import COMMANDS

    program = "import importlib\n" + "".join(f"importlib.import_module('transformer_jax.launch.{c}')\n" for c in COMMANDS)
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]


def test_every_command_declares_its_verb():
    """launch/cli.py reads one typed ``VERB`` per command (launch/verbs.py) instead of optional module attributes
    (POSITIONAL, OVERRIDES, FLAG_HINTS, FLAG_HELP) that a typo turned into a silent default."""
    import importlib
    import types

    from transformer_jax.launch.verbs import Verb

    for command in cli.COMMANDS:
        module = importlib.import_module(f"transformer_jax.launch.{command}")
        verb = cli.verb_of(module)
        assert isinstance(verb, Verb) and verb.name == command
        assert set(verb.flag_help) <= set(cli.command_flags(module)), command  # help for a flag it takes
        assert not {"POSITIONAL", "OVERRIDES", "FLAG_HINTS", "FLAG_HELP"} & set(vars(module)), command
    with pytest.raises(TypeError, match="declares no VERB"):
        cli.verb_of(types.ModuleType("transformer_jax.launch.nothing"))
    with pytest.raises(ValueError, match="positional"):
        Verb("decode", positional="FILES")
