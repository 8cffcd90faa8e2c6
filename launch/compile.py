"""`transformer-jax compile`: compile a run's training step (every length bucket) and its beam-search decode step
ahead of time for a TPU slice or GPU nodes — on any CPU — and say whether it fits the chips, with what headroom.

    transformer-jax compile --config=big --target=v5e-256
    transformer-jax compile --config=base:enfr --target=h100x8 --json
    transformer-jax compile --list_targets

The programs are `train`'s own (the batch plan for the target's hosts × devices, config.train.mesh, accumulation,
donation; model.dtype / attention_implementation "auto" as on the target) compiled by XLA's TPU or GPU compiler
(transformer_jax/aot.py). Per program it prints memory per chip against the chip's memory, XLA's FLOPs against
`describe`'s formula, the padding share, the compile time, and an estimated step time at --mfu of the chip's peak.
Exit status 0: everything fits; 1: something does not — one line on stderr names the program, its need against
the chip's memory and a configuration that fits, found by compiling a few candidates (transformer_jax/fit.py).
TPU and GPU targets need `pip install -e ".[aot]"` (libtpu and jax's CUDA plugin, no accelerator).
"""

import json
import math
import sys

import jax
from absl import flags

from transformer_jax import aot, fit
from transformer_jax import target as targets
from transformer_jax.launch.flags import CONFIG, JSON, TARGET
from transformer_jax.launch.verbs import Verb, refuse
from transformer_jax.train.step import passes_per_row

LIST_TARGETS = flags.DEFINE_bool("list_targets", False, "Print the target names (with each chip's memory and peak) "
                                 "and exit.")
BUCKETS = flags.DEFINE_list("buckets", None, "Row lengths of the buckets to compile (default: every bucket of the "
                            "config's batch plan), e.g. --buckets=256.")
DECODE = flags.DEFINE_bool("decode", True, "Also compile the beam-search decode step (config.decode.batch_size "
                           "sentences of --decode_length tokens).")
DECODE_LENGTH = flags.DEFINE_integer("decode_length", None, "Source length of the compiled decode batch (default: "
                                     "config.data.max_length, the longest the data admits).", lower_bound=1)
HBM_GIB = flags.DEFINE_float("hbm_gib", None, "Memory budget per chip in GiB (default: the chip's usable memory, "
                             "--list_targets); lower it to keep headroom.", lower_bound=0.0)
MFU = flags.DEFINE_float("mfu", 0.3, "Model-FLOPs utilisation assumed for the estimated step time (an estimate, "
                         "not a measurement).", lower_bound=0.01, upper_bound=1.0)
SUGGEST = flags.DEFINE_bool("suggest", True, "When something does not fit, compile candidates (fsdp, accumulation, "
                            "tensor, tokens per batch) to find a configuration that does.")
MAX_CANDIDATES = flags.DEFINE_integer("max_candidates", 4, "Candidate configurations compiled at most.", lower_bound=1)
for _name in ("config", "json", "target"):
    flags.declare_key_flag(_name)
VERB = Verb(
    "compile",
    overrides="override any field of the config, e.g. --config.train.mesh.fsdp=4 (configs are locked: a typo fails).")


def _fail(message: str) -> None:
    """One line and exit status 1: the command line is right but the work cannot be done (a compiler missing)."""
    sys.exit(f"transformer-jax compile: {message}")


def _usage(message: str) -> None:
    """One line and exit status 2: the command line is wrong (a flag missing, a bad target, a bucket not planned)."""
    refuse("compile", message)


def _log(message: str) -> None:
    print(f"[compile] {message}", file=sys.stderr, flush=True)


def list_targets() -> str:
    rows = ["target      devices  hosts  chip                          GiB (usable)    TFLOP/s bf16  topology"]
    for t in targets.examples():
        c = t.chip
        memory = f"{c.hbm_gib:g} ({c.usable_gib:g})" if c.hbm_gib else "–"
        rows.append(f"{t.name:<11} {t.num_devices:>7}  {t.num_hosts:>5}  {c.name:<29} {memory:<15} "
                    f"{c.peak_tflops or '–':>12}  {t.topology}")
    rows.append("Any size of the same forms works (v5e-32, v5p-256, h100x32); libtpu topologies too (v5e:4x4, "
                "v4:2x2x4).")
    return "\n".join(rows)


