"""Beam-search decoding throughput on the peer shapes (§6.1 settings: beam 4, α 0.6): ours (JAX) and CTranslate2.

    python bench/decode_throughput.py --shapes=tiny,small,base [--beam=4] [--budget-s=10] [--profile]
    python bench/decode_throughput.py --engine=jax,ctranslate2 --quantization=none,int8   # JAX fp32, CT2 fp32, CT2 int8

One decode = a batch of 32 sentences of 24 source tokens (random ids, the last one EOS; random weights from
transformer_jax.train.step), encoded once, then beam search for exactly 34 target tokens per sentence: the EOS
logit is set to -inf so no hypothesis can end early, the peers' setting (../shared/bench/peers/PEERS.md). The
JAX decode function is the library's (transformer_jax/decode/translate.make_decode_fn with ``forced_length``);
``--engine=ctranslate2`` exports the same weights (transformer_jax/export/ctranslate2.py, stored as each
``--quantization``) and decodes the same inputs with CTranslate2's beam search (beam, length_penalty α, min = max
decoding length = 34, as the peers run it; ``--threads`` intra-op threads, default: this process's cores).
Compilation / loading is excluded (warm-up calls). Generated tokens per decode = 32 × 34. Prints the fp32 matmul
peak measured in the same run (the machine may be shared), one JSON line per shape and engine (CTranslate2's with
its speed relative to JAX's, ``vs_jax``), and a last JSON line with every result. --profile (JAX) splits a decode
into the encoder, the cached decoder steps alone, and the search's own work (log_softmax, top-k, the cache
ancestry).
"""

import argparse
import json
import os
import sys
import tempfile

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
from transformer_jax.export import ENGINES, QUANTIZATIONS
from transformer_jax.export import ctranslate2 as ct2
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


def shape_inputs(name: str, batch: int, src_len: int) -> tuple:
    """(config, setup, random parameters, int32[batch, src_len] random sources ending with EOS) of a peer shape."""
    config = shape_config(name)
    setup = make_setup(config, sharding.make_mesh(config.train.mesh))
    params = init_state(setup)["params"]
    rng = np.random.RandomState(0)
    inputs = rng.randint(3, config.model.vocab_size, (batch, src_len)).astype(np.int32)
    inputs[:, -1] = EOS_ID
    return config, setup, params, jnp.asarray(inputs)


def record(name: str, engine: str, inputs: jax.Array, gen_len: int, beam_size: int, times: list[float]) -> dict:
    s = summary(times)
    batch, src_len = inputs.shape
    return {"shape": name, "engine": engine, "beam_size": beam_size, "batch": batch, "src_len": src_len,
            "gen_len": gen_len, "tokens_per_s": batch * gen_len / s["median_s"],
            "sentences_per_s": batch / s["median_s"], "decode_s": s["median_s"], **s}


def bench_jax(name: str, config, setup, params, inputs: jax.Array, gen_len: int, beam_size: int, budget_s: float,
              tight_cache: bool, profile: bool) -> dict:
    """This library's beam search (make_decode_fn) on ``inputs``, every sentence forced to ``gen_len`` tokens."""
    config.decode.beam_size = beam_size
    decode = make_decode_fn(config, setup.graphdef, forced_length=gen_len, cache_length=gen_len if tight_cache else None)
    key = jax.random.PRNGKey(0)
    ids = np.asarray(decode(params, inputs, key))
    lengths = (ids != 0).sum(-1)
    assert bool((lengths == gen_len).all()), f"forced length broken: {lengths}"
    times = timed(lambda: jax.block_until_ready(decode(params, inputs, key)), budget_s=budget_s)
    src_len = inputs.shape[1]
    cache_len = gen_len if tight_cache else min(src_len + config.decode.max_length_offset, config.model.max_len)
    result = {**record(name, "jax", inputs, gen_len, beam_size, times), "quantization": "none", "cache_len": cache_len}
    if profile:
        parts = profile_parts(config, setup.graphdef, params, inputs, gen_len, beam_size, cache_len, budget_s)
        result.update(parts, unexplained_s=result["median_s"] - sum(parts.values()),
                      decoder_step_ms=1e3 * parts["decoder_steps_s"] / gen_len,
                      search_step_ms=1e3 * parts["search_s"] / gen_len)
    return result


