r"""`transformer-jax sweep`: run a named experiment (e.g. the paper's Table 3), or write its cluster launch files.

    transformer-jax sweep --experiment=table3 --base=demo_table3 --rows=A,B1,C --workdir=runs/table3_demo   # here, in turn
    transformer-jax sweep --experiment=table3 --workdir=runs/table3 --launcher=slurm --slurm_gpus_per_node=8
    transformer-jax sweep --experiment=table3 --workdir=runs/table3 --launcher=tpu --tpu_name=v4-32 --tpu_zone=...
    transformer-jax sweep --experiment=table3 --base=demo --workdir=runs/t3 --launcher=print --config.train.num_steps=500

Each row runs in ``<workdir>/<row>`` as ``transformer-jax train --config=configs/table3.py:ROW,base=NAME`` (plus
the --config.x.y overrides given here), so every launcher trains exactly the config printed by --launcher=print.
``local`` trains the rows one after another in this process, skipping finished rows (last checkpoint at num_steps
and eval_test.json written) and resuming a half-finished one; then `transformer-jax compare <workdir>/*`.
``--eval_checkpoint=avg5`` scores each row with the average of its last 5 checkpoints (§6.1) instead of the latest.
Every value written into a launch file is shell-quoted; a value with a line break is refused.
"""

import dataclasses
import json
import logging
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from absl import flags

from transformer_jax.experiments import Experiment, base_name, get_experiment, resolve
from transformer_jax.launch import cluster, logs
from transformer_jax.launch.flags import (
    EVAL_CHECKPOINT,
    EVAL_SPLITS,
    EXPERIMENT,
    SCORED_SPLITS,
    WORKDIR,
    check_eval_checkpoint,
    check_eval_splits,
)
from transformer_jax.launch.verbs import Verb, refuse
from transformer_jax.train.preemption import Preempted

LAUNCHERS = ("local", "slurm", "tpu", "print")

ROWS = flags.DEFINE_list("rows", None, "Rows to run: names and group letters, e.g. A,B1,C (A = A1..A4); "
                                       "default: every row.")
BASE = flags.DEFINE_string("base", None, "Base config the rows apply to: a name (demo) or a file of configs/ "
                                         "(configs/demo.py); default: the experiment's (table3: configs/base.py).")
LAUNCHER = flags.DEFINE_enum(
    "launcher", "local", LAUNCHERS, "local: train the rows here, one after another; slurm: write "
    "<workdir>/slurm/<row>.sbatch and print the sbatch commands; tpu: print one Cloud TPU pod command per row; "
    "print: print the train command of each row.")
SLURM_NODES = flags.DEFINE_integer("slurm_nodes", 1, "Slurm: nodes per row (#SBATCH --nodes).", lower_bound=1)
SLURM_GPUS_PER_NODE = flags.DEFINE_integer(
    "slurm_gpus_per_node", 8, "Slurm: GPUs per node; one process (task) per GPU.", lower_bound=1)
SLURM_TIME = flags.DEFINE_string("slurm_time", "24:00:00", "Slurm: time limit per row (#SBATCH --time).")
SLURM_PARTITION = flags.DEFINE_string("slurm_partition", None, "Slurm: partition (#SBATCH --partition); "
                                                               "default: the cluster's.")
TPU_NAME = flags.DEFINE_string("tpu_name", None, "Cloud TPU: name of the TPU VM (pod slice) to run on.")
TPU_ZONE = flags.DEFINE_string("tpu_zone", None, "Cloud TPU: zone of the TPU VM, e.g. us-central2-b.")
TPU_REPO = flags.DEFINE_string("tpu_repo", "transformer_jax",
                               "Cloud TPU: checkout of this repository on every worker (relative to the home folder).")
ENV_SETUP = flags.DEFINE_string("env_setup", None, "Slurm/TPU: shell command run before training on each node, "
                                                   "e.g. 'source venv/bin/activate'.")

for _name in ("experiment", "workdir", "eval_checkpoint", "eval_splits", *cluster.FLAG_NAMES):
    flags.declare_key_flag(_name)
VERB = Verb(
    "sweep",
    overrides="override a field of every row's config, e.g. --config.train.num_steps=500 (rows apply to --base).",
    flag_hints={"config": "sweep takes --base=NAME (and --config.x.y=value overrides), not --config."})

COMMAND = "transformer-jax"
logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SlurmOptions:
    nodes: int = 1
    gpus_per_node: int = 8
    time: str = "24:00:00"
    partition: str | None = None
    env_setup: str | None = None


def _cli_path(path: str) -> str:
    """``path`` relative to the current folder when it lies inside it (commands then read the same anywhere)."""
    relative = os.path.relpath(os.path.abspath(path))
    return path if relative.startswith(os.pardir) else relative


