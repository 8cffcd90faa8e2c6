"""Tests for experiments/ and `transformer-jax sweep`: rows on every base, the launch files (golden), the printed
command rebuilding exactly the in-process config, and a 2-row local sweep of configs/tiny.py end to end.

Golden files (tests/golden/sweep_*) were reviewed once; UPDATE_GOLDEN=1 rewrites them after a deliberate change.
Paths in them are relative to the repository root (the sbatch --chdir line is normalised to /path/to/repo).
"""

import dataclasses
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from absl import flags
from ml_collections import config_flags

from cli_runs import REPO, run_all
from transformer_jax.configs import multi30k_search, table3, window
from transformer_jax.evaluate import report
from transformer_jax.experiments import EXPERIMENTS, base_name, get_experiment, resolve, select_rows
from transformer_jax.launch import sweep
from transformer_jax.model.size import count_parameters
from transformer_jax.run import folder, provenance

GOLDEN = os.path.join(REPO, "tests", "golden")
NORMALISED_REPO = "/path/to/repo"
TABLE3 = get_experiment("table3")
BASES = ("base", "demo", "multi30k", "tiny")


def check_golden(name: str, text: str) -> None:
    path = os.path.join(GOLDEN, name)
    if os.environ.get("UPDATE_GOLDEN"):
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        assert text == f.read(), f"differs from tests/golden/{name} (UPDATE_GOLDEN=1 rewrites it)"


def cli_config(argv: list[str]):
    """The config `transformer-jax train` builds from ``argv`` (its --config and --config.x.y arguments)."""
    args = ["prog", *(a for a in argv if a.startswith("--config"))]
    fv = flags.FlagValues()
    holder = config_flags.DEFINE_config_file("config", flag_values=fv, sys_argv=args)
    fv(args)
    return holder.value


@pytest.fixture
def in_repo(monkeypatch):
    """Commands are printed relative to the current folder: run from the repository root, as a user would."""
    monkeypatch.chdir(REPO)


# --- experiments/ -------------------------------------------------------------------------------------------------


def test_every_experiment_loads():
    for name in EXPERIMENTS:
        experiment = get_experiment(name)
        assert experiment.name == name and experiment.rows and experiment.default_base
    with pytest.raises(ValueError, match="table3"):
        get_experiment("table9")


def test_rows_are_table3_apply_row_on_every_base():
    """No second copy of the row logic: each row is configs/table3.py's on the chosen base, in the table's order
    (the rows' values are tests/test_configs.py's)."""
    for base in BASES:
        configs = resolve(TABLE3, base)
        assert list(configs) == list(table3.ROWS)
        for row, c in configs.items():
            assert c.to_dict() == table3.get_config(f"{row},base={base}").to_dict(), (base, row)
    for row, c in resolve(TABLE3, "configs/demo.py").items():  # a base given by its path
        assert c.to_dict() == table3.get_config(f"{row},base=demo").to_dict()
    assert set(TABLE3.paper) == set(table3.PAPER)
    assert TABLE3.paper["C4"] == {"dev_ppl": 5.75, "dev_bleu": 24.5, "params_m": 28}


@pytest.mark.parametrize("name,module", [("window", window), ("multi30k_search", multi30k_search)])
def test_other_experiments_rebuild_each_row_from_its_config_file(name, module):
    """window and multi30k_search: each row resolved by the sweep is the one its configs/ file rebuilds on the
    command line (what a launcher runs), tagged with its row, and every row has a note for compare."""
    experiment = get_experiment(name)
    configs = resolve(experiment, "tiny")
    assert list(configs) == list(module.ROWS) and set(experiment.notes) == set(module.ROWS)
    for row, c in configs.items():
        assert c.to_dict() == module.get_config(f"{row},base=tiny").to_dict(), row
        assert c.sweep_row == row and c.name == f"tiny/{row}"


def test_window_rows_set_only_the_window():
    configs = resolve(get_experiment("window"), "demo_table3")
    base = window.load_base("demo_table3").to_dict()
    for row, c in configs.items():
        changed = {k: v for k, v in c.model.to_dict().items() if base["model"][k] != v}
        assert changed == ({} if row == "full" else {"attention_window": int(row[1:])}), row
        assert {k: v for k, v in c.to_dict().items() if k not in ("model", "name", "sweep_row")} == \
            {k: v for k, v in base.items() if k not in ("model", "name")}


def test_tiny_rows_keep_h_times_dk():
    a4 = resolve(TABLE3, "tiny", "A4")["A4"].model
    assert (a4.num_heads, a4.d_k, a4.d_v) == (32, 1, 1)


