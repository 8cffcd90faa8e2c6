"""Beam-search decoding throughput on the peer shapes (§6.1 settings: beam 4, α 0.6).

    python bench/decode_throughput.py --shapes=tiny,small,base [--beam=4] [--budget-s=10] [--profile]

One decode = a batch of 32 sentences of 24 source tokens (random ids, random weights from
transformer_jax.train.step), encoded once, then beam search for exactly 34 target tokens per sentence: the EOS
logit is set to -inf so no hypothesis can end early, the peers' setting (../shared/bench/peers/PEERS.md). The
decode function is the library's (transformer_jax/decode/translate.make_decode_fn with ``forced_length``). Compilation is excluded (warm-up calls).
Generated tokens per decode = 32 × 34. Prints the fp32 matmul peak measured in the same run (the machine may be
shared), one JSON line per shape, and a last JSON line with every shape. --profile splits a decode into the
encoder, the cached decoder steps alone, and the search's own work (log_softmax, top-k, the cache ancestry).
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

from bench.common import matmul_peak_gflops, shape_config, summary, timed
from transformer_jax import host_memory, sharding
from transformer_jax.data.tokenizer import EOS_ID
from transformer_jax.decode.beam_search import beam_search
from transformer_jax.decode.translate import make_decode_fn
from transformer_jax.model.transformer import START_ID
from transformer_jax.run import provenance
from transformer_jax.train.step import init_state, make_setup


def profile_parts(config, graphdef, params, inputs, gen_len: int, beam_size: int, cache_len: int,
                  budget_s: float) -> dict:
    """Median seconds of the three parts of one decode, each jitted alone.

    ``encoder_s``: encoder + cross-attention K/V (shared by the beams). ``decoder_steps_s``: ``gen_len`` cached decoder
    steps at [B*K] rows in a loop, without search. ``search_s``: the beam search with a step function that returns
    fixed logits, i.e. the search's own work (log_softmax over K·V, top-k, the cache's ancestry and sequences).
    """
    batch, vocab = inputs.shape[0], config.model.vocab_size
    rows = batch * beam_size

    @jax.jit
    def encode(params, inputs):
        model = nnx.merge(graphdef, params)
        return model.prepare_memory(model.encode(inputs), inputs)

    @jax.jit
    def decoder_steps(params, memory):
        model = nnx.merge(graphdef, params)

        def body(_, carry):
            tokens, cache = carry
            logits, cache = model.decode_step(tokens, memory, cache)
            return jnp.argmax(logits, axis=-1).astype(jnp.int32), cache

        carry = (jnp.zeros((rows,), jnp.int32), model.init_cache(batch, cache_len, beam_size))
        return jax.lax.fori_loop(0, gen_len, body, carry)[0]

    @jax.jit
    def search(logits):
        model = nnx.merge(graphdef, params)
        cache = model.init_cache(batch, cache_len, beam_size)

        def step_fn(tokens, cache):  # the model replaced by fixed logits; the cache is still carried
            return logits + tokens[:, None].astype(logits.dtype) * 0, cache

        return beam_search(step_fn, cache, batch_size=batch, beam_size=beam_size, max_decode_len=cache_len,
                           max_lengths=jnp.full((batch,), gen_len, jnp.int32), length_penalty=config.decode.length_penalty,
                           eos_id=EOS_ID, start_id=START_ID, num_best=1, reorder_fn=model.reorder_cache).sequences

    logits = jax.random.normal(jax.random.PRNGKey(1), (rows, vocab)).at[:, EOS_ID].set(-jnp.inf)
    memory = encode(params, inputs)
    parts = {}
    for name, fn in (("encoder_s", lambda: encode(params, inputs)),
                     ("decoder_steps_s", lambda: decoder_steps(params, memory)),
                     ("search_s", lambda: search(logits))):
        parts[name] = summary(timed(lambda fn=fn: jax.block_until_ready(fn()), budget_s=budget_s / 3))["median_s"]
    return parts


def bench_shape(name: str, batch: int, src_len: int, gen_len: int, beam_size: int, budget_s: float,
                tight_cache: bool, profile: bool) -> dict:
    config = shape_config(name)
    mesh = sharding.make_mesh(config.train.mesh)
    setup = make_setup(config, mesh)
    params = init_state(setup)["params"]
    rng = np.random.RandomState(0)
    inputs = jnp.asarray(rng.randint(3, config.model.vocab_size, (batch, src_len)).astype(np.int32))
    config.decode.beam_size = beam_size
    decode = make_decode_fn(config, setup.graphdef, forced_length=gen_len, cache_length=gen_len if tight_cache else None)
    key = jax.random.PRNGKey(0)
    ids = np.asarray(decode(params, inputs, key))
    lengths = (ids != 0).sum(-1)
    assert bool((lengths == gen_len).all()), f"forced length broken: {lengths}"
    times = timed(lambda: jax.block_until_ready(decode(params, inputs, key)), budget_s=budget_s)
    s = summary(times)
    tokens = batch * gen_len
    cache_len = gen_len if tight_cache else min(src_len + config.decode.max_length_offset, config.model.max_len)
    result = {"shape": name, "beam_size": beam_size, "batch": batch, "src_len": src_len, "gen_len": gen_len,
              "cache_len": cache_len, "tokens_per_s": tokens / s["median_s"],
              "sentences_per_s": batch / s["median_s"], "decode_s": s["median_s"], **s}
    if profile:
        parts = profile_parts(config, setup.graphdef, params, inputs, gen_len, beam_size, cache_len, budget_s)
        result.update(parts, unexplained_s=s["median_s"] - sum(parts.values()),
                      decoder_step_ms=1e3 * parts["decoder_steps_s"] / gen_len,
                      search_step_ms=1e3 * parts["search_s"] / gen_len)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="tiny,small,base", help="comma-separated: tiny, small, base")
    ap.add_argument("--batch", type=int, default=32, help="sentences per decode")
    ap.add_argument("--src-len", type=int, default=24, help="source tokens per sentence")
    ap.add_argument("--gen-len", type=int, default=34, help="target tokens generated per sentence (forced)")
    ap.add_argument("--beam", type=int, default=4, help="beam size (§6.1: 4)")
    ap.add_argument("--budget-s", type=float, default=10.0, help="timed seconds per shape (after warm-up)")
    ap.add_argument("--tight-cache", action="store_true", help="cache of gen_len slots instead of src_len + 50")
    ap.add_argument("--profile", action="store_true", help="also time the encoder, the decoder steps, the search (top-k, ancestry)")
    ap.add_argument("--peak-gflops", type=float, default=None, help="skip measuring the matmul peak")
    args = ap.parse_args()
    host_memory.keep_freed_memory()  # as the CLI does, before the first computation
    peak = args.peak_gflops or matmul_peak_gflops()
    print(json.dumps({"matmul_peak_gflops": peak, "measured": args.peak_gflops is None,
                      "devices": [str(d) for d in jax.devices()], "cpu_model": provenance.cpu_model(),
                      "host_malloc": host_memory.setting()}), flush=True)
    results = []
    for name in args.shapes.split(","):
        r = bench_shape(name, args.batch, args.src_len, args.gen_len, args.beam, args.budget_s, args.tight_cache,
                        args.profile)
        r["peak_gflops"] = peak
        results.append(r)
        print(json.dumps(r), flush=True)
    last = results[-1]
    print(json.dumps({"shape": last["shape"], "tokens_per_s": last["tokens_per_s"],
                      "sentences_per_s": last["sentences_per_s"], "peak_gflops": peak, "results": results}))


if __name__ == "__main__":
    main()
