"""`transformer-jax describe`: a config's model, parameter counts, training FLOPs per target token, and the run's
plan on a cluster layout (batch shapes, real tokens per step, checkpoint schedule, averaging window, memory).

    transformer-jax describe --config=table3:C5                     # a table to read
    transformer-jax describe --config=table3:C5 --print_config     # ... after every field of the resolved config
    transformer-jax describe --config=table3:C5 --json             # one JSON document (the config in "config")
    transformer-jax describe --config=configs/base.py --num_processes=8 --devices_per_process=4
    transformer-jax describe --config=configs/big.py --target=v5e-256 [--memory]

Without --json it prints a table for a person: the model's shape, counts, the step plan, the checkpoint schedule and
a ``warning`` line for anything that will not work as configured (e.g. an avgN the schedule cannot give). With
--json stdout is exactly one JSON document (the same numbers, the warnings, and the whole resolved config), for
scripts. --print_config adds every field of the resolved config above the table (ml_collections' listing).

With --target the layout is the target's hosts × devices and "auto" dtype / attention are the target's; --memory
compiles the largest bucket's training step for the target (transformer_jax/aot.py, as `compile` does).
"""

import json
import sys

import jax
from absl import flags

from transformer_jax import aot
from transformer_jax import target as targets
from transformer_jax.launch.cluster import NUM_PROCESSES
from transformer_jax.launch.flags import CONFIG, JSON, TARGET
from transformer_jax.launch.verbs import Verb, refuse
from transformer_jax.model.size import count_parameters, flops_per_target_token
from transformer_jax.train.plan import layout_plan

SEQ_LEN = flags.DEFINE_integer("seq_len", 32, "Sentence length assumed by the attention term of the FLOPs formula.")
DEVICES_PER_PROCESS = flags.DEFINE_integer(
    "devices_per_process", None, "Plan for this many accelerators per process (with --num_processes; default: this "
    "machine's local devices).", lower_bound=1)
PRINT_CONFIG = flags.DEFINE_bool(
    "print_config", False, "Also print every field of the resolved config (the overrides applied) above the table; "
    "--json holds it as \"config\" instead.")
MEMORY = flags.DEFINE_bool(
    "memory", False, "Also compile the training step of the bucket with the most tokens per device for --target "
    "(default: this machine) and report XLA's memory per device (minutes for big; `compile` does every bucket).")
for _name in ("config", "json", "num_processes", "target"):
    flags.declare_key_flag(_name)
VERB = Verb(
    "describe",
    overrides="override any field of the config, e.g. --config.model.num_heads=16 (configs are locked: a typo fails).")


def describe(config, seq_len: int, num_processes: int | None = None, devices_per_process: int | None = None,
             memory: bool = False, target: targets.Target | None = None) -> dict:
    """The numbers `describe` prints, as a dict (see transformer_jax/model/size.py for the formula and
    transformer_jax/train/plan.py for the layout plan).

    The layout is ``target``'s hosts × devices when given (``num_processes`` / ``devices_per_process`` must then
    agree or be None), else ``num_processes`` (default 1) × ``devices_per_process`` (default: the local devices).
    """
    counts = count_parameters(config.model)
    if target is not None and not target.is_local:
        for name, given, own in (("num_processes", num_processes, target.num_hosts),
                                 ("devices_per_process", devices_per_process, target.devices_per_host)):
            if given is not None and given != own:
                raise ValueError(f"--{name}={given} contradicts --target={target.name} ({own}); give one of them.")
        num_processes, devices_per_process = target.num_hosts, target.devices_per_host
    plan = layout_plan(config, num_processes or 1, devices_per_process or jax.local_device_count())
    platform = target.platform if target is not None else jax.default_backend()
    result = {
        "name": config.name,
        "params_total": counts["total"],
        "params_embedding": counts["embedding"],
        "params_nonembedding": counts["nonembedding"],
        "flops_per_target_token": flops_per_target_token(config.model, seq_len),
        "flops_formula": ("3 * (2*(P_enc+P_dec matrices) + 2*d_model*vocab + attention(seq_len, attention_window)); "
                          "see model/size.py"),
        "seq_len": seq_len,
        "target": target.name if target is not None else None,
        **aot.compute_choices(config.model, platform),
        **plan.as_dict(int(config.data.tokens_per_batch), int(config.train.grad_accum_steps)),
    }
    if memory:
        result["device_memory"] = device_memory(config, target or targets.local_target(), plan)
    result["config"] = config.to_dict()
    return result