def test_row_selection_expands_groups_in_table_order():
    assert select_rows(TABLE3, "C,B1,A") == ["A1", "A2", "A3", "A4", "B1", "C1", "C2", "C3", "C4", "C5", "C6", "C7"]
    assert select_rows(TABLE3, ["D", "D1", "base"]) == ["base", "D1", "D2", "D3", "D4"]
    assert select_rows(TABLE3, "E,big") == ["E", "big"]  # E is a row (no group of that name needed)
    assert select_rows(TABLE3, None) == select_rows(TABLE3, "") == list(table3.ROWS)
    assert TABLE3.groups["C"] == [f"C{i}" for i in range(1, 8)]


def test_unknown_row_lists_the_valid_ones():
    with pytest.raises(ValueError, match="'Z9'") as err:
        select_rows(TABLE3, "A,Z9")
    for row in table3.ROWS:
        assert row in str(err.value)
    assert "A (A1..A4)" in str(err.value)


def test_base_by_name_or_path(tmp_path):
    assert base_name(TABLE3, None) == "base"
    assert base_name(TABLE3, "demo") == base_name(TABLE3, os.path.join(REPO, "configs", "demo.py")) == "demo"
    outside = tmp_path / "mine.py"
    outside.write_text("def get_config(): pass\n")
    with pytest.raises(ValueError, match="module of configs/"):
        base_name(TABLE3, str(outside))
    with pytest.raises(ValueError, match="does not exist"):
        base_name(TABLE3, "configs/nope.py")
    with pytest.raises(ValueError, match="no_such_config"):
        resolve(TABLE3, "no_such_config", "B1")


def test_overrides_apply_after_the_row():
    c = resolve(TABLE3, "demo", "A1", {"model.num_heads": 2, "train.num_steps": 9})["A1"]
    assert (c.model.num_heads, c.model.d_k, c.train.num_steps) == (2, 128, 9)
    with pytest.raises(ValueError, match="model.d_modell"):
        resolve(TABLE3, "demo", "A1", {"model.d_modell": 3})


# --- launch files -------------------------------------------------------------------------------------------------

PRINT_ARGS = ["--experiment=table3", "--base=configs/demo.py", "--rows=base,A,B1,E", "--workdir=runs/table3_demo",
              "--launcher=print", "--config.train.num_steps=500", "--config.decode.method=greedy"]
PRINT_OVERRIDES = {"train.num_steps": 500, "decode.method": "greedy"}
SLURM_ARGS = ["--rows=B1,C4", "--launcher=slurm", "--slurm_nodes=2", "--slurm_gpus_per_node=8",
              "--slurm_time=12:00:00", "--slurm_partition=gpu", "--env_setup=source venv/bin/activate"]
SLURM_OPTIONS = sweep.SlurmOptions(2, 8, "12:00:00", "gpu", "source venv/bin/activate")
TPU_ARGS = ["--rows=C1,big", "--launcher=tpu", "--tpu_name=t3-pod", "--tpu_zone=us-central2-b",
            "--env_setup=source venv/bin/activate"]


def print_output(rows: str, base: str, workdir: str, overrides: dict) -> str:
    return "".join(shlex.join(sweep.train_argv(TABLE3, row, base, workdir, overrides)) + "\n"
                   for row in select_rows(TABLE3, rows))


def test_print_launcher_golden(in_repo):
    check_golden("sweep_print.txt", print_output("base,A,B1,E", "demo", "runs/table3_demo", PRINT_OVERRIDES))


@pytest.mark.parametrize("row", ["B1", "C4"])
def test_slurm_script_golden(in_repo, row):
    argv = sweep.train_argv(TABLE3, row, "base", "runs/table3")
    script = sweep.slurm_script(argv, TABLE3, row, "runs/table3", SLURM_OPTIONS)
    check_golden(f"sweep_slurm_{row}.sbatch", script.replace(REPO, NORMALISED_REPO))


def test_tpu_launcher_golden(in_repo):
    lines = [sweep.tpu_command(sweep.train_argv(TABLE3, row, "base", "runs/table3"), "t3-pod", "us-central2-b",
                               "transformer_jax", "source venv/bin/activate") for row in ("C1", "big")]
    check_golden("sweep_tpu.txt", "# One command per row; each uses the whole pod slice, so run them one after "
                                  "another.\n" + "".join(line + "\n" for line in lines))