def compile_run(config, target: targets.Target, buckets: list[int] | None, decode: bool, decode_length: int | None,
                budget: int | None, mfu: float) -> tuple[dict, list[aot.Program]]:
    """Compiles the programs; returns the report (what --json prints) and the programs."""
    compiler = aot.Compiler.for_target(config, target, budget)
    choices = aot.compute_choices(config.model, target.platform)
    _log(f"{target.describe()}")
    _log(f"{config.name}: {choices['dtype']} compute, attention {choices['attention']} on {choices['platform']}; "
         f"mesh {dict(compiler.mesh.shape)}, accumulation {config.train.grad_accum_steps}")
    lengths = [b.length for b in compiler.plan.buckets]
    unknown = sorted(set(buckets or []) - set(lengths))
    if unknown:
        raise ValueError(f"--buckets: no bucket of length {unknown[0]}; the config's buckets: "
                         f"{', '.join(map(str, lengths))}.")
    programs = []
    for length in (buckets or lengths):  # one at a time, so progress shows between (minutes each for big)
        _log(f"compiling the training step of bucket {length} ...")
        programs += compiler.train([length])
        _log(_line(programs[-1]))
    if decode:
        _log("compiling the decode step ...")
        programs.append(compiler.decode(decode_length or int(config.data.max_length)))
        _log(_line(programs[-1]))
    estimate = aot.step_hours(*aot.step_flops(programs), target.chip.peak_tflops, mfu, int(config.train.num_steps),
                              target.num_devices)
    report = {"target": target.name, "target_description": target.describe(), "topology": target.topology,
            "devices": target.num_devices, "hosts": target.num_hosts, "chip": target.chip.name,
            "hbm_gib": target.chip.hbm_gib, "budget_gib": None if compiler.budget_bytes is None
            else compiler.budget_bytes / targets.GIB, "config": config.name, **choices,
            "mesh": dict(compiler.mesh.shape), "grad_accum_steps": int(config.train.grad_accum_steps),
            "passes_per_row": passes_per_row(config), "programs": [p.as_dict() for p in programs],
            "num_steps": int(config.train.num_steps), "estimate": estimate, "jax": jax.__version__,
            "fits": all(p.fits for p in programs)}
    return report, programs


def _line(p: aot.Program) -> str:
    if p.memory is None:
        return f"{p.name}: does not fit: needs {aot.gib(p.needed_bytes)} GiB ({p.compile_s:.0f} s)"
    m, share = p.memory, (f" = {p.memory['total'] / p.budget_bytes:.0%} of the budget" if p.budget_bytes else "")
    return (f"{p.name}: {aot.gib(m['total'])} GiB per chip{share} ({aot.gib(m['argument'])} arguments, "
            f"{aot.gib(m['temp'])} temporaries, {aot.gib(m['code'])} code); compiled in {p.compile_s:.0f} s")


def table(report: dict) -> str:
    """The report as text: one line per program, then the verdict and the estimate."""
    header = (f"{'program':<12} {'rows × len':>11} {'rows/chip':>9} {'padding':>7} {'args':>6} {'temp':>6} "
              f"{'code':>6} {'total GiB':>9} {'budget':>6} {'XLA/formula':>11} {'step s*':>8} {'compile s':>9}")
    config = (f"config {report['config']}: {report['dtype']} compute (model.dtype), attention {report['attention']} "
              f"(cached decoding: einsum); mesh {report['mesh']}, {report['grad_accum_steps']} accumulation step(s)")
    lines = [report["target_description"], config, "", header]
    step_s = (report["estimate"] or {}).get("step_s", {})
    for p in report["programs"]:
        m = p["memory"] or {}
        budget = f"{p['total_bytes'] / p['budget_bytes']:.0%}" if p["budget_bytes"] and p["total_bytes"] else "–"
        ratio = f"{p['flops_ratio']:.3f}" if p["flops_ratio"] else "–"
        padding = "–" if p["padding_share"] is None else f"{p['padding_share']:.0%}"
        total = aot.gib(m.get("total")) if m else f">{aot.gib(p['needed_bytes'])}"
        step = f"{step_s[p['name']]:.3f}" if p["name"] in step_s else "–"
        lines.append(f"{p['name']:<12} {p['rows']:>5} × {p['length']:<3} {p['rows_per_device']:>9} {padding:>7} "
                     f"{aot.gib(m.get('argument')):>6} {aot.gib(m.get('temp')):>6} {aot.gib(m.get('code')):>6} "
                     f"{total:>9} {budget:>6} {ratio:>11} {step:>8} {p['compile_s']:>9.0f}")
    if report["estimate"]:
        e = report["estimate"]
        flops = "XLA's FLOPs" if e["flops"] == "xla" else "the formula's FLOPs (XLA's GPU compiler counts none)"
        lines.append(f"* estimate: {flops} per chip at {e['mfu']:.0%} of {report['chip']}'s bf16 peak; "
                     f"train.num_steps at the buckets' mean step ≈ {e['hours']:.2g} h (not a measurement)")
    return "\n".join(lines)


