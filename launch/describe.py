"""`transformer-jax describe`: the resolved config, parameter counts and training FLOPs per target token.

    transformer-jax describe --config=configs/table3.py:C5 --json
"""

import json

from absl import flags

from launch.flags import CONFIG, JSON
from transformer_jax.model.size import count_parameters, flops_per_target_token

SEQ_LEN = flags.DEFINE_integer("seq_len", 32, "Sentence length assumed by the attention term of the FLOPs formula.")


def describe(config, seq_len: int) -> dict:
    """The numbers `describe` prints, as a dict (see transformer_jax/model/size.py for the formula)."""
    counts = count_parameters(config.model)
    return {
        "name": config.name,
        "params_total": counts["total"],
        "params_embedding": counts["embedding"],
        "params_nonembedding": counts["nonembedding"],
        "flops_per_target_token": flops_per_target_token(config.model, seq_len),
        "flops_formula": "3 * (2*(P_enc+P_dec matrices) + 2*d_model*vocab + attention(seq_len)); see model/size.py",
        "seq_len": seq_len,
        "config": config.to_dict(),
    }


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
            ("train FLOPs / target token", f"{result['flops_per_target_token']:.4g} (seq_len {result['seq_len']})")]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def main(argv: list[str]) -> None:
    del argv
    config = CONFIG.value
    result = describe(config, SEQ_LEN.value)
    if not JSON.value:
        print(config)
        print(_table(result))
    print(json.dumps(result))
