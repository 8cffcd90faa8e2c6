"""Table 1 measured: forward+backward time of one self-attention layer against the sequence length n.

    python bench/complexity.py [--lengths=16,32,...,1024] [--windows=0,16] [--d_model=512] [--plot=PATH]

The paper's Table 1 gives self-attention O(n²·d) work per layer and restricted self-attention (neighbourhood r)
O(r·n·d). This times one encoder layer of the model's own code (`EncoderLayer`: multi-head self-attention and the
position-wise FFN, each with its residual and LayerNorm; h = 8, d_ff = 4·d, float32, batch 1, dropout on as in
training) for full attention (window 0) and restricted attention (``model.attention_window`` r, computed in
blocks: `banded_attention`), forward and backward (gradients of every parameter and of the input).

Each (window, n) prints one JSON line (median and best seconds, the time per token); the last line is a summary
with the log-log slope of time against n fitted on n ≥ d (where n²·d overtakes the n·d² of the projections and
FFN) and on the whole range. Full attention's slope tends to 2 once n > d; restricted attention stays near 1.
With --plot, a log-log figure of the times with the fitted slopes.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from bench.common import summary, timed
from transformer_jax.configs import base
from transformer_jax.model.layers import EncoderLayer
from transformer_jax.model.transformer import self_attention_mask


def layer_step(d_model: int, window: int, length: int):
    """A jitted forward+backward of one encoder layer on one sequence of ``length`` tokens; returns a thunk."""
    m = base.get_config().model
    m.d_model, m.d_ff, m.num_heads, m.d_k, m.d_v = d_model, 4 * d_model, 8, d_model // 8, d_model // 8
    m.dtype, m.attention_window, m.attention_implementation = "float32", window, "cpu"
    graphdef, params = nnx.split(EncoderLayer(m, rngs=nnx.Rngs(0)))
    x = jax.random.normal(jax.random.PRNGKey(1), (1, length, d_model), jnp.float32)
    segmentation, position = jnp.ones((1, length), jnp.int32), jnp.arange(length, dtype=jnp.int32)[None]
    key = jax.random.PRNGKey(2)

    @jax.jit
    def step(params, x):
        def loss(params, x):
            mask = self_attention_mask(segmentation, position, window)  # a BandMask on long rows with r > 0
            return jnp.sum(nnx.merge(graphdef, params)(x, mask, key) ** 2)

        return jax.grad(loss, argnums=(0, 1))(params, x)

    return lambda: jax.block_until_ready(step(params, x))


def slope(lengths: list[int], seconds: list[float]) -> float | None:
    """Least-squares slope of log(time) against log(n); None with fewer than two points."""
    if len(lengths) < 2:
        return None
    return float(np.polyfit(np.log(lengths), np.log(seconds), 1)[0])


def plot(results: dict[int, list[dict]], fits: dict[int, dict], d_model: int, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    for window, rows in results.items():
        n = [row["n"] for row in rows]
        label = "full self-attention" if window == 0 else f"restricted, r = {window}"
        ax.loglog(n, [row["median_s"] * 1e3 for row in rows], "o-", base=2,
                  label=f"{label} (slope {fits[window]['slope_n_ge_d']:.2f} for n ≥ d)")
    ax.axvline(d_model, color="grey", linestyle=":", linewidth=1)
    ax.text(d_model, ax.get_ylim()[0], " n = d", color="grey", va="bottom")
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("forward + backward time per layer (ms)")
    ax.set_title(f"One encoder layer, d = {d_model}, h = 8, this CPU (Table 1)")
    ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="16,32,64,128,256,512,1024,2048",
                        help="sequence lengths n, comma-separated")
    parser.add_argument("--windows", default="0,16", help="0 = full attention, r > 0 = restricted; comma-separated")
    parser.add_argument("--d_model", type=int, default=512, help="model width d (h = 8, d_ff = 4·d)")
    parser.add_argument("--budget_s", type=float, default=3.0, help="timing budget per point, seconds")
    parser.add_argument("--plot", default="", help="write the log-log figure here (PNG)")
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    windows = [int(r) for r in args.windows.split(",")]
    results: dict[int, list[dict]] = {}
    for window in windows:
        results[window] = []
        for n in lengths:
            stats = summary(timed(layer_step(args.d_model, window, n), min_iters=3, budget_s=args.budget_s))
            row = {"window": window, "n": n, "d_model": args.d_model, **stats,
                   "us_per_token": stats["median_s"] / n * 1e6}
            results[window].append(row)
            print(json.dumps(row), flush=True)
    fits = {}
    for window, rows in results.items():
        large = [row for row in rows if row["n"] >= args.d_model]
        fits[window] = {"slope_n_ge_d": slope([r["n"] for r in large], [r["median_s"] for r in large]),
                        "slope_all": slope([r["n"] for r in rows], [r["median_s"] for r in rows])}
    print(json.dumps({"summary": {str(w): f for w, f in fits.items()}, "d_model": args.d_model,
                      "backend": jax.default_backend(), "cpu_count": os.cpu_count()}))
    if args.plot:
        plot(results, fits, args.d_model, args.plot)


if __name__ == "__main__":
    main()
