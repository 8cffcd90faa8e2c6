"""The paper's models compiled for the pods and GPU nodes they target, on this CPU: one `transformer-jax compile`
per (config, target), two at a time, each report kept as JSON; then a markdown table with the command of each row.

    python bench/compile_targets.py --out=experiments/results/compile_targets            # compile (hours for all)
    python bench/compile_targets.py --out=experiments/results/compile_targets --table    # the tables from the JSONs

Needs the [aot] extra. A row whose JSON exists is not compiled again (delete it to redo); a failed compile keeps
its stderr beside it. Estimates in the table (step time, hours) are XLA's FLOPs at --mfu of the chip's bf16 peak.
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import subprocess
import sys

from transformer_jax import aot
from transformer_jax import target as targets

CONFIGS = ("base", "base:enfr", "big", "big:enfr")
TARGETS = ("v5e-16", "v5e-256", "v5p-128", "v6e-64", "v4-32", "h100x8", "h200x8")
EXTRA = (("big", "v5e-1"), ("big", "v5e-8"))  # where the paper's step does not fit as configured
NUM_STEPS = {"base": 100_000, "big": 300_000}  # §5.2 (configs/base.py, table3.py), for reports saved without it



def _ms(seconds: float) -> str:
    """Milliseconds with two significant digits, without exponents (590, 11, 0.86)."""
    ms = seconds * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.2g}"

def command(config: str, target: str) -> list[str]:
    return ["transformer-jax", "compile", f"--config={config}", f"--target={target}"]


def row_file(out: str, config: str, target: str) -> str:
    return os.path.join(out, "rows", f"{config.replace(':', '_')}__{target}.json")


def compile_row(out: str, config: str, target: str) -> str:
    path = row_file(out, config, target)
    if os.path.exists(path):
        return f"{config} on {target}: kept"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
    result = subprocess.run(command(config, target) + ["--json"], capture_output=True, text=True, env=env,
                            check=False)
    lines = result.stdout.strip().splitlines()
    if not lines or not lines[-1].startswith("{"):
        with open(path + ".stderr", "w") as f:
            f.write(result.stderr)
        return f"{config} on {target}: FAILED (status {result.returncode}; {path}.stderr)"
    report = json.loads(lines[-1])
    report["exit_status"] = result.returncode
    report["stderr_last_line"] = result.stderr.strip().splitlines()[-1] if result.returncode else ""
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    return f"{config} on {target}: {'fits' if report['fits'] else 'does not fit'}"


def estimate(report: dict, mfu: float = 0.3) -> dict | None:
    """aot.step_hours of a saved report, for its target's chip at ``mfu`` (the formula's FLOPs on GPU)."""
    chip = targets.parse(report["target"]).chip
    steps = report["num_steps"] if "num_steps" in report else NUM_STEPS[report["config"].split("_")[0]]
    return aot.step_hours(*aot.step_flops(report["programs"]), chip.peak_tflops, mfu, steps, report["devices"])


def table(out: str) -> str:
    header = ("| config | target | chips (hosts) | fits | GiB per chip (worst bucket) | of usable | padding | "
              "XLA / formula FLOPs | est. step at 30% MFU* | est. training time* | compile here | command |")
    rows = [header, "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    pairs = [(c, t) for c in CONFIGS for t in TARGETS] + list(EXTRA)
    for config, target in pairs:
        path = row_file(out, config, target)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            r = json.load(f)
        train = [p for p in r["programs"] if p["name"].startswith("train")]
        worst = max(train, key=lambda p: p["total_bytes"] or 0)
        total = worst["total_bytes"]
        gib = f"{total / 2**30:.2f}" if worst["memory"] else f"> {total / 2**30:.2f}"
        share = f"{total / worst['budget_bytes']:.0%}" if worst["budget_bytes"] else "–"
        padding = f"{min(p['padding_share'] for p in train):.0%}–{max(p['padding_share'] for p in train):.0%}"
        ratios = [p["flops_ratio"] for p in train if p["flops_ratio"]]
        ratio = (f"{min(ratios):.3f}–{max(ratios):.3f}" if ratios else
                 "– (GPU: XLA gives none)" if r["fits"] else "– (did not compile)")
        e = estimate(r)
        step = f"{_ms(min(e['step_s'].values()))}–{_ms(max(e['step_s'].values()))} ms" if e else "–"
        hours = f"{e['hours']:.2g} h" if e else "–"
        seconds = sum(p["compile_s"] for p in r["programs"])
        fits = "yes" if r["fits"] else "**no**: " + r["stderr_last_line"].removeprefix("transformer-jax compile: ")
        rows.append(f"| {config} | {target} | {r['devices']} ({r['hosts']}) | {fits} | {gib} | {share} | {padding} | "
                    f"{ratio} | {step} | {hours} | {seconds / 60:.1f} min | `{' '.join(command(config, target))}` |")
    return "\n".join(rows)


def summary(out: str) -> str:
    """One line per target: each config's worst-bucket GiB per chip (✗: does not fit) and the estimated hours."""
    names = [c.replace(":enfr", " EN→FR") + ("" if ":" in c else " EN→DE") for c in CONFIGS]
    header = "| target | chips (hosts) | " + " | ".join(names) + " | est. training base / big EN→DE |"
    rows = [header, "|---|---:|" + "---:|" * len(CONFIGS) + "---:|"]
    for target in TARGETS + tuple(t for _, t in EXTRA):
        cells, hours, chips = [], {}, ""
        for config in CONFIGS:
            path = row_file(out, config, target)
            if not os.path.exists(path):
                cells.append("")
                continue
            with open(path) as f:
                r = json.load(f)
            chips = f"{r['devices']} ({r['hosts']})"
            total = max(p["total_bytes"] or 0 for p in r["programs"] if p["name"].startswith("train"))
            cells.append(f"{total / 2**30:.2f} GiB" if r["fits"] else f"> {total / 2**30:.2f} GiB ✗")
            if estimate(r) and ":" not in config:
                hours[config] = estimate(r)["hours"]
        if not chips:
            continue
        time = " / ".join(f"{hours[c]:.2g} h" if c in hours else "–" for c in ("base", "big"))
        rows.append(f"| {target} | {chips} | " + " | ".join(cells) + f" | {time} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder of the row JSONs and the table")
    ap.add_argument("--table", action="store_true", help="only write the table from the JSONs there")
    ap.add_argument("--jobs", type=int, default=2, help="compiles at once")
    ap.add_argument("--only", default="", help="comma-separated CONFIG@TARGET pairs (default: all)")
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out, "rows"), exist_ok=True)
    if not args.table:
        pairs = [(c, t) for c in CONFIGS for t in TARGETS] + list(EXTRA)
        if args.only:
            pairs = [tuple(p.split("@")) for p in args.only.split(",")]
        with open(os.path.join(args.out, "provenance.json"), "w") as f:
            json.dump({"started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                       "host": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                       "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                                check=False).stdout.strip(), "jobs": args.jobs}, f, indent=1)
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for message in pool.map(lambda p: compile_row(args.out, *p), pairs):
                print(message, flush=True)
    text = table(args.out)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(summary(args.out) + "\n")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