def override_args(overrides: Mapping[str, Any]) -> list[str]:
    """``{"train.num_steps": 5}`` → ``["--config.train.num_steps=5"]`` (what config_flags parses back)."""
    args = []
    for path, value in overrides.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif not isinstance(value, (int, float, str)):
            raise TypeError(f"--config.{path}: only int, float, bool and str overrides can be passed to each row.")
        args.append(f"--config.{path}={value}")
    return args


def train_argv(experiment: Experiment, row: str, base: str, workdir: str,
               overrides: Mapping[str, Any] | None = None, eval_checkpoint: str = "latest",
               eval_splits: Sequence[str] = SCORED_SPLITS) -> list[str]:
    """The `transformer-jax train` command (as argv) that trains ``row`` of ``experiment`` on base ``base``."""
    config = f"{_cli_path(experiment.config_file)}:{experiment.config_arg(row, base)}"
    scored = [] if eval_checkpoint == "latest" else [f"--eval_checkpoint={eval_checkpoint}"]
    if tuple(eval_splits) != SCORED_SPLITS:
        scored.append(f"--eval_splits={','.join(eval_splits)}")
    return [COMMAND, "train", f"--config={config}", f"--workdir={os.path.join(workdir, row)}", *scored,
            *override_args(overrides or {})]


def one_line(what: str, *values: str | None) -> None:
    """Raises ValueError if a value to be written into a launch file has a line break (it would start a new shell
    command or a new #SBATCH line there)."""
    for value in values:
        if value is not None and ("\n" in str(value) or "\r" in str(value)):
            raise ValueError(f"{what} must be one line (it is written into a launch file): {value!r}.")


def slurm_script(argv: list[str], experiment: Experiment, row: str, workdir: str, options: SlurmOptions) -> str:
    """A Slurm batch script: one task per GPU on every node, each running the same train command.

    Every value is shell-quoted (sbatch reads #SBATCH arguments with shell-like quoting).

    Raises:
        ValueError: a value has a line break.
    """
    log = os.path.join(workdir, "slurm", f"{row}-%j.log")
    one_line("the train command", *argv)
    one_line("--workdir", workdir)
    one_line("the current folder (#SBATCH --chdir)", os.getcwd())
    one_line("--slurm_time", options.time)
    one_line("--slurm_partition", options.partition)
    one_line("--env_setup", options.env_setup)
    q = shlex.quote
    lines = ["#!/bin/bash",
             f"# {experiment.name} row {row}, written by `transformer-jax sweep --launcher=slurm`.",
             "# Submit it again to resume: training continues from the run's latest checkpoint.",
             f"#SBATCH --job-name={q(f'{experiment.name}-{row}')}",
             f"#SBATCH --nodes={options.nodes}",
             f"#SBATCH --gpus-per-node={options.gpus_per_node}",
             f"#SBATCH --ntasks-per-node={options.gpus_per_node}",
             f"#SBATCH --time={q(options.time)}",
             f"#SBATCH --output={q(log)}",
             f"#SBATCH --chdir={q(os.getcwd())}",
             "# 2 minutes before the time limit every task gets SIGTERM: it saves a checkpoint and stops.",
             "#SBATCH --signal=TERM@120"]
    if options.partition:
        lines.append(f"#SBATCH --partition={q(options.partition)}")
    lines += ["", "set -eo pipefail"]
    if options.env_setup:
        lines.append(options.env_setup)
    lines += ["# One process per GPU: jax.distributed.initialize() reads SLURM_* (launch/cluster.py) and gives each",
              "# process the GPU of its SLURM_LOCALID.",
              f"srun --kill-on-bad-exit=1 {shlex.join(argv)}", ""]
    return "\n".join(lines)


def tpu_command(argv: list[str], name: str, zone: str, repo: str, env_setup: str | None = None) -> str:
    """The command that starts ``argv`` on every worker of a Cloud TPU pod slice (every value shell-quoted; the
    remote command is quoted as a whole again for the local shell).

    Raises:
        ValueError: a value has a line break.
    """
    one_line("the train command", *argv)
    one_line("--tpu_name, --tpu_zone, --tpu_repo and --env_setup", name, zone, repo, env_setup)
    steps = [f"cd {shlex.quote(repo)}", *([env_setup] if env_setup else []), shlex.join(argv)]
    return (f"gcloud compute tpus tpu-vm ssh {shlex.quote(name)} --zone={shlex.quote(zone)} --worker=all "
            f"--command={shlex.quote(' && '.join(steps))}")


