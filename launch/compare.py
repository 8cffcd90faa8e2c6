"""`transformer-jax compare`: runs side by side in the layout of the paper's Table 3, with the paper's numbers.

    transformer-jax compare runs/table3/* [--experiment=table3]  # markdown to stdout; table.md, table.csv, bleu.png,
                                                                 # dev_ppl.png, dev_bleu.png, provenance.json
    transformer-jax compare runs/table3/* --out=results/   # ... written to results/ instead of runs/table3/compare
    transformer-jax compare results/runs/*                  # the same table again, from the copied run records
    transformer-jax compare results/runs/* old/table.csv --out=results   # + the rows of an earlier compare's table

An argument ending in .csv is an earlier compare's table.csv: its rows join the table as they were tabulated then
(for runs whose folders and records are gone), in the paper's row order, named in a footnote; provenance.json keeps,
per CSV, that compare's record and its runs' starts (from the provenance.json beside the CSV). A run name given
both as a run folder and in a CSV, or in two CSVs, is refused.

Each run's record (config.json, metrics.jsonl, provenance.jsonl, eval_*.json: run/folder.py ``record_files``) is
copied to <out>/runs/<run>/, so a committed results folder can be tabulated again once the run folders are gone.

provenance.json holds, per run, every start's commit, machine and command (from <workdir>/provenance.jsonl),
its steps and training wall time, and the commit, machine and command of the compare itself.

bleu.png is dev BLEU per run (bars labelled with their values) beside the paper's; dev_ppl.png and dev_bleu.png draw
the metric against the training step, one line per run, from each run's metrics.jsonl (dev BLEU is logged during
training only with config.train.eval_bleu): a metric no run logged gets no file (stderr says so).

Folders without a config.json (e.g. runs/table3/slurm) are skipped. Runs still training (last logged step below
num_steps) are marked with "*"; a run that reached num_steps is finished, scored or not.
The table logic is transformer_jax/evaluate/report.py.
"""

import json
import os
import shutil
import sys

from absl import flags

from transformer_jax.evaluate import report
from transformer_jax.experiments import get_experiment
from transformer_jax.launch.flags import EXPERIMENT
from transformer_jax.launch.verbs import Verb, refuse
from transformer_jax.run import folder, provenance

OUT = flags.DEFINE_string("out", None, "Folder for table.md, table.csv, bleu.png, dev_ppl.png, dev_bleu.png, "
                                       "provenance.json and runs/<run>/ (each run's record files) (default: <the runs' "
                                       "common parent folder>/compare).")
VERB = Verb("compare", positional="RUN_FOLDER...")
flags.declare_key_flag("experiment")


def default_out(workdirs: list[str]) -> str:
    """``<common parent of the run folders>/compare``."""
    parents = [os.path.dirname(os.path.abspath(d.rstrip("/\\")) or ".") for d in workdirs]
    return os.path.join(os.path.commonpath(parents), "compare")


def main(argv: list[str]) -> None:
    tables = [arg for arg in argv[1:] if arg.endswith(".csv")]
    workdirs = [arg for arg in argv[1:] if not arg.endswith(".csv")]
    if not workdirs and not tables:
        refuse("compare", "give run folders, e.g. `transformer-jax compare runs/table3/*`.")
    earlier = read_tables(tables)
    runs = []
    for workdir in workdirs:
        try:
            runs.append(report.collect_run(workdir))
        except FileNotFoundError as e:
            print(f"Skipping {workdir}: {e}", file=sys.stderr)
        except (ValueError, KeyError) as e:  # a config.json or eval file that is not ours
            print(f"Skipping {workdir}: unreadable run files ({e}).", file=sys.stderr)
    if not runs and not earlier:
        sys.exit("transformer-jax compare: none of the folders is a run (no config.json).")
    experiment = get_experiment(EXPERIMENT.value)
    rows = report.build_rows(runs, experiment.paper, experiment.notes)
    try:
        rows = report.merge_rows(rows, earlier, experiment.paper, experiment.notes)
    except ValueError as e:
        sys.exit(f"transformer-jax compare: {e}.")
    markdown = report.to_markdown(rows)
    print(markdown, end="")
    out = OUT.value or default_out([run["workdir"] for run in runs] + tables)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(markdown)
    with open(os.path.join(out, "table.csv"), "w") as f:
        f.write(report.to_csv(rows))
    report.plot(rows, os.path.join(out, "bleu.png"))
    written = ["table.md", "table.csv", "bleu.png", *write_curves(rows, out)]
    with open(os.path.join(out, "provenance.json"), "w") as f:
        json.dump(provenance_of(runs, earlier), f, indent=1)
    copy_records(runs, os.path.join(out, "runs"))
    print(f"Wrote {', '.join(written)}, provenance.json and runs/ to {out}", file=sys.stderr)