def test_slurm_script_quotes_every_value(tmp_path, monkeypatch):
    """A workdir and a current folder with spaces and quotes: bash reads the script, and every value (#SBATCH
    --output/--chdir/--partition, the srun command) reads back as given."""
    here = tmp_path / "the \"lab's\" repo"
    here.mkdir()
    monkeypatch.chdir(here)
    workdir = "runs/it's a \"table\" 3"
    argv = sweep.train_argv(TABLE3, "B1", "base", workdir, {"data.train_files": "a b.en,c'd.de"})
    options = sweep.SlurmOptions(1, 8, "12:00:00", "gpu a100", "source 'my venv/bin/activate'")
    script = sweep.slurm_script(argv, TABLE3, "B1", workdir, options)
    path = tmp_path / "B1.sbatch"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], check=False, capture_output=True).returncode == 0
    sbatch = dict(line.removeprefix("#SBATCH ").split("=", 1) for line in script.splitlines()
                  if line.startswith("#SBATCH --") and "=" in line)
    assert shlex.split(sbatch["--output"]) == [os.path.join(workdir, "slurm", "B1-%j.log")]
    assert shlex.split(sbatch["--chdir"]) == [str(here)]
    assert shlex.split(sbatch["--partition"]) == ["gpu a100"]
    (srun,) = [line for line in script.splitlines() if line.startswith("srun ")]
    assert shlex.split(srun)[2:] == argv


def test_tpu_command_quotes_the_remote_folder():
    argv = sweep.train_argv(TABLE3, "C1", "base", "runs/my table3")
    line = sweep.tpu_command(argv, "t3-pod", "us-central2-b", "my repo", "source 'v env/bin/activate'")
    remote = shlex.split(line)[-1].removeprefix("--command=")
    cd, setup, train = remote.split(" && ")
    assert shlex.split(cd) == ["cd", "my repo"] and shlex.split(train) == argv
    assert setup == "source 'v env/bin/activate'"  # a shell command of the user's: written as given


@pytest.mark.parametrize("field", ["partition", "time", "env_setup"])
def test_a_line_break_in_a_launch_file_value_is_refused(field):
    argv = sweep.train_argv(TABLE3, "B1", "base", "runs/table3")
    options = dataclasses.replace(SLURM_OPTIONS, **{field: "gpu\n#SBATCH --wrap=evil"})
    with pytest.raises(ValueError, match="must be one line"):
        sweep.slurm_script(argv, TABLE3, "B1", "runs/table3", options)
    with pytest.raises(ValueError, match="must be one line"):  # e.g. from an override's value
        sweep.slurm_script(sweep.train_argv(TABLE3, "B1", "base", "runs/a\nb"), TABLE3, "B1", "runs/a\nb",
                           SLURM_OPTIONS)
    with pytest.raises(ValueError, match="must be one line"):
        sweep.tpu_command(argv, "t3-pod", "us-central2-b", "repo\nrm -rf ~", None)


def test_override_args_round_trip_types():
    args = sweep.override_args({"a.b": 1, "c": 0.5, "d": True, "e": False, "f": "learned"})
    assert args == ["--config.a.b=1", "--config.c=0.5", "--config.d=true", "--config.e=false", "--config.f=learned"]
    with pytest.raises(TypeError, match="only int"):
        sweep.override_args({"x": (1, 2)})


OVERRIDES = {"train.num_steps": 5, "model.positional": "learned", "data.pack": False,
             "train.learning_rate_scale": 0.5, "decode.batch_size": 7, "train.eval_bleu": True}


@pytest.mark.parametrize("base,overrides", [("base", {}), ("demo", OVERRIDES), ("tiny", OVERRIDES),
                                            ("multi30k", {"train.num_steps": 3})])
def test_printed_command_rebuilds_the_in_process_config(in_repo, base, overrides):
    """What a launcher runs (`transformer-jax train --config=configs/table3.py:ROW,base=NAME ...`) is exactly the
    config the local launcher trains, for every row."""
    for row, config in resolve(TABLE3, base, None, overrides).items():
        argv = sweep.train_argv(TABLE3, row, base, "runs/x", overrides)
        assert argv[:3] == ["transformer-jax", "train", f"--config=configs/table3.py:{row},base={base}"]
        assert argv[3] == f"--workdir={os.path.join('runs/x', row)}"
        assert cli_config(argv).to_dict() == config.to_dict(), row


def test_eval_checkpoint_reaches_every_launcher(in_repo):
    """`sweep --eval_checkpoint=avg5` puts the flag in each row's train command (Slurm, TPU and print run it)."""
    assert "--eval_checkpoint" not in " ".join(sweep.train_argv(TABLE3, "B1", "base", "runs/x"))
    argv = sweep.train_argv(TABLE3, "B1", "base", "runs/x", {"train.num_steps": 5}, "avg5")
    assert argv[4:] == ["--eval_checkpoint=avg5", "--config.train.num_steps=5"]
    assert cli_config(argv).train.num_steps == 5