def flag_overrides() -> dict[str, Any]:
    """The --config.x.y=value overrides given on the command line (parsed by the shared --config flag)."""
    if flags.FLAGS["config"].present:
        raise ValueError("sweep takes --base=NAME (and --config.x.y=value overrides), not --config.")
    return dict(flags.FLAGS["config"].override_values)


def run_local(configs: dict, workdir: str, commands: dict[str, list[str]],
              eval_checkpoint: str = "latest", eval_splits: Sequence[str] = SCORED_SPLITS) -> dict[str, str]:
    """Trains and evaluates each row in turn (skipping finished rows); returns {row: error} for failed rows."""
    from transformer_jax.launch.train import run_training  # imported here: the other launchers need no model code
    from transformer_jax.run.folder import is_finished

    failed = {}
    for i, (row, config) in enumerate(configs.items(), 1):
        rundir = os.path.join(workdir, row)
        if is_finished(rundir, int(config.train.num_steps)):
            print(f"[{i}/{len(configs)}] {row}: finished, skipping ({rundir})")
            continue
        print(f"[{i}/{len(configs)}] {row}: training in {rundir}", flush=True)
        try:
            summary = run_training(config, rundir, tuple(eval_splits), eval_checkpoint, command=commands[row])
        except Preempted:  # SIGTERM stops the whole sweep; the row resumes when the sweep is run again
            raise
        except (ValueError, OSError) as e:  # a user mistake (bad data, a config clash): one line, no traceback
            logger.error("Row %s failed: %s", row, e)
            failed[row] = f"{type(e).__name__}: {e}"
            continue
        except Exception as e:  # one failed row (a NaN loss, a config clash) must not stop the sweep
            logger.exception("Row %s failed", row)
            failed[row] = f"{type(e).__name__}: {e}"
            continue
        print(json.dumps({"row": row, **summary}), flush=True)
    return failed


def main(argv: list[str]) -> None:
    del argv  # launch/cli.py refuses arguments
    if not WORKDIR.value:
        refuse("sweep", "--workdir is required (each row runs in <workdir>/<row>).")
    try:
        experiment = get_experiment(EXPERIMENT.value)
        base = base_name(experiment, BASE.value)
        overrides = flag_overrides()
        configs = resolve(experiment, base, ROWS.value, overrides)
        commands = {row: train_argv(experiment, row, base, WORKDIR.value, overrides, EVAL_CHECKPOINT.value,
                                    EVAL_SPLITS.value)
                    for row in configs}
        for config in configs.values():  # every launcher: a checkpoint the rows will not have is found now
            check_eval_checkpoint(EVAL_CHECKPOINT.value, config.train)
        check_eval_splits(EVAL_SPLITS.value)
        workdir, launcher = WORKDIR.value, LAUNCHER.value
        if launcher == "slurm":  # written only once every script could be made
            options = SlurmOptions(SLURM_NODES.value, SLURM_GPUS_PER_NODE.value, SLURM_TIME.value,
                                   SLURM_PARTITION.value, ENV_SETUP.value)
            scripts = {row: slurm_script(argv_row, experiment, row, workdir, options)
                       for row, argv_row in commands.items()}
        elif launcher == "tpu":
            if not TPU_NAME.value or not TPU_ZONE.value:
                raise ValueError("--launcher=tpu needs --tpu_name and --tpu_zone.")
            lines = [tpu_command(argv_row, TPU_NAME.value, TPU_ZONE.value, TPU_REPO.value, ENV_SETUP.value)
                     for argv_row in commands.values()]
    except (ValueError, TypeError) as e:  # the command line: an unknown row or base, a flag the rows refuse
        refuse("sweep", str(e))
    if launcher == "print":
        for argv_row in commands.values():
            print(shlex.join(argv_row))
    elif launcher == "slurm":
        os.makedirs(os.path.join(workdir, "slurm"), exist_ok=True)
        for row, script in scripts.items():
            path = os.path.join(workdir, "slurm", f"{row}.sbatch")
            with open(path, "w") as f:
                f.write(script)
            print(f"sbatch {shlex.quote(path)}")
    elif launcher == "tpu":
        print("# One command per row; each uses the whole pod slice, so run them one after another.")
        for line in lines:
            print(line)
    else:
        logs.setup()
        cluster.maybe_initialize()
        try:
            failed = run_local(configs, workdir, commands, EVAL_CHECKPOINT.value, EVAL_SPLITS.value)
        except Preempted as e:
            cluster.exit_preempted("sweep", e)
        if failed:
            sys.exit("transformer-jax sweep: rows failed: " + "; ".join(f"{r}: {e}" for r, e in failed.items()))
        print(f"All {len(configs)} rows done; compare them with: transformer-jax compare {shlex.quote(workdir)}/*")