def read_tables(tables: list[str]) -> list[dict]:
    """The rows of each earlier table.csv (report.read_csv), or one line and exit status 1 for a missing or foreign
    file."""
    rows = []
    for table in tables:
        try:
            rows += report.read_csv(table)
        except FileNotFoundError:
            sys.exit(f"transformer-jax compare: no such table: {table}.")
        except (ValueError, UnicodeDecodeError) as e:
            sys.exit(f"transformer-jax compare: {e}.")
    return rows


def write_curves(rows: list[dict], out: str) -> list[str]:
    """``<out>/<metric>.png`` for each metric of report.CURVES that a run logged; the names written. A metric no run
    logged gets no file (one left by an earlier compare into ``out`` is removed: it would show other runs), and a
    line on stderr says so."""
    written = []
    for key in report.CURVES:
        name = f"{key}.png"
        if report.plot_curve(rows, key, os.path.join(out, name)) is not None:
            written.append(name)
            continue
        stale = os.path.join(out, name)
        if os.path.exists(stale):
            os.remove(stale)
        print(f"No {name}: no run logged {key} in its metrics.jsonl"
              + (" (dev BLEU is logged during training with config.train.eval_bleu)." if key == "dev_bleu" else "."),
              file=sys.stderr)
    return written


def copy_records(runs: list[dict], records: str) -> None:
    """Copies each run's record files to ``records/<run name>/`` (a run already there, e.g. when comparing
    ``records/*`` themselves, is left as it is)."""
    names = [run["name"] for run in runs]
    if len(set(names)) < len(names):
        sys.exit(f"transformer-jax compare: two runs share a folder name ({', '.join(sorted(names))}); their records "
                 "would overwrite each other in runs/.")
    for run in runs:
        dest = os.path.join(records, run["name"])
        if os.path.abspath(dest) == os.path.abspath(run["workdir"]):
            continue
        os.makedirs(dest, exist_ok=True)
        for file in folder.record_files(run["workdir"]):
            shutil.copyfile(file, os.path.join(dest, os.path.basename(file)))


def provenance_of(runs: list[dict], earlier: list[dict] = ()) -> dict:
    """This compare's commit, machine and command, and per run its steps, wall time and recorded starts; per earlier
    table.csv its rows, with the records of the compare that wrote it and of their runs (from the provenance.json
    beside the CSV, where there is one)."""
    record = {"compare": provenance.record(devices=False),
              "runs": [{"run": run["name"], "workdir": run["workdir"], "config": run["config"].get("name"),
                        "step": run["step"], "num_steps": run["num_steps"], "finished": run["finished"],
                        "train_seconds": run["train_seconds"], "starts": provenance.read(run["workdir"])}
                       for run in runs]}
    tables = list(dict.fromkeys(row["earlier"] for row in earlier))
    if tables:
        record["earlier"] = [earlier_provenance(table, [row for row in earlier if row["earlier"] == table])
                             for table in tables]
    return record


def earlier_provenance(table: str, rows: list[dict]) -> dict:
    """What is known of an earlier table's rows: their names, and the compare and run records of the provenance.json
    that compare wrote beside the CSV (a run matched by workdir, else by name; None where there is none)."""
    path = os.path.join(os.path.dirname(table), "provenance.json")
    try:
        with open(path) as f:
            recorded = json.load(f)
    except (OSError, ValueError):
        recorded = {}
    by_workdir = {run.get("workdir"): run for run in recorded.get("runs", [])}
    by_name = {run.get("run"): run for run in recorded.get("runs", [])}
    return {"csv": table, "provenance": path if recorded else None, "compare": recorded.get("compare"),
            "rows": [{"run": row["run"], "workdir": row["workdir"],
                      "recorded": by_workdir.get(row["workdir"]) or by_name.get(row["run"])} for row in rows]}
