"""Comparing runs side by side in the layout of the paper's Table 3: markdown, CSV, a BLEU bar chart and curves.

Pure functions over run folders (``config.json``, ``metrics.jsonl``, ``eval_<split>.json``)::

    runs = [collect_run(d) for d in workdirs]
    rows = build_rows(runs, paper, notes)   # paper: {row: {"dev_ppl", "dev_bleu", "params_m"}} (e.g. Table 3)
    print(to_markdown(rows)); open("t.csv", "w").write(to_csv(rows)); plot(rows, "bleu.png")
    plot_curve(rows, "dev_ppl", "dev_ppl.png")  # one line per run against the training step (None: nobody logged it)
    rows = merge_rows(rows, read_csv("old/table.csv"), paper)  # + an earlier table's rows whose run folders are gone

A run made by a sweep carries its row's name in its config (``table3_row``, or ``sweep_row`` for the other
experiments); ``notes`` says in words what each row changes (the "change" column). Columns that say nothing for
these runs are left out of the markdown: the paper's columns when no run is a row the paper reported, the window
r when every run has full attention, "change" when no row has a note.

A run that is still training (its last logged step < num_steps) shows its latest numbers from metrics.jsonl and
is marked with "*". A run that reached num_steps is finished, scored or not (``train --eval_splits=`` scores no
split, a recipe search scores dev only): its missing scores show "–". Dev BLEU is read from eval_dev.json (beam search over the whole dev
split) when present, else from the latest ``dev_bleu`` logged during training.

An earlier compare's ``table.csv`` reads back (``read_csv``) as rows with their values typed as ``build_rows`` made
them, so a table can keep rows whose run folders and records are gone: they join the runs' rows in the paper's order
(``merge_rows``: a row given twice is refused), draw no curves, and a footnote names them and their CSV.
"""

import csv
import io
import json
import os
from collections import Counter

import ml_collections

from transformer_jax.run import folder
from transformer_jax.run.metrics import START_EVENT, read_metrics

# Columns of the table: (key in a row dict, markdown header). Paper columns sit beside ours.
COLUMNS = (
    ("run", "run"), ("N", "N"), ("d_model", "d_model"), ("d_ff", "d_ff"), ("h", "h"), ("d_k", "d_k"),
    ("d_v", "d_v"), ("P_drop", "P_drop"), ("eps_ls", "ε_ls"), ("positional", "positional"),
    ("attention_window", "r"), ("params_m", "params ×10^6"), ("steps", "steps"), ("dev_ppl", "dev PPL"), ("paper_dev_ppl", "paper PPL"),
    ("dev_bleu", "dev BLEU"), ("dev_tokenized_bleu", "dev BLEU (tok)"), ("paper_dev_bleu", "paper BLEU"),
    ("test_bleu", "test BLEU"), ("test_tokenized_bleu", "test BLEU (tok)"), ("wall_time", "train time"),
    ("change", "change"),
)
PAPER_COLUMNS = ("paper_dev_ppl", "paper_dev_bleu")
MISSING = "–"
# The metrics `compare` draws against the training step (from metrics.jsonl): key → (axis label, title).
CURVES = {
    "dev_ppl": ("dev perplexity (per word-piece)", "Dev perplexity during training"),
    "dev_bleu": ("dev sacreBLEU", "Dev BLEU during training (config.train.eval_bleu)"),
}


