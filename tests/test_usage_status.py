"""Exit statuses of the commands: a refused command line is status 2 with one line on stderr, in every verb.

The rule: status 2 when the command line itself is wrong — a flag or argument missing, unknown, malformed, out of
range, or contradicting another flag or the config it names — found before any work; status 1 when the command
line is right but the work cannot be done with what is on disk or installed (no run or checkpoint there, data that
cannot be read, a compiler not installed, a program that does not fit, a failed row). The command lines start
together as subprocesses (each pays the JAX import) and are all refused before any work.
"""

import subprocess

import pytest

from cli_runs import run_all

USAGE = {
    "train_splits": ["train", "--config=tiny", "--eval_splits=valid", "--workdir={tmp}/train_splits"],
    "train_avg": ["train", "--config=tiny", "--eval_checkpoint=avg50", "--workdir={tmp}/train_avg"],
    "train_branch": ["train", "--config=tiny", "--branch_step=4", "--workdir={tmp}/train_branch"],
    "sweep_workdir": ["sweep", "--experiment=table3", "--rows=base", "--launcher=print"],
    "sweep_row": ["sweep", "--experiment=table3", "--rows=Z9", "--launcher=print", "--workdir={tmp}/sweep"],
    "compile_target": ["compile", "--config=tiny"],
    "compile_buckets": ["compile", "--config=tiny", "--target=local", "--buckets=long"],
    "describe_target": ["describe", "--config=tiny", "--target=v5e-3"],
    "compare_nothing": ["compare"],
    "attention_twice": ["attention", "--workdir={tmp}/run", "--input=A dog.", "--split=dev", "--index=1",
                        "--out={tmp}/att"],
    "evaluate_split": ["evaluate", "--workdir={tmp}/run"],
    "evaluate_grid_test": ["evaluate", "--workdir={tmp}/run", "--split=test", "--grid=decode.beam_size=1,4"],
    "decode_workdir": ["decode", "--input={tmp}/in.txt"],
    "decode_checkpoint": ["decode", "--workdir={tmp}/run", "--checkpoint=best"],
    "average_workdir": ["average", "--last=5"],
}
RUNTIME = {  # well-formed command lines whose work cannot be done: status 1
    "compare_no_run": ["compare", "{tmp}"],
}


@pytest.fixture(scope="module")
def procs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("usage")
    return run_all({name: [arg.format(tmp=tmp) for arg in args] for name, args in {**USAGE, **RUNTIME}.items()})


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr and not proc.stdout.strip(), proc.stderr
    return lines[0]


@pytest.mark.parametrize("name", list(USAGE))
def test_a_refused_command_line_is_status_2_and_one_line(procs, name):
    proc = procs[name]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert one_line(proc).startswith(f"transformer-jax {USAGE[name][0]}")


def test_the_lines_say_what_to_change(procs):
    assert "--eval_splits: unknown split 'valid'" in one_line(procs["train_splits"])
    assert "--eval_checkpoint=avg50" in one_line(procs["train_avg"])
    assert "--branch_from and --branch_step go together" in one_line(procs["train_branch"])
    assert "--workdir is required" in one_line(procs["sweep_workdir"])
    assert "Z9" in one_line(procs["sweep_row"])
    assert "--target is required" in one_line(procs["compile_target"])
    assert "--buckets=long: give row lengths" in one_line(procs["compile_buckets"])
    assert "given twice" in one_line(procs["attention_twice"])


def test_work_that_cannot_be_done_is_status_1(procs):
    proc = procs["compare_no_run"]  # (the folder's "Skipping" note comes first)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "transformer-jax compare: none of the folders is a run (no config.json)."
