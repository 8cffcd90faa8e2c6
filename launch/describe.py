"""`transformer-jax describe`: the resolved config, parameter counts, training FLOPs per target token, and the run's
plan on a cluster layout (batch shapes, real tokens per step, checkpoint schedule, averaging window, memory).

    transformer-jax describe --config=configs/table3.py:C5 --json
    transformer-jax describe --config=configs/base.py --num_processes=8 --devices_per_process=4 [--memory]
"""

import json

import jax
from absl import flags

from transformer_jax.launch.cluster import NUM_PROCESSES
from transformer_jax.launch.flags import CONFIG, JSON
from transformer_jax.model.size import count_parameters, flops_per_target_token
from transformer_jax.train.plan import device_memory, layout_plan

SEQ_LEN = flags.DEFINE_integer("seq_len", 32, "Sentence length assumed by the attention term of the FLOPs formula.")
DEVICES_PER_PROCESS = flags.DEFINE_integer(
    "devices_per_process", None, "Plan for this many accelerators per process (with --num_processes; default: this "
    "machine's local devices).", lower_bound=1)
MEMORY = flags.DEFINE_bool(
    "memory", False, "Also compile one device's training step on this machine's backend and report its memory "
    "(slow for the big models: ~1 min on CPU).")
for _name in ("config", "json", "num_processes"):
    flags.declare_key_flag(_name)
OVERRIDES = "override any field of the config, e.g. --config.model.num_heads=16 (configs are locked: a typo fails)."


def describe(config, seq_len: int, num_processes: int = 1, devices_per_process: int | None = None,
             memory: bool = False) -> dict:
    """The numbers `describe` prints, as a dict (see transformer_jax/model/size.py for the formula and
    transformer_jax/train/plan.py for the layout plan)."""
    counts = count_parameters(config.model)
    devices = devices_per_process or jax.local_device_count()
    plan = layout_plan(config, num_processes, devices)
    result = {
        "name": config.name,
        "params_total": counts["total"],
        "params_embedding": counts["embedding"],
        "params_nonembedding": counts["nonembedding"],
        "flops_per_target_token": flops_per_target_token(config.model, seq_len),
        "flops_formula": ("3 * (2*(P_enc+P_dec matrices) + 2*d_model*vocab + attention(seq_len, attention_window)); "
                          "see model/size.py"),
        "seq_len": seq_len,
        **plan.as_dict(int(config.data.tokens_per_batch), int(config.train.grad_accum_steps)),
    }
    if memory:
        result["device_memory"] = device_memory(config, plan)
    result["config"] = config.to_dict()
    return result


def _table(result: dict) -> str:
    m = result["config"]["model"]
    rows = [("config", result["name"]),
            ("layers (enc+dec)", f"{m['num_encoder_layers']}+{m['num_decoder_layers']}"),
            ("d_model / d_ff", f"{m['d_model']} / {m['d_ff']}"),
            ("h / d_k / d_v", f"{m['num_heads']} / {m['d_k']} / {m['d_v']}"),
            ("positions", m["positional"]), ("vocab", str(m["vocab_size"])),
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
    rows.append(("checkpoints", f"every {every:,} steps and the last" if every else "time-based only"))
    if result["average_steps"]:
        steps = result["average_steps"]
        rows.append((f"avg{result['average_last']} window",
                     f"steps {steps[0]:,}–{steps[-1]:,} ({result['average_window_steps']:,} steps)"))
    if "device_memory" in result:
        mem = result["device_memory"]
        rows.append(("memory per device", (f"{mem['total_bytes'] / 2**30:.2f} GiB for {mem['rows']} × {mem['length']} "
                                          f"(compiled for {jax.default_backend()})")))
    rows += [("warning", line) for line in result["warnings"]]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def main(argv: list[str]) -> None:
    del argv
    config = CONFIG.value
    result = describe(config, SEQ_LEN.value, NUM_PROCESSES.value or 1, DEVICES_PER_PROCESS.value, MEMORY.value)
    if not JSON.value:
        print(config)
        print(_table(result))
    print(json.dumps(result))