def device_memory(config, target: targets.Target, plan) -> dict:
    """XLA's memory per device of the training step of the bucket with the most tokens per device (ties: the
    longest rows, whose attention is largest), compiled for ``target``."""
    compiler = aot.Compiler.for_target(config, target)
    if compiler.plan.num_devices != plan.num_devices:
        raise ValueError(f"--memory compiles for a target: the layout of {plan.num_processes} × "
                         f"{plan.devices_per_process} devices is not this machine's; add --target (e.g. v5e-32, "
                         f"h100x32).")
    bucket = max(plan.buckets, key=lambda b: (b.rows * b.length, b.length))
    program = compiler.train([bucket.length])[0]
    return {"program": program.name, "rows": program.rows_per_device, "length": bucket.length,
            "target": target.name, "fits": program.fits, "budget_bytes": program.budget_bytes,
            **{f"{k}_bytes": v for k, v in (program.memory or {"total": program.needed_bytes}).items()}}


def _table(result: dict) -> str:
    """The human-readable summary of :func:`describe`'s ``result`` (what `describe` prints without --json)."""
    m, t = result["config"]["model"], result["config"]["train"]
    rows = [("config", result["name"]),
            ("layers (enc+dec)", f"{m['num_encoder_layers']}+{m['num_decoder_layers']}"),
            ("d_model / d_ff", f"{m['d_model']} / {m['d_ff']}"),
            ("h / d_k / d_v", f"{m['num_heads']} / {m['d_k']} / {m['d_v']}"),
            ("positions", m["positional"]), ("vocab", str(m["vocab_size"])),
            ("training", (f"{t['num_steps']:,} steps, warmup {t['warmup_steps']:,}, P_drop {m['dropout_rate']}, "
                          f"ε_ls {t['label_smoothing']}")),
            ("compute", (f"{result['dtype']} (model.dtype={m['dtype']}), attention {result['attention']} "
                         f"(attention_implementation={m['attention_implementation']}) on {result['platform']}")),
            ("params total", f"{result['params_total']:,} ({result['params_total'] / 1e6:.1f}M)"),
            ("params embedding", f"{result['params_embedding']:,}"),
            ("params non-embedding", f"{result['params_nonembedding']:,}"),
            ("train FLOPs / target token", f"{result['flops_per_target_token']:.4g} (seq_len {result['seq_len']})"),
            ("layout", (f"{result['num_processes']} processes × {result['devices_per_process']} devices, "
                       f"{result['grad_accum_steps']} accumulation step(s)"))]
    for (rows_, length), per_device, filled, fill, tokens in zip(
            result["batch_shapes"], result["rows_per_device"], result["filled_rows"], result["fill_rates"],
            result["tokens_per_step"]):
        padding = f", {rows_ - filled} empty" if rows_ > filled else ""
        rows.append((f"step, bucket {length}", (f"{rows_} × {length} ({per_device} rows per device{padding}); "
                     f"~{tokens:,} real tokens per side at fill {fill:.2f} "
                     f"(configured {result['configured_tokens_per_step']:,})")))
    every = result["checkpoint_every_steps"]
    rows.append(("checkpoints", (f"every {every:,} steps and the last" if every else "time-based only")
                 + f", keep {t['keep_checkpoints']}"))
    if result["average_steps"]:
        steps, last = result["average_steps"], result["average_last"]
        short = f"only {len(steps)} of {last} checkpoints: " if len(steps) < last else ""
        rows.append((f"avg{last} window", f"{short}steps {steps[0]:,}–{steps[-1]:,} "
                     f"({result['average_window_steps']:,} steps)" if len(steps) > 1 else f"{short}step {steps[0]:,}"))
    if "device_memory" in result:
        mem = result["device_memory"]
        budget = f" of {mem['budget_bytes'] / 2**30:.2f} usable" if mem["budget_bytes"] else ""
        rows.append(("memory per device", (f"{aot.gib(mem['total_bytes'])} GiB{budget} for {mem['rows']} × "
                                          f"{mem['length']} (XLA, compiled for {mem['target']}"
                                          f"{'' if mem['fits'] else ': does not fit'})")))
    rows += [("warning", line) for line in result["warnings"]]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def main(argv: list[str]) -> None:
    del argv
    if JSON.value and PRINT_CONFIG.value:
        refuse("describe", "--print_config prints the config for a person; with --json it is the JSON's \"config\". "
              "Give one of them.")
    config = CONFIG.value
    try:
        target = targets.parse(TARGET.value) if TARGET.value else None
        if target is not None and not target.is_local:
            jax.config.update("jax_platforms", "cpu")  # a TPU/GPU target is described (and compiled) on the CPU
        result = describe(config, SEQ_LEN.value, NUM_PROCESSES.value, DEVICES_PER_PROCESS.value, MEMORY.value, target)
    except ValueError as e:  # a bad --target, a layout that contradicts it or the config: the command line
        refuse("describe", str(e))
    except targets.TargetUnavailable as e:  # the compiler for --memory is not installed
        sys.exit(f"transformer-jax describe: {e}")
    if JSON.value:
        print(json.dumps(result))  # one document: scripts read stdout whole
        return
    if PRINT_CONFIG.value:
        print(config)
    print(_table(result))
