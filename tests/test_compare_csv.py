"""`transformer-jax compare` given an earlier compare's table.csv beside run folders (issue 51, item 2).

Rows whose run folders and records are gone survive only in the table.csv of the compare that tabulated them
(experiments/results/table3_multi30k/earlier/); `compare RUN_FOLDER... TABLE.csv` puts them back in one table. The
four hand-made runs of tests/fixtures/compare/ (see tests/test_compare.py) play both parts: some as run folders,
the others as rows of a CSV written by to_csv.
"""

import csv
import io
import json
import os

import pytest

from cli_runs import REPO, run_all
from transformer_jax.evaluate import report
from transformer_jax.experiments import get_experiment

FIXTURES = os.path.join(REPO, "tests", "fixtures", "compare")
GOLDEN = os.path.join(REPO, "tests", "golden", "compare_table3.md")
PAPER = get_experiment("table3").paper


def rows_of(*names: str) -> list[dict]:
    return report.build_rows([report.collect_run(os.path.join(FIXTURES, name)) for name in names], PAPER)


def write_csv(path, rows: list[dict]) -> str:
    path.write_text(report.to_csv(rows))
    return str(path)


def without_note(markdown: str) -> str:
    return "\n".join(line for line in markdown.splitlines() if not line.startswith("Read from an earlier")) + "\n"


def test_a_table_read_back_from_its_csv_is_the_same_table(tmp_path):
    """to_csv → read_csv gives every value back with its type (ints stay ints, 0.0 stays a float, in_progress a bool,
    empty cells None), so the markdown is the same, plus the note naming the rows read from the CSV."""
    rows = rows_of("C4", "D1", "base", "custom")
    path = write_csv(tmp_path / "table.csv", rows)
    back = report.read_csv(path)
    for row, read in zip(rows, back, strict=True):
        for field in report.CSV_FIELDS:
            assert (read[field], type(read[field])) == (row.get(field), type(row.get(field))), (row["run"], field)
        assert read["earlier"] == path and read["curves"] == {}
    markdown = report.to_markdown(back)
    assert without_note(markdown) == report.to_markdown(rows)
    assert markdown.splitlines()[-1] == f"Read from an earlier compare's table.csv, their run records gone (no curves): " \
                                        f"base, C4, D1, custom ({path})."
    assert report.to_csv(back) == report.to_csv(rows)


def test_rows_join_the_runs_in_the_papers_order(tmp_path):
    """base and C4 as run folders, D1 and custom from a CSV: the golden four-run table again, the CSV's rows in their
    place among the runs' (paper order; custom, no Table 3 row, last)."""
    earlier = report.read_csv(write_csv(tmp_path / "table.csv", rows_of("D1", "custom")))
    merged = report.merge_rows(rows_of("base", "C4"), earlier, PAPER)
    assert [row["run"] for row in merged] == ["base", "C4", "D1", "custom"]
    with open(GOLDEN) as f:
        assert without_note(report.to_markdown(merged)) == f.read()


def test_a_row_given_twice_is_refused(tmp_path):
    earlier = report.read_csv(write_csv(tmp_path / "table.csv", rows_of("D1", "custom")))
    with pytest.raises(ValueError, match=r"D1 is given twice \(.*fixtures/compare/D1 and .*table.csv\)"):
        report.merge_rows(rows_of("base", "D1"), earlier, PAPER)
    with pytest.raises(ValueError, match="custom is given twice"):
        report.merge_rows([], earlier + report.read_csv(write_csv(tmp_path / "other.csv", rows_of("custom"))), PAPER)


def test_a_csv_of_an_older_compare_reads_with_its_column_names(tmp_path):
    """Before 2026-12-01 compare wrote the row's name as table3_row and had no attention_window, change or decoding
    columns (experiments/results/table3_multi30k/earlier/2026-11-30/table.csv)."""
    new = list(csv.DictReader(io.StringIO(report.to_csv(rows_of("D1", "custom")))))
    old_fields = [("table3_row" if f == "row" else f) for f in report.CSV_FIELDS
                  if f not in ("attention_window", "change", "decoding")]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=old_fields, lineterminator="\n")
    writer.writeheader()
    for line in new:
        writer.writerow({f: line["row" if f == "table3_row" else f] for f in old_fields})
    (tmp_path / "old.csv").write_text(out.getvalue())
    d1, custom = report.read_csv(str(tmp_path / "old.csv"))
    assert (d1["row"], custom["row"], d1["attention_window"], d1["change"], d1["decoding"]) == ("D1", None, 0, None, None)
    assert d1["P_drop"] == 0.0 and isinstance(d1["P_drop"], float) and d1["d_model"] == 32


def test_a_csv_compare_did_not_write_is_refused(tmp_path):
    (tmp_path / "other.csv").write_text("name,score\nx,1\n")
    with pytest.raises(ValueError, match="not a table.csv written by `transformer-jax compare`"):
        report.read_csv(str(tmp_path / "other.csv"))


def test_cli_tabulates_runs_and_csv_rows_and_refuses_a_duplicate(tmp_path):
    """One table.md / table.csv / provenance.json for base and C4 (run folders) and D1, custom (an earlier table.csv,
    with that compare's provenance.json beside it); the same row as a run folder and in the CSV: one line, status 1."""
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    table = write_csv(earlier / "table.csv", rows_of("D1", "custom"))
    (earlier / "provenance.json").write_text(json.dumps({
        "compare": {"commit": "abc1234", "command": "transformer-jax compare runs/D1 runs/custom"},
        "runs": [{"run": "D1", "workdir": rows_of("D1")[0]["workdir"], "starts": [{"commit": "def5678"}]}]}))
    runs = [os.path.join(FIXTURES, name) for name in ("base", "C4")]
    out = tmp_path / "out"
    results = run_all({"merged": ["compare", *runs, table, f"--out={out}"],
                       "twice": ["compare", *runs, os.path.join(FIXTURES, "D1"), table, f"--out={tmp_path / 'x'}"]})
    merged, twice = results["merged"], results["twice"]
    assert merged.returncode == 0, merged.stderr
    with open(GOLDEN) as f:
        assert without_note(merged.stdout) == f.read()
    assert merged.stdout.splitlines()[-1].endswith(f"D1, custom ({table}).")
    assert (out / "table.md").read_text() == merged.stdout
    assert [line["run"] for line in csv.DictReader(io.StringIO((out / "table.csv").read_text()))] == [
        "base", "C4", "D1", "custom"]
    assert sorted(os.listdir(out / "runs")) == ["C4", "base"]  # CSV rows have no records to copy
    prov = json.loads((out / "provenance.json").read_text())
    assert [run["run"] for run in prov["runs"]] == ["base", "C4"]
    (entry,) = prov["earlier"]
    assert entry["csv"] == table and entry["compare"]["commit"] == "abc1234"
    assert [(row["run"], (row["recorded"] or {}).get("starts")) for row in entry["rows"]] == [
        ("D1", [{"commit": "def5678"}]), ("custom", None)]
    assert twice.returncode == 1 and "Traceback" not in twice.stderr
    assert twice.stderr.strip().splitlines()[-1].startswith("transformer-jax compare: D1 is given twice (")
    assert not (tmp_path / "x").exists()