def _read_json(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _latest(records: list[dict], key: str):
    """The value of ``key`` in the last record that has it (None if none does)."""
    for record in reversed(records):
        if record.get(key) is not None:
            return record[key]
    return None


def train_seconds(records: list[dict]) -> float | None:
    """Training wall time: ``elapsed_s`` restarts at 0 in each training segment, so sum each segment's last value.

    A segment opens at a start record (run/metrics.py writes one at each start, after dropping the records an
    interrupted attempt left beyond its checkpoint: each step is counted once) or, in files written before start
    records existed, where ``elapsed_s`` falls.
    """
    total, current, seen = 0.0, 0.0, False
    for record in records:
        elapsed = record.get("elapsed_s")
        if record.get("event") == START_EVENT or elapsed is not None and elapsed < current:  # a new segment
            total, current = total + current, 0.0
        if elapsed is not None:
            seen, current = True, elapsed
    return total + current if seen else None


def curves(records: list[dict], keys=tuple(CURVES)) -> dict[str, list[tuple[int, float]]]:
    """Each of ``keys`` logged in ``records``: its (step, value) points in step order (a step logged twice, by a
    metrics file written before resumes dropped an interrupted attempt's records: its last value)."""
    points: dict[str, dict[int, float]] = {key: {} for key in keys}
    for record in records:
        for key in keys:
            if isinstance(record.get(key), (int, float)):
                points[key][int(record["step"])] = float(record[key])
    return {key: sorted(values.items()) for key, values in points.items() if values}


def _parameters(model: dict) -> int | None:
    from transformer_jax.model.size import count_parameters  # builds an abstract model: only when needed

    try:
        return count_parameters(ml_collections.ConfigDict(model))["total"]
    except (AttributeError, KeyError, TypeError, ValueError):  # a run from an older version whose model config no longer builds: show "–"
        return None


def collect_run(workdir: str) -> dict:
    """Everything the table needs from one run folder (raises FileNotFoundError if it has no config.json)."""
    config = _read_json(folder.path(workdir, folder.CONFIG_FILE))
    if config is None:
        raise FileNotFoundError(f"No {folder.CONFIG_FILE} in {workdir}: not a transformer-jax run folder.")
    records = read_metrics(workdir)
    dev, test = (_read_json(folder.eval_path(workdir, split)) for split in ("dev", "test"))
    num_steps = int(config["train"]["num_steps"])
    step = max((int(r["step"]) for r in records), default=0)
    if dev is not None:
        dev_bleu, dev_tok, dev_source = dev.get("sacrebleu"), dev.get("tokenized_bleu"), "eval_dev.json"
    else:
        dev_bleu, dev_tok = _latest(records, "dev_bleu"), _latest(records, "dev_tokenized_bleu")
        dev_source = "metrics.jsonl" if dev_bleu is not None else None
    return {
        "name": os.path.basename(os.path.normpath(workdir)),
        "workdir": workdir,
        "config": config,
        "row": config.get("table3_row") or config.get("sweep_row"),
        "params": _parameters(config["model"]),
        "num_steps": num_steps,
        "step": step,
        "finished": step >= num_steps,  # scored or not: eval files are optional (train --eval_splits=)
        "dev_ppl": _latest(records, "dev_ppl"),
        "dev_bleu": dev_bleu,
        "dev_tokenized_bleu": dev_tok,
        "dev_bleu_source": dev_source,
        "test_bleu": test.get("sacrebleu") if test else None,
        "test_tokenized_bleu": test.get("tokenized_bleu") if test else None,
        "signature": (test or dev or {}).get("signature"),
        "checkpoint": (test or dev or {}).get("checkpoint"),
        "decoding": _decoding(test or dev or {}),
        "train_seconds": train_seconds(records),
        "curves": curves(records),
    }


def _decoding(scores: dict) -> str | None:
    """How an eval JSON's translations were made, e.g. ``beam 4, α 0.6`` (None for a JSON without it)."""
    method = scores.get("decode_method")
    if method is None:
        return None
    return f"beam {scores['beam_size']}, α {scores['length_penalty']}" if method == "beam" else method


def build_rows(runs: list[dict], paper: dict[str, dict] | None = None,
               notes: dict[str, str] | None = None) -> list[dict]:
    """One table row per run (raw values), in the paper's (else the notes') row order, other runs last."""
    paper, notes = paper or {}, notes or {}
    rows = []
    for run in _in_row_order(runs, paper, notes):
        m, t = run["config"]["model"], run["config"]["train"]
        row_name = run["row"]
        theirs = paper.get(row_name, {}) if row_name else {}
        n_enc, n_dec = m["num_encoder_layers"], m["num_decoder_layers"]
        rows.append({
            "run": run["name"] if row_name in (None, run["name"]) else f"{run['name']} ({row_name})",
            "row": row_name, "change": notes.get(row_name),
            "attention_window": m.get("attention_window", 0),
            "in_progress": not run["finished"],
            "N": n_enc if n_enc == n_dec else f"{n_enc}+{n_dec}",
            "d_model": m["d_model"], "d_ff": m["d_ff"], "h": m["num_heads"], "d_k": m["d_k"], "d_v": m["d_v"],
            "P_drop": m["dropout_rate"], "eps_ls": t["label_smoothing"], "positional": m["positional"],
            "params_m": None if run["params"] is None else run["params"] / 1e6,
            "step": run["step"], "num_steps": run["num_steps"],
            "dev_ppl": run["dev_ppl"], "paper_dev_ppl": theirs.get("dev_ppl"),
            "dev_bleu": run["dev_bleu"], "dev_tokenized_bleu": run["dev_tokenized_bleu"],
            "dev_bleu_source": run["dev_bleu_source"], "paper_dev_bleu": theirs.get("dev_bleu"),
            "paper_params_m": theirs.get("params_m"),
            "test_bleu": run["test_bleu"], "test_tokenized_bleu": run["test_tokenized_bleu"],
            "wall_time_s": run["train_seconds"], "signature": run["signature"], "checkpoint": run["checkpoint"],
            "decoding": run.get("decoding"), "workdir": run["workdir"], "curves": run.get("curves", {}),
        })
    return rows


def _in_row_order(items: list[dict], paper: dict | None, notes: dict | None) -> list[dict]:
    """``items`` (runs or rows, each with a "row") in the paper's (else the notes') row order, the others last; the
    given order within a row."""
    order = {row: i for i, row in enumerate(paper or notes or {})}
    return [item for _, item in sorted(enumerate(items), key=lambda ii: (order.get(ii[1]["row"], len(order)), ii[0]))]


def merge_rows(rows: list[dict], earlier: list[dict], paper: dict[str, dict] | None = None,
               notes: dict[str, str] | None = None) -> list[dict]:
    """One table of ``rows`` (build_rows: the runs) and ``earlier`` (read_csv: rows of an earlier table whose run
    records are gone), in the paper's (else the notes') row order. A run name given twice (the table's key: its
    "run" column) is refused with a ValueError naming where each comes from."""
    sources: dict[str, list[str]] = {}
    for row in rows + earlier:
        sources.setdefault(row["run"], []).append(row.get("earlier") or row.get("workdir") or "a run")
    twice = {name: where for name, where in sources.items() if len(where) > 1}
    if twice:
        raise ValueError("; ".join(f"{name} is given twice ({' and '.join(where)})" for name, where in twice.items())
                         + ": a row of an earlier table.csv must not also be a run folder or a row of another CSV")
    return _in_row_order(rows + earlier, paper, notes)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return MISSING
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _number(value, digits: int) -> str:
    return MISSING if value is None else f"{value:.{digits}f}"


def _cells(row: dict) -> dict[str, str]:
    """A row's values as the markdown table shows them."""
    params = row["params_m"]
    cells = {key: MISSING if row.get(key) is None else str(row[key]) for key, _ in COLUMNS}
    cells.update(
        run=row["run"] + ("\\*" if row["in_progress"] else ""),
        params_m=_number(params, 1 if params is not None and params >= 10 else 2),
        steps=f"{row['step']}/{row['num_steps']}" if row["in_progress"] else str(row["step"]),
        dev_ppl=_number(row["dev_ppl"], 2), paper_dev_ppl=_number(row["paper_dev_ppl"], 2),
        wall_time=_duration(row["wall_time_s"]),
    )
    for key in ("dev_bleu", "dev_tokenized_bleu", "paper_dev_bleu", "test_bleu", "test_tokenized_bleu"):
        cells[key] = _number(row[key], 1)
    return cells


def _columns(rows: list[dict]) -> list[tuple[str, str]]:
    """COLUMNS less those that say nothing for these rows (see the module docstring)."""
    has_paper = any(row[key] is not None for row in rows for key in PAPER_COLUMNS)
    dropped = set(() if has_paper else PAPER_COLUMNS)
    if not any(row["attention_window"] for row in rows):
        dropped.add("attention_window")
    if not any(row["change"] for row in rows):
        dropped.add("change")
    return [(key, header) for key, header in COLUMNS if key not in dropped]


def to_markdown(rows: list[dict]) -> str:
    """The Table-3-style markdown table, with footnotes (in-progress runs, where the numbers come from)."""
    columns = _columns(rows)
    lines = ["| " + " | ".join(header for _, header in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = _cells(row)
        lines.append("| " + " | ".join(cells[key] for key, _ in columns) + " |")
    averaged = [f"{row['run']} ({row['checkpoint'].split()[0]})" for row in rows
                if (row.get("checkpoint") or "").startswith("avg")]
    scored = ("the last checkpoint (no averaging, as in Table 3)" if not averaged else
              "the last checkpoint, except averaged checkpoints for " + ", ".join(averaged))
    decodings = [row.get("decoding") for row in rows if row.get("decoding")]
    common = Counter(decodings).most_common(1)[0][0] if decodings else None  # ties: the first row's
    others = [f"{row['run']} ({row['decoding']})" for row in rows if row.get("decoding") not in (None, common)]
    how = "beam search" if common is None else (f"decoded with {common}" +
                                                  (f" (except {', '.join(others)})" if others else ""))
    paper = (" paper: Table 3 (EN-DE newstest2013, base scale)." if ("paper_dev_bleu", "paper BLEU") in columns
             else "")
    window = " r: restricted self-attention window (0 = full)." if ("attention_window", "r") in columns else ""
    notes = ["", ("dev PPL: per word-piece on the dev split (latest evaluation in metrics.jsonl). BLEU: sacreBLEU "
                  f"and the paper's tokenized compound-split BLEU (tok), {how}, scored with {scored}; dev "
                  f"BLEU from eval_dev.json, else the latest dev_bleu logged in training.{paper}{window} train "
                  "time: the training loop, summed over resumed segments.")]
    signatures = sorted({row["signature"] for row in rows if row["signature"]})
    if signatures:
        notes.append("sacreBLEU signature: " + "; ".join(signatures) + ".")
    if any(row["in_progress"] for row in rows):
        notes.append("\\* still training (steps = reached/total): its numbers are the latest in metrics.jsonl, "
                     "no test BLEU until it finishes.")
    tables = list(dict.fromkeys(row["earlier"] for row in rows if row.get("earlier")))
    if tables:
        notes.append("Read from an earlier compare's table.csv, their run records gone (no curves): " + "; ".join(
            ", ".join(row["run"] for row in rows if row.get("earlier") == table) + f" ({table})" for table in tables)
            + ".")
    return "\n".join(lines + notes) + "\n"


CSV_FIELDS = ("run", "row", "in_progress", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls",
              "positional", "attention_window", "params_m", "paper_params_m", "step", "num_steps", "dev_ppl", "paper_dev_ppl",
              "dev_bleu", "dev_tokenized_bleu", "dev_bleu_source", "paper_dev_bleu", "test_bleu",
              "test_tokenized_bleu", "wall_time_s", "signature", "checkpoint", "change", "workdir", "decoding")
# read_csv: the CSV's columns that hold text (the others are numbers, in_progress a bool), and the names earlier
# compares wrote for today's columns (before 2026-12-01 the row's name was "table3_row").
CSV_TEXT = frozenset({"run", "row", "positional", "dev_bleu_source", "signature", "checkpoint", "change", "workdir",
                      "decoding"})
CSV_RENAMED = {"table3_row": "row"}


def to_csv(rows: list[dict]) -> str:
    """The rows with raw (unrounded) values, one CSV line per run."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in CSV_FIELDS})
    return out.getvalue()


def _csv_value(field: str, text: str):
    """One CSV cell as to_csv's row held it: "" is None, True/False a bool, a number an int or a float (an int
    written as such stays one), text (and N as "3+4") a string."""
    if text == "":
        return None
    if field in CSV_TEXT:
        return text
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_csv(path: str) -> list[dict]:
    """The rows of an earlier compare's ``table.csv`` (to_csv), typed back as build_rows made them, for a table that
    keeps rows whose run records are gone. Each row carries ``earlier`` = ``path`` (to_markdown's footnote names
    them) and no curves; a column an older compare did not write reads as a run without it shows (no window, no
    note). Raises ValueError for a CSV that compare did not write."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        fields = [CSV_RENAMED.get(name, name) for name in reader.fieldnames or ()]
        if not {"run", "row", "dev_bleu", "test_bleu"} <= set(fields):
            raise ValueError(f"{path} is not a table.csv written by `transformer-jax compare` (its columns: "
                             f"{', '.join(fields) or 'none'})")
        rows = []
        for line in reader:
            row = dict.fromkeys(CSV_FIELDS)
            row.update(in_progress=False, attention_window=0)
            row.update({field: _csv_value(field, text or "") for field, text in zip(fields, line.values())})
            row.update(curves={}, earlier=path)
            rows.append(row)
    return rows


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def _label_bars(ax, bars, values: list) -> None:
    """Writes each bar's value above it (``–`` where there is none: the bar is drawn at 0)."""
    ax.bar_label(bars, labels=[MISSING if v is None else f"{v:.1f}" for v in values], padding=2, fontsize="small")
    ax.margins(y=0.12)  # room for the labels above the tallest bar


def plot(rows: list[dict], path: str) -> str:
    """Bar chart of dev BLEU per row, ours (left axis) beside the paper's (right axis) when the paper reported any
    of these rows, each bar labelled with its value; writes ``path`` (PNG)."""
    plt = _pyplot()
    x = list(range(len(rows)))
    has_paper = any(row["paper_dev_bleu"] is not None for row in rows)
    width = 0.4 if has_paper else 0.6
    fig, ours_ax = plt.subplots(figsize=(max(6.0, 0.6 * len(rows) + 2), 4.0))
    ours = [row["dev_bleu"] for row in rows]
    bars = ours_ax.bar([i - width / 2 if has_paper else i for i in x], [v or 0.0 for v in ours], width,
                       color="tab:blue", label="ours (dev sacreBLEU)")
    _label_bars(ours_ax, bars, ours)
    for bar, row in zip(bars, rows):
        if row["in_progress"]:
            bar.set_hatch("//")
            bar.set_alpha(0.6)
    ours_ax.set_ylabel("ours: dev BLEU", color="tab:blue")
    ours_ax.set_xticks(x)
    ours_ax.set_xticklabels([row["run"] + ("*" if row["in_progress"] else "") for row in rows], rotation=45,
                            ha="right")
    if has_paper:
        paper_ax = ours_ax.twinx()
        paper = [row["paper_dev_bleu"] for row in rows]
        paper_bars = paper_ax.bar([i + width / 2 for i in x], [v or 0.0 for v in paper], width, color="tab:orange",
                                  label="paper (Table 3)")
        _label_bars(paper_ax, paper_bars, paper)
        paper_ax.set_ylabel("paper: dev BLEU (newstest2013)", color="tab:orange")
        ours_ax.set_title("Dev BLEU per row: ours vs. the paper (* = still training)")
        handles = ours_ax.get_legend_handles_labels()[0] + paper_ax.get_legend_handles_labels()[0]
        paper_ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, fontsize="small")
    else:
        ours_ax.set_title("Dev BLEU per run (* = still training)")
    return _save(fig, path)


def plot_curve(rows: list[dict], key: str, path: str) -> str | None:
    """``key`` (one of CURVES: dev_ppl, dev_bleu) against the training step, one labelled line per run that logged
    it (from metrics.jsonl), with a legend; writes ``path`` (PNG) and returns it, or returns None and writes nothing
    when no run logged ``key``. Perplexity spanning more than a factor 10 is drawn on a log axis."""
    drawn = [row for row in rows if row.get("curves", {}).get(key)]
    if not drawn:
        return None
    plt = _pyplot()
    label, title = CURVES[key]
    fig, ax = plt.subplots(figsize=(7.0, 4.0))
    colors = plt.get_cmap("tab10" if len(drawn) <= 10 else "tab20").colors  # Table 3 has 28 rows
    for i, row in enumerate(drawn):
        steps, values = zip(*row["curves"][key])
        ax.plot(steps, values, marker="o", markersize=3, color=colors[i % len(colors)],
                linestyle=("-", "--", ":", "-.")[i // len(colors) % 4],
                label=row["run"] + ("*" if row["in_progress"] else ""))
    values = [v for row in drawn for _, v in row["curves"][key]]
    if key == "dev_ppl" and min(values) > 0 and max(values) > 10 * min(values):
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel(label)
    ax.set_title(title + (" (* = still training)" if any(row["in_progress"] for row in drawn) else ""))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(fig, path)