def test_eval_splits_reach_every_launcher(quick):
    """`sweep --eval_splits=dev` (a recipe search that must not look at test) is in each row's train command and
    what a local sweep scores; the default (dev, test) adds nothing to the command."""
    argv = sweep.train_argv(TABLE3, "B1", "base", "runs/x", None, "avg5", ["dev"])
    assert argv[4:] == ["--eval_checkpoint=avg5", "--eval_splits=dev"]
    assert "--eval_splits" not in " ".join(sweep.train_argv(TABLE3, "B1", "base", "runs/x", None, "avg5"))
    proc = quick["eval_splits"]
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("--workdir=w/B1 --eval_splits=dev"), proc.stdout


def test_every_sweep_flag_has_help():
    names = [f.name for f in flags.FLAGS.get_key_flags_for_module(sweep)]
    assert {"experiment", "rows", "base", "launcher", "slurm_nodes", "slurm_gpus_per_node", "slurm_time",
            "slurm_partition", "tpu_name", "tpu_zone"} <= set(names)
    for name in names:
        assert len(flags.FLAGS[name].help) > 10, name


# --- the command line -----------------------------------------------------------------------------------------------


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_all({"sweep": ["sweep", *args]}, env=env)["sweep"]


def compilation_cache(tmp_path) -> dict:
    """A persistent XLA cache for one test: rows share their init, eval and decode programs (compiled once)."""
    return {"JAX_COMPILATION_CACHE_DIR": str(tmp_path / "xla_cache"), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """The launchers that only write (print, slurm, tpu) and the flag errors only main() finds, started together
    (each pays the jax import). The row and base errors are select_rows' and base_name's, tested above."""
    tmp = tmp_path_factory.mktemp("quick")
    commands = {
        "print": PRINT_ARGS,
        "slurm": [*SLURM_ARGS, f"--workdir={tmp / 'table3'}"],
        "tpu": [*TPU_ARGS, "--workdir=runs/table3"],
        "no_workdir": ["--launcher=print"],
        "tpu_name": ["--launcher=tpu", "--workdir=w"],
        "config": ["--config=configs/demo.py", "--launcher=print", "--workdir=w"],
        "eval_splits": ["--launcher=print", "--workdir=w", "--rows=B1", "--eval_splits=dev"],
        "bad_split": ["--launcher=print", "--workdir=w", "--eval_splits=dev,valid"],
        "line_break": ["--rows=B1,C4", "--launcher=slurm", f"--workdir={tmp / 't3'}",
                       "--slurm_partition=gpu\n#SBATCH --wrap=evil"],
    }
    return run_all({name: ["sweep", *args] for name, args in commands.items()})


def test_cli_print_is_the_golden_output(quick):
    proc = quick["print"]
    assert proc.returncode == 0, proc.stderr
    with open(os.path.join(GOLDEN, "sweep_print.txt")) as f:
        assert proc.stdout == f.read()


def test_cli_slurm_writes_the_golden_scripts(quick):
    proc = quick["slurm"]
    assert proc.returncode == 0, proc.stderr
    workdir = next(a for a in proc.args if a.startswith("--workdir=")).removeprefix("--workdir=")

    def normalise(text: str) -> str:  # the run folder as if given as runs/table3
        return text.replace(workdir, "runs/table3").replace(REPO, NORMALISED_REPO)

    check_golden("sweep_slurm.txt", normalise(proc.stdout))
    for row in ("B1", "C4"):
        with open(os.path.join(GOLDEN, f"sweep_slurm_{row}.sbatch")) as f:
            assert normalise(Path(workdir, "slurm", f"{row}.sbatch").read_text()) == f.read()


def test_cli_tpu_is_the_golden_output(quick):
    proc = quick["tpu"]
    assert proc.returncode == 0, proc.stderr
    with open(os.path.join(GOLDEN, "sweep_tpu.txt")) as f:
        assert proc.stdout == f.read()


@pytest.mark.parametrize("case,message", [("no_workdir", "--workdir is required"),
                                          ("tpu_name", "--tpu_name and --tpu_zone"),
                                          ("config", "not --config"),
                                          ("bad_split", "--eval_splits: unknown split 'valid'")])
def test_cli_errors_are_one_clear_line(quick, case, message):
    proc = quick[case]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert message in line, line


def test_cli_refuses_a_line_break_before_writing_any_launch_file(quick):
    proc = quick["line_break"]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [(
        "transformer-jax sweep: --slurm_partition must be one line (it is written into a launch file): "
        "'gpu\\n#SBATCH --wrap=evil'.")]
    workdir = next(a for a in proc.args if a.startswith("--workdir=")).removeprefix("--workdir=")
    assert not os.path.exists(workdir)


# --- a local sweep, end to end ------------------------------------------------------------------------------------


def test_local_sweep_two_rows_end_to_end(in_repo, tmp_path, capsys):
    """`sweep --base=tiny --rows=base,D1` (5 steps each): trained, scored, skipped when run again, compared."""
    workdir = str(tmp_path / "table3")
    overrides = {"train.num_steps": 5, "decode.batch_size": 32, "train.checkpoint_every_steps": 2}
    proc = cli("--base=tiny", "--rows=base,D1", f"--workdir={workdir}", "--eval_checkpoint=avg2",
               *sweep.override_args(overrides), env=compilation_cache(tmp_path))
    assert proc.returncode == 0, proc.stderr
    summaries = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [(s["row"], s["step"]) for s in summaries] == [("base", 5), ("D1", 5)]
    assert f"compare them with: transformer-jax compare {workdir}/*" in proc.stdout
    configs = resolve(TABLE3, "tiny", "base,D1", overrides)
    for row, config in configs.items():
        rundir = os.path.join(workdir, row)
        assert folder.is_finished(rundir, 5)
        with open(os.path.join(rundir, "config.json")) as f:  # trained = in-process = the printed command's config
            saved = json.load(f)
        assert saved == json.loads(config.to_json_best_effort())
        assert saved == json.loads(cli_config(sweep.train_argv(TABLE3, row, "tiny", workdir, overrides))
                                   .to_json_best_effort())
        (start,) = provenance.read(rundir)  # the row's own train command, with the commit and the machine
        assert start["command"] == shlex.join(sweep.train_argv(TABLE3, row, "tiny", workdir, overrides, "avg2"))
        with open(os.path.join(rundir, "eval_test.json")) as f:  # scored with the mean of steps 4 and 5 (§6.1)
            assert json.load(f)["checkpoint"] == "avg2 (steps 4, 5)"
        assert start["machine"]["cpu_count"] == os.cpu_count() and start["machine"]["devices"] == "1 × cpu"
    assert sweep.run_local(configs, workdir, {}) == {}  # finished rows are skipped (no training, no JAX)
    assert capsys.readouterr().out.count("finished, skipping") == 2
    rows = report.build_rows([report.collect_run(os.path.join(workdir, r)) for r in ("D1", "base")], TABLE3.paper)
    assert [(r["run"], r["in_progress"], r["step"]) for r in rows] == [("base", False, 5), ("D1", False, 5)]
    assert all(r["test_bleu"] is not None and r["dev_ppl"] > 1 for r in rows)
    assert [r["params_m"] * 1e6 for r in rows] == [count_parameters(configs[r].model)["total"] for r in ("base", "D1")]


@pytest.mark.slow
def test_local_sweep_resumes_a_half_finished_row(tmp_path):
    """The CLI, twice: a row interrupted at step 10 of 20 resumes there and finishes; the finished one is skipped."""
    from transformer_jax.train.trainer import train

    workdir = tmp_path / "table3"
    config = resolve(TABLE3, "tiny", "C4")["C4"]
    train(config, str(workdir / "C4"), progress=False, stop_after=10)
    assert folder.checkpoint_steps(str(workdir / "C4")) == [10]
    proc = cli("--base=tiny", "--rows=C4,D3", f"--workdir={workdir}", env=compilation_cache(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "Resumed from step 10" in proc.stderr
    for row in ("C4", "D3"):
        assert folder.is_finished(str(workdir / row), 20)
    steps = [json.loads(line)["step"] for line in (workdir / "C4" / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(steps) and steps[-1] == 20
    again = cli("--base=tiny", "--rows=C4,D3", f"--workdir={workdir}")
    assert again.returncode == 0 and again.stdout.count("finished, skipping") == 2


def test_preempted_commands_exit_143(capsys):
    """`train` and `sweep` stopped by SIGTERM (checkpoint saved) exit as a shell reports SIGTERM, with one line."""
    from transformer_jax.launch import cluster
    from transformer_jax.train.preemption import Preempted

    with pytest.raises(SystemExit) as exit_info:
        cluster.exit_preempted("sweep", Preempted(1234))
    assert exit_info.value.code == 143
    assert capsys.readouterr().err == ("transformer-jax sweep: stopped by SIGTERM after step 1234; its checkpoint "
                                       "is saved — run the same command again to resume\n")