def verdict(report: dict) -> str:
    programs = report["programs"]
    largest = max((p for p in programs if p["memory"]), key=lambda p: p["memory"]["total"], default=None)
    if report["fits"]:
        if largest and largest["budget_bytes"]:
            headroom = 1 - largest["memory"]["total"] / largest["budget_bytes"]
            return (f"fits: the largest program ({largest['name']}) uses {aot.gib(largest['memory']['total'])} of "
                    f"{report['budget_gib']:.2f} GiB per chip ({headroom:.0%} headroom)")
        return "compiled (no memory budget known for this target)"
    return "does not fit"


def main(argv: list[str]) -> None:
    del argv
    if LIST_TARGETS.value:
        jax.config.update("jax_platforms", "cpu")  # topologies only: no accelerator needed
        try:
            print(list_targets())
        except targets.TargetUnavailable as e:
            _fail(str(e))
        return
    if not TARGET.value:
        _usage("--target is required, e.g. --target=v5e-256 or --target=h100x8 (--list_targets shows them).")
    try:
        target = targets.parse(TARGET.value)
    except targets.TargetError as e:
        _usage(str(e))
    try:
        buckets = [int(b) for b in BUCKETS.value] if BUCKETS.value else None
    except ValueError:
        _usage(f"--buckets={','.join(BUCKETS.value)}: give row lengths, e.g. --buckets=64,256.")
    if not target.is_local:
        jax.config.update("jax_platforms", "cpu")  # XLA's TPU/GPU compilers run on the CPU host; no device needed
    config = CONFIG.value
    budget = int(HBM_GIB.value * targets.GIB) if HBM_GIB.value is not None else None
    try:
        report, programs = compile_run(config, target, buckets, DECODE.value, DECODE_LENGTH.value, budget, MFU.value)
    except targets.TargetUnavailable as e:
        _fail(str(e))
    except ValueError as e:  # a mesh that does not divide the target's devices, an unknown bucket
        _usage(str(e))
    failing = [p for p in report["programs"] if not p["fits"]]
    suggestion = None
    if failing and SUGGEST.value and any(p["name"].startswith("train") for p in failing):
        suggestion = fit.suggest(config, target, [p for p in programs if not p.fits and p.name.startswith("train")],
                                 programs[0].budget_bytes or math.inf, MAX_CANDIDATES.value, _log)
        if suggestion:
            report["suggestion"] = {"overrides": suggestion.candidate.overrides, "flags": suggestion.candidate.flags,
                                    "changes_recipe": suggestion.candidate.changes_recipe,
                                    "programs": [p.as_dict() for p in suggestion.programs]}
    if JSON.value:
        print(json.dumps(report))
    else:
        print(table(report))
        print(verdict(report))
    if not report["fits"]:
        print(f"transformer-jax compile: {_failure_line(report, failing, suggestion)}", file=sys.stderr)
        sys.exit(1)


def _failure_line(report: dict, failing: list[dict], suggestion) -> str:
    """One line: what does not fit, its need against the budget, and what fits instead."""
    worst = max(failing, key=lambda p: p["total_bytes"] or 0)
    what = f"bucket {worst['length']}" if worst["name"].startswith("train") else "the decode step"
    need = (f"{aot.gib(worst['total_bytes'])} GiB per chip" if worst["memory"]
            else f"more than {aot.gib(worst['needed_bytes'])} GiB per chip")
    line = f"{what} needs {need}, {report['target']} has {report['budget_gib']:.2f} GiB usable ({report['chip']})"
    if suggestion is not None:
        largest = suggestion.largest
        recipe = " (changes the recipe's batch)" if suggestion.candidate.changes_recipe else ""
        return (f"{line}; it fits with {suggestion.candidate.flags}{recipe} "
                f"({aot.gib(largest.total_bytes)} GiB at most, compiled)")
    if worst["name"] == "decode":
        return f"{line}; lower --config.decode.batch_size"
    return f"{line}; no candidate compiled to fit (try a larger target)"
