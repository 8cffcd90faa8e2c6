"""Tests for `transformer-jax compare` and transformer_jax/evaluate/report.py on hand-made run folders.

tests/fixtures/compare/ holds four runs of configs/tiny.py (config.json, metrics.jsonl, eval_*.json): ``base``
(finished, resumed once, with a provenance.jsonl), ``D1`` (finished), ``C4`` (still training: 10 of 20 steps, dev BLEU only in
metrics.jsonl), ``custom`` (no Table 3 row) and ``slurm/`` (not a run). tests/golden/compare_table3.md is the
reviewed table; rewrite it with UPDATE_GOLDEN=1 after a deliberate change of the layout.
"""

import csv
import io
import json
import os
import shutil
import subprocess

import pytest

from cli_runs import REPO, command
from transformer_jax.evaluate import report
from transformer_jax.experiments import get_experiment
from transformer_jax.launch.compare import default_out, write_curves
from transformer_jax.run import folder

FIXTURES = os.path.join(REPO, "tests", "fixtures", "compare")
GOLDEN = os.path.join(REPO, "tests", "golden", "compare_table3.md")
RUNS = ("C4", "D1", "base", "custom")  # glob order; the table puts them in the paper's order


def check_golden(path: str, text: str) -> None:
    if os.environ.get("UPDATE_GOLDEN"):
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        assert text == f.read(), f"differs from {os.path.relpath(path, REPO)} (UPDATE_GOLDEN=1 rewrites it)"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    runs = [report.collect_run(os.path.join(FIXTURES, name)) for name in RUNS]
    return report.build_rows(runs, get_experiment("table3").paper)


def by_run(rows: list[dict]) -> dict[str, dict]:
    return {row["row"] or row["run"]: row for row in rows}


def test_markdown_is_the_golden_table(rows):
    check_golden(GOLDEN, report.to_markdown(rows))


def test_rows_follow_the_papers_order(rows):
    assert [row["run"] for row in rows] == ["base", "C4", "D1", "custom"]


def test_paper_numbers_sit_beside_paper_rows(rows):
    r = by_run(rows)
    assert (r["base"]["paper_dev_ppl"], r["base"]["paper_dev_bleu"], r["base"]["paper_params_m"]) == (4.92, 25.8, 65)
    assert (r["C4"]["paper_dev_ppl"], r["C4"]["paper_dev_bleu"]) == (5.75, 24.5)
    assert r["custom"]["paper_dev_ppl"] is None and r["custom"]["paper_dev_bleu"] is None


def test_config_columns(rows):
    r = by_run(rows)
    assert (r["base"]["N"], r["base"]["d_model"], r["base"]["h"], r["base"]["d_k"]) == (1, 32, 2, 16)
    assert (r["C4"]["d_model"], r["C4"]["d_k"], r["C4"]["d_v"]) == (16, 8, 8)  # the row's delta on tiny
    assert r["D1"]["P_drop"] == 0.0 and r["base"]["P_drop"] == 0.1
    assert r["C4"]["params_m"] < r["base"]["params_m"]  # the values themselves are in the golden table


def test_in_progress_run_shows_its_latest_numbers_marked(rows):
    r = by_run(rows)
    c4 = r["C4"]
    assert c4["in_progress"] and not r["base"]["in_progress"] and not r["custom"]["in_progress"]
    assert (c4["step"], c4["num_steps"], c4["dev_ppl"]) == (10, 20, 200.0)
    assert (c4["dev_bleu"], c4["dev_bleu_source"], c4["test_bleu"]) == (3.21, "metrics.jsonl", None)
    markdown = report.to_markdown(rows)
    line = next(line for line in markdown.splitlines() if line.startswith("| C4"))
    assert line.startswith("| C4\\* |") and "| 10/20 |" in line
    assert "\\* still training" in markdown


def test_dev_bleu_prefers_eval_dev_json(rows):
    base = by_run(rows)["base"]
    assert (base["dev_bleu"], base["dev_tokenized_bleu"], base["dev_bleu_source"]) == (12.34, 13.06, "eval_dev.json")
    assert (base["test_bleu"], base["test_tokenized_bleu"]) == (11.02, 11.71)


def test_wall_time_sums_resumed_segments(rows):
    assert by_run(rows)["base"]["wall_time_s"] == pytest.approx(6.0 + 4.5)  # elapsed_s restarted at step 10
    assert report.train_seconds([{"step": 1, "compile_time_s": 3.0}]) is None
    assert report.train_seconds([{"elapsed_s": 1.0}, {"elapsed_s": 2.0}, {"elapsed_s": 0.5}]) == 2.5