def bench_ctranslate2(name: str, config, params, inputs: jax.Array, gen_len: int, beam_size: int, budget_s: float,
                      quantization: str, threads: int) -> dict:
    """The same parameters exported to CTranslate2 (weights stored as ``quantization``) decoding the same inputs,
    every sentence forced to ``gen_len`` tokens (min = max decoding length, as the peers run it)."""
    ctranslate2 = ct2.require()
    pieces = ["<pad>", "</s>", "<unk>"] + [f"p{i}" for i in range(3, config.model.vocab_size)]  # a random model's
    sources = [[pieces[i] for i in row[:-1]] for row in np.asarray(inputs).tolist()]  # EOS: add_source_eos
    with tempfile.TemporaryDirectory(prefix="ct2_bench_") as out:
        ct2.save(ct2.transformer_spec(config, params, pieces), os.path.join(out, "model"), quantization)
        translator = ctranslate2.Translator(os.path.join(out, "model"), device="cpu", compute_type="default",
                                            intra_threads=threads, inter_threads=1)
    options = dict(beam_size=beam_size, length_penalty=float(config.decode.length_penalty), num_hypotheses=1,
                   min_decoding_length=gen_len, max_decoding_length=gen_len, max_input_length=0,
                   max_batch_size=len(sources))
    lengths = {len(r.hypotheses[0]) for r in translator.translate_batch(sources, **options)}
    assert lengths == {gen_len}, f"forced length broken: {lengths}"
    times = timed(lambda: translator.translate_batch(sources, **options), budget_s=budget_s)
    return {**record(name, "ctranslate2", inputs, gen_len, beam_size, times), "quantization": quantization,
            "compute_type": translator.compute_type, "threads": threads, "ctranslate2": ctranslate2.__version__}


def bench_shape(name: str, args) -> list[dict]:
    """Every engine (and CTranslate2 quantization) of ``args`` on one shape's weights and inputs."""
    config, setup, params, inputs = shape_inputs(name, args.batch, args.src_len)
    results = []
    for engine in args.engine.split(","):
        if engine == "jax":
            results.append(bench_jax(name, config, setup, params, inputs, args.gen_len, args.beam, args.budget_s,
                                     args.tight_cache, args.profile))
        else:
            results += [bench_ctranslate2(name, config, params, inputs, args.gen_len, args.beam, args.budget_s, q,
                                          args.threads) for q in args.quantization.split(",")]
    jax_speed = next((r["tokens_per_s"] for r in results if r["engine"] == "jax"), None)
    for r in results:
        if jax_speed and r["engine"] != "jax":
            r["vs_jax"] = r["tokens_per_s"] / jax_speed
    return results


def choices(value: str, valid: tuple[str, ...], flag: str) -> str:
    unknown = [v for v in value.split(",") if v not in valid]
    if unknown:
        raise SystemExit(f"{flag}: unknown {unknown[0]!r}; valid: {', '.join(valid)} (comma-separated).")
    return value


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
    ap.add_argument("--engine", default="jax", help=f"comma-separated: {', '.join(ENGINES)} (the same weights and "
                    "inputs for each)")
    ap.add_argument("--quantization", default="none,int8", help="ctranslate2: how the exported weights are stored, "
                    f"comma-separated: {', '.join(QUANTIZATIONS)}")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="ctranslate2: intra-op threads")
    args = ap.parse_args()
    choices(args.engine, ENGINES, "--engine")
    choices(args.quantization, QUANTIZATIONS, "--quantization")
    host_memory.keep_freed_memory()  # as the CLI does, before the first computation
    peak = args.peak_gflops or matmul_peak_gflops()
    print(json.dumps({"matmul_peak_gflops": peak, "measured": args.peak_gflops is None,
                      "devices": [str(d) for d in jax.devices()], "cpu_model": provenance.cpu_model(),
                      "host_malloc": host_memory.setting()}), flush=True)
    results = []
    for name in args.shapes.split(","):
        for r in bench_shape(name, args):
            r["peak_gflops"] = peak
            results.append(r)
            print(json.dumps(r), flush=True)
    last = results[-1]
    print(json.dumps({"shape": last["shape"], "tokens_per_s": last["tokens_per_s"],
                      "sentences_per_s": last["sentences_per_s"], "peak_gflops": peak, "results": results}))


if __name__ == "__main__":
    main()