def test_csv_has_raw_values(rows):
    records = list(csv.DictReader(io.StringIO(report.to_csv(rows))))
    assert [r["run"] for r in records] == ["base", "C4", "D1", "custom"]
    assert records[0]["dev_bleu"] == "12.34" and records[0]["paper_dev_bleu"] == "25.8"
    assert records[1]["in_progress"] == "True" and records[1]["test_bleu"] == ""


def test_plot_writes_a_png(rows, tmp_path):
    path = report.plot(rows, str(tmp_path / "plots" / "bleu.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(path) > 1000


def is_png(path) -> bool:
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_curves_are_each_runs_logged_points_in_step_order(rows):
    r = by_run(rows)
    assert r["base"]["curves"] == {"dev_ppl": [(10, 183.26), (20, 142.46)]}
    assert r["C4"]["curves"] == {"dev_ppl": [(10, 200.0)], "dev_bleu": [(10, 3.21)]}
    records = [{"step": 20, "dev_ppl": 9.0}, {"step": 10, "dev_ppl": 12.0}, {"step": 20, "dev_ppl": 8.0},
               {"step": 20, "train_loss": 1.0}]  # a step logged twice (an old file): its last value
    assert report.curves(records) == {"dev_ppl": [(10, 12.0), (20, 8.0)]}


def test_curve_plots_draw_one_labelled_line_per_run(rows, tmp_path, monkeypatch):
    drawn = {}
    save = report._save
    monkeypatch.setattr(report, "_save", lambda fig, path: drawn.setdefault(path, [
        (line.get_label(), list(line.get_xdata())) for line in fig.axes[0].get_lines()]) and save(fig, path))
    path = report.plot_curve(rows, "dev_ppl", str(tmp_path / "dev_ppl.png"))
    assert drawn[path] == [("base", [10, 20]), ("C4*", [10]), ("D1", [10, 20]), ("custom", [20])]
    assert is_png(path) and os.path.getsize(path) > 5000
    path = report.plot_curve(rows, "dev_bleu", str(tmp_path / "dev_bleu.png"))
    assert drawn[path] == [("C4*", [10])]
    finished = [row for row in rows if row["row"] != "C4"]  # no run logged dev_bleu: no file
    assert report.plot_curve(finished, "dev_bleu", str(tmp_path / "none.png")) is None
    assert not (tmp_path / "none.png").exists()


def test_a_metric_no_run_logged_writes_no_file_and_says_so(rows, tmp_path, capsys):
    (tmp_path / "dev_bleu.png").write_bytes(b"an earlier compare's")
    finished = [row for row in rows if row["row"] != "C4"]
    assert write_curves(finished, str(tmp_path)) == ["dev_ppl.png"]
    assert is_png(tmp_path / "dev_ppl.png") and not (tmp_path / "dev_bleu.png").exists()
    assert "No dev_bleu.png: no run logged dev_bleu" in capsys.readouterr().err


def test_bars_are_labelled_with_their_values(rows, tmp_path, monkeypatch):
    labels = {}
    save = report._save
    monkeypatch.setattr(report, "_save", lambda fig, path: labels.setdefault(path, [
        [text.get_text() for text in ax.texts] for ax in fig.axes]) and save(fig, path))
    path = report.plot(rows, str(tmp_path / "bleu.png"))
    ours, paper = labels[path]  # rows: base, C4 (in progress), D1, custom (no paper row)
    assert ours == ["12.3", "3.2", f"{by_run(rows)['D1']['dev_bleu']:.1f}", f"{by_run(rows)['custom']['dev_bleu']:.1f}"]
    assert paper == ["25.8", "24.5", f"{by_run(rows)['D1']['paper_dev_bleu']:.1f}", "–"]


def test_a_folder_without_config_is_not_a_run():
    with pytest.raises(FileNotFoundError, match="config.json"):
        report.collect_run(os.path.join(FIXTURES, "slurm"))


def test_is_finished_needs_the_last_checkpoint_and_test_bleu(tmp_path):
    run = tmp_path / "run"
    assert not folder.is_finished(str(run), 20)
    (run / "checkpoints" / "10").mkdir(parents=True)
    (run / "checkpoints" / "10.orbax-checkpoint-tmp-1").mkdir()  # a save in flight is not a checkpoint
    assert folder.checkpoint_steps(str(run)) == [10]
    (run / "eval_test.json").write_text(json.dumps({"sacrebleu": 1.0}))
    assert not folder.is_finished(str(run), 20)
    (run / "checkpoints" / "20").mkdir()
    assert folder.is_finished(str(run), 20)
    assert not folder.is_finished(str(run), 40)  # num_steps raised: the sweep resumes it


def test_default_out_is_the_common_parent():
    assert default_out(["runs/t3/A1", "runs/t3/B1/"]) == os.path.abspath("runs/t3/compare")
    assert default_out(["runs/t3/A1", "runs/other/B1"]) == os.path.abspath("runs/compare")


def test_cli_prints_the_table_and_writes_csv_and_png(tmp_path):
    folders = [os.path.join("tests", "fixtures", "compare", name) for name in sorted(os.listdir(FIXTURES))]
    out = tmp_path / "out"
    proc = subprocess.run(command() + ["compare", *folders, f"--out={out}"], check=False, cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr
    with open(GOLDEN) as f:
        assert proc.stdout == f.read()
    assert "Skipping tests/fixtures/compare/slurm" in proc.stderr
    assert (out / "table.md").read_text() == proc.stdout
    assert len((out / "table.csv").read_text().splitlines()) == 1 + 4
    assert (out / "bleu.png").stat().st_size > 1000
    for name in ("dev_ppl.png", "dev_bleu.png"):  # base, C4, D1 and custom log dev_ppl; C4 logs dev_bleu
        assert is_png(out / name) and (out / name).stat().st_size > 5000, name
    assert "Wrote table.md, table.csv, bleu.png, dev_ppl.png, dev_bleu.png, provenance.json" in proc.stderr
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["compare"]["command"].endswith(f"--out={out}") and prov["compare"]["machine"]["cpu_count"] == os.cpu_count()
    starts = {run["run"]: run["starts"] for run in prov["runs"]}
    assert starts["base"][0]["commit"].startswith("0123456789") and starts["D1"] == []  # D1 predates the records
    assert {run["run"]: (run["step"], run["finished"]) for run in prov["runs"]}["C4"] == (10, False)


def test_cli_without_runs_fails_cleanly(tmp_path):
    proc = subprocess.run(command() + ["compare", str(tmp_path)], check=False, cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "no config.json" in proc.stderr


def test_footnote_names_runs_scored_with_averaged_checkpoints(rows):
    averaged = [dict(row, checkpoint="avg5 (runs/x/averaged/avg5)") if row["row"] == "D1" else row
                for row in rows]
    assert "except averaged checkpoints for D1 (avg5)" in report.to_markdown(averaged)
    assert "scored with the last checkpoint (no averaging" in report.to_markdown(rows)


def test_columns_that_say_nothing_are_left_out_and_notes_become_the_change_column(rows):
    """A window sweep: no paper numbers (no paper columns), an r column once a run has a window, and each row's
    note from the experiment; the Table 3 table keeps its paper columns and has no r or change column."""
    table3_header = report.to_markdown(rows).splitlines()[0]
    assert "paper PPL" in table3_header and "| r |" not in table3_header and "change" not in table3_header
    runs = [report.collect_run(os.path.join(FIXTURES, name)) for name in RUNS]
    runs[0]["config"] = {**runs[0]["config"], "model": {**runs[0]["config"]["model"], "attention_window": 4}}
    runs[0]["row"] = "r4"
    experiment = get_experiment("window")
    window_rows = report.build_rows(runs, experiment.paper, experiment.notes)
    assert window_rows[0]["row"] == "r4"  # the notes' row order
    text = report.to_markdown(window_rows)
    header, _, first = text.splitlines()[:3]
    assert "paper" not in header and "| r |" in header and header.endswith("| change |")
    assert first.split("|")[-2].strip() == experiment.notes["r4"]
    assert first.split("|")[header.split("|").index(" r ")].strip() == "4"


def test_a_finished_run_scored_on_dev_only_is_not_in_progress(tmp_path):
    """A recipe search scores dev only (sweep --eval_splits=dev): finished training + eval_dev.json is done."""
    run = tmp_path / "D1"
    shutil.copytree(os.path.join(FIXTURES, "D1"), run)
    assert report.collect_run(str(run))["finished"]
    os.remove(run / "eval_test.json")
    assert (run / "eval_dev.json").exists()
    collected = report.collect_run(str(run))
    assert collected["finished"] and collected["test_bleu"] is None
    assert "\\*" not in report.to_markdown(report.build_rows([collected]))


def test_a_finished_run_scored_on_no_split_is_not_in_progress(tmp_path):
    """`train --eval_splits=` scores nothing: a run whose last logged step reached num_steps is finished without any
    eval file, its BLEU columns empty, not marked "*" as still training."""
    run = tmp_path / "D1"
    shutil.copytree(os.path.join(FIXTURES, "D1"), run)
    os.remove(run / "eval_test.json")
    os.remove(run / "eval_dev.json")
    collected = report.collect_run(str(run))
    assert collected["finished"] and (collected["step"], collected["num_steps"]) == (20, 20)
    row, = report.build_rows([collected])
    assert not row["in_progress"] and row["dev_bleu"] is None and row["test_bleu"] is None
    markdown = report.to_markdown([row])
    assert "\\*" not in markdown and "still training" not in markdown
    assert markdown.splitlines()[2].startswith("| D1 |")


def test_copied_run_records_give_the_same_table(tmp_path):
    """compare --out copies each run's record (config, metrics, provenance, eval files; no checkpoints) to
    <out>/runs/<run>/; comparing those copies alone reproduces the table, so committed results outlive the runs."""
    folders = [os.path.join(FIXTURES, name) for name in RUNS]
    out, again = tmp_path / "out", tmp_path / "again"

    def compare(args):
        proc = subprocess.run(command() + ["compare", *args], check=False, cwd=REPO, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    table = compare([*folders, f"--out={out}"])
    assert sorted(os.listdir(out / "runs")) == sorted(RUNS)
    for name in RUNS:
        assert sorted(os.listdir(out / "runs" / name)) == sorted(os.path.basename(f) for f in folder.record_files(
            os.path.join(FIXTURES, name)))
    assert "metrics.jsonl" in os.listdir(out / "runs" / "base") and "eval_test.json" in os.listdir(out / "runs" / "base")
    copies = [str(out / "runs" / name) for name in RUNS]
    assert compare([*copies, f"--out={again}"]) == table
    assert compare([*copies, f"--out={out}"]) == table  # comparing the records into their own folder keeps them


def test_the_footnote_names_each_run_decoded_otherwise(tmp_path):
    """A run scored with the α its decoding grid chose on dev (here 1.5) is named beside the common setting: a table
    of BLEU scores made with different decodings says so."""
    runs = []
    for name in ("base", "custom", "D1"):
        shutil.copytree(os.path.join(FIXTURES, name), tmp_path / name)
        runs.append(report.collect_run(str(tmp_path / name)))
    assert "decoded with beam 4, α 0.6, scored" in report.to_markdown(report.build_rows(runs))
    path = tmp_path / "D1" / "eval_test.json"
    scores = json.loads(path.read_text())
    path.write_text(json.dumps({**scores, "length_penalty": 1.5}))
    runs[2] = report.collect_run(str(tmp_path / "D1"))
    table = report.to_markdown(report.build_rows(runs))
    assert "decoded with beam 4, α 0.6 (except D1 (beam 4, α 1.5)), scored" in table


def test_a_decoding_grid_is_part_of_the_record(tmp_path):
    """`evaluate --grid` appends every dev setting tried to decoding_dev.jsonl: the record keeps it (the choice of
    checkpoint and α is part of a result), not the translations."""
    run = tmp_path / "D1"
    shutil.copytree(os.path.join(FIXTURES, "D1"), run)
    (run / "decoding_dev.jsonl").write_text('{"grid": {"checkpoint": "avg5"}, "sacrebleu": 1.0}\n')
    (run / "translations_dev.txt").write_text("a\n")
    names = [os.path.basename(f) for f in folder.record_files(str(run))]
    assert "decoding_dev.jsonl" in names and "translations_dev.txt" not in names and "eval_dev.json" in names


def test_git_keeps_the_copied_records_and_ignores_the_run_folders(tmp_path):
    """The records compare copies to experiments/results/<folder>/runs/ are meant to be committed; the training run
    folders under the repository's own runs/ are not. (A .gitignore line ``runs/`` matched both, so the records of
    2026-12-01 were never committed; ``/runs/`` then missed a ``runs`` symlink to a folder outside the work tree.)
    The repository's .gitignore is checked in a scratch repository, whatever this checkout's runs/ is."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    shutil.copy(os.path.join(REPO, ".gitignore"), tmp_path / ".gitignore")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "runs")

    def ignored(relative: str) -> bool:
        proc = subprocess.run(["git", "check-ignore", "-q", "--no-index", relative], cwd=tmp_path, check=False)
        assert proc.returncode in (0, 1), f"git check-ignore failed on {relative}"
        return proc.returncode == 0

    assert ignored("runs")  # the symlink itself
    (tmp_path / "runs").unlink()

    assert not ignored("experiments/results/table3_multi30k/runs/C4/metrics.jsonl")
    assert not ignored("experiments/results/multi30k/search/runs/tiny/eval_dev.json")
    assert ignored("runs/table3_multi30k/C4/checkpoints/4500/state")
    assert ignored("runs/demo/metrics.jsonl")
