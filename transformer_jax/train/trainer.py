"""The training loop (§5): data → sharded global batches → jitted steps → metrics, evals and checkpoints.

Running :func:`train` on a workdir that already holds checkpoints resumes from the latest one, with the same
parameters, optimizer state, step, RNG and data position, so the result equals an uninterrupted run.
A SIGTERM saves a checkpoint at the next step and raises :class:`Preempted` (train/preemption.py).
This module logs (absl/python logging) and draws a progress bar on stderr; it prints nothing to stdout.
"""

import dataclasses
import json
import logging
import math
import os
import time
from collections.abc import Callable

import jax
import ml_collections
import numpy as np
from tqdm import tqdm

from transformer_jax import sharding
from transformer_jax.data import pipeline
from transformer_jax.data.batching import BATCH_KEYS, TrainBatches
from transformer_jax.data.sources import DataError
from transformer_jax.data.tokenizer import VOCAB_FILENAME
from transformer_jax.run import folder
from transformer_jax.run.checkpoints import Checkpointer
from transformer_jax.run.metrics import MetricsWriter
from transformer_jax.train import plan
from transformer_jax.train.preemption import Preempted, PreemptionWatch
from transformer_jax.train.step import Setup, init_state, make_eval_step, make_setup, make_train_step

logger = logging.getLogger(__name__)

# Steps the host may dispatch ahead of the computation. JAX dispatches asynchronously: unbounded, the loop (its
# progress bar, and the SIGTERM check) would run a whole log interval ahead, and a SIGTERM would take effect only
# after every queued step had run (a whole log interval of steps, which can outlast Slurm's notice). Two keeps the
# accelerator fed (the next step is queued while one runs) and bounds the stop to about three steps' time.
STEPS_AHEAD = 2

class NonFiniteLossError(RuntimeError):
    """The training loss became NaN/inf; the last good checkpoint is left intact."""


def build_shared_tokenizer(config: ml_collections.ConfigDict, workdir: str, *, poll_s: float = 5.0,
                           clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
    """The run's tokenizer, with the data prepared once (pipeline.prepare: download, vocab.model, tokenized pairs) by
    process 0 — unless `train --prepare_only` did it before the job — and read by the others from the workdir.

    Hosts other than process 0 wait for process 0's ``data_prepared.json`` by polling the (shared) workdir, outside
    any JAX collective: WMT14's preparation and SentencePiece training take an hour and more, past the runtime's
    collective and heartbeat timeouts. They give up after ``config.data.prepare_timeout_minutes`` with one line
    that says to run ``--prepare_only`` first, and stop with process 0's error if its preparation failed.
    """
    if jax.process_index() == 0:
        record = pipeline.read_prepared(workdir)
        if record and "key" in record and os.path.isfile(os.path.join(workdir, VOCAB_FILENAME)):
            tokenizer = pipeline.build_tokenizer(config, workdir)
            if pipeline.prepared_key(config, tokenizer) == record["key"]:
                return tokenizer
        return pipeline.prepare(config, workdir)
    timeout_min = float(config.data.get("prepare_timeout_minutes", 240.0))
    start = last_log = clock()
    while True:
        record = pipeline.read_prepared(workdir)
        if record and "error" in record:
            raise DataError(f"Process 0 could not prepare the data: {record['error']}")
        if record and "key" in record and os.path.isfile(os.path.join(workdir, VOCAB_FILENAME)):
            tokenizer = pipeline.build_tokenizer(config, workdir)
            if pipeline.prepared_key(config, tokenizer) == record["key"]:
                return tokenizer
        now = clock()
        if now - start > 60 * timeout_min:
            raise DataError(f"Process {jax.process_index()} waited {timeout_min:g} min for process 0 to prepare the "
                            f"data in {workdir} ({pipeline.PREPARED_FILE}); prepare it once before the job with "
                            "`transformer-jax train --prepare_only` (same --config and --workdir), or raise "
                            "config.data.prepare_timeout_minutes.")
        if now - last_log >= 60:
            logger.info("Waiting for process 0 to prepare the data in %s (%.0f min so far)", workdir, (now - start) / 60)
            last_log = now
        sleep(poll_s)


def evaluate_loss(setup: Setup, eval_step, params: dict, batches: list[dict]) -> dict:
    """Dev loss and per-token perplexity (Table 3's "PPL (dev)") over evaluation batches."""
    totals = {"loss": 0.0, "nll": 0.0, "tokens": 0.0}
    for batch in batches:
        sums = eval_step(params, sharding.global_eval_batch({k: batch[k] for k in BATCH_KEYS}, setup.mesh))
        for k in totals:
            totals[k] += float(sums[k])
    tokens = max(totals["tokens"], 1.0)
    return {"dev_loss": totals["loss"] / tokens, "dev_nll": totals["nll"] / tokens,
            "dev_ppl": math.exp(min(totals["nll"] / tokens, 50.0))}


class Throughput:
    """Target tokens per second of training over a log interval, excluding compilation and evaluation time.

    A step that compiled (a new batch shape) is left out whole, its tokens with its time: an interval of compiling
    steps only (the first after a start or a resume) has no rate (None), not its few tokens over ~0 seconds.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.start, self.excluded, self.excluded_tokens = clock(), 0.0, 0.0

    def exclude(self, seconds: float, tokens: float = 0.0) -> None:
        """Leaves ``seconds`` (an evaluation, or a compiling step with its ``tokens``) out of this interval."""
        self.excluded += seconds
        self.excluded_tokens += tokens

    def rate(self, tokens: float) -> float | None:
        """Rate since the last call (call it only after the interval's steps have finished: a host sync)."""
        now = self.clock()
        elapsed, timed = now - self.start - self.excluded, tokens - self.excluded_tokens
        self.start, self.excluded, self.excluded_tokens = now, 0.0, 0.0
        return timed / elapsed if timed > 0 and elapsed > 0 else None


class ProgressBar(tqdm):
    """The training progress bar (stderr), whose rate and ETA leave out the steps that compile.

    tqdm's rate is a moving average of steps over the seconds between two displays, dominated by its first sample:
    the first step of a start, which compiles the train step, entered it as one step in the whole compile time, so
    the first ETA was many times the run's length. :meth:`restart` leaves such a stretch out of the
    rate (as :class:`Throughput` leaves it out of tokens per second); the elapsed time stays the wall time.
    """

    def __init__(self, *args, clock: Callable[[], float] = time.time, **kwargs):
        """tqdm's arguments; ``clock`` (seconds) replaces tqdm's time.time, for tests."""
        super().__init__(*args, **kwargs)
        self._time = clock  # tqdm reads the time through this attribute
        self.start_t = self.last_print_t = clock()

    def restart(self, steps: int = 1) -> None:
        """Starts the rate afresh: the time and steps since the last display, and the next ``steps`` updates (the
        step that just compiled), are left out of the rate and the ETA. Call it before ``update`` of that step."""
        if self.disable:
            return
        self.last_print_t = self._time()
        self.last_print_n = self.initial = self.n + steps  # (initial: tqdm's rate before its first sample)


def train(config: ml_collections.ConfigDict, workdir: str, *, progress: bool = True,
          eval_hook=None, stop_after: int | None = None, clock: Callable[[], float] = time.monotonic) -> dict:
    """Trains (or resumes) ``config`` in ``workdir`` until ``config.train.num_steps``.

    Args:
      config: the resolved config (configs/*.py).
      workdir: run folder (config.json, vocab.model, checkpoints/, metrics.jsonl, tensorboard/).
      progress: draw a progress bar on stderr.
      eval_hook: optional ``fn(setup, params, step) -> dict`` run at each evaluation (e.g. dev BLEU); its values
        are logged to metrics.jsonl.
      stop_after: stop after this many steps of this call (for tests of interrupted runs).
      clock: monotonic seconds for the time-based safety saves (injectable for tests of skewed clocks).
    Returns:
      The last logged metrics.
    Raises:
      Preempted: after a SIGTERM, once the checkpoint of the step reached is complete.
    """
    t = config.train
    folder.save_config(config, workdir)
    tokenizer = build_shared_tokenizer(config, workdir)
    mesh = sharding.make_mesh(t.mesh)
    setup = make_setup(config, mesh)
    batches = pipeline.train_iterator(config, tokenizer, row_multiple=plan.row_multiple(config, jax.device_count()),
                                      process_index=jax.process_index(), process_count=jax.process_count(),
                                      cache_dir=workdir)
    logger.info("Training data: %s", json.dumps(pipeline.pipeline_summary(batches)))
    _, _, dev_batches = pipeline.eval_data(config, tokenizer, "dev")
    checkpointer = Checkpointer.for_run(workdir, t, clock=clock)
    writer = MetricsWriter(workdir)
    try:
        with jax.set_mesh(mesh), PreemptionWatch() as watch:
            train_step, eval_step = make_train_step(setup), make_eval_step(setup)
            restored = checkpointer.restore_latest(setup.abstract_state)  # unreadable newer ones are moved aside
            if restored is not None:
                latest, state, data_state = restored
                batches.set_state(data_state)
                logger.info("Resumed from step %d in %s", latest, checkpointer.directory)
            else:
                state = init_state(setup)
            step = int(state["step"])
            writer.start(step)  # drops the metrics an interrupted attempt logged after this step
            parts = _LoopParts(setup, batches, train_step, eval_step, dev_batches, checkpointer, writer, watch,
                               eval_hook, progress)
            last = _loop(parts, state, step, stop_after)
    finally:  # an interrupted run still completes the checkpoint in flight
        checkpointer.close()
        writer.close()
    return last


@dataclasses.dataclass
class _LoopParts:
    """What the training loop works with besides the state and the step: built once by :func:`train`."""

    setup: Setup
    batches: TrainBatches
    train_step: Callable
    eval_step: Callable
    dev_batches: list[dict]
    checkpointer: Checkpointer
    writer: MetricsWriter
    watch: PreemptionWatch
    eval_hook: Callable | None
    progress: bool


def _loop(p: _LoopParts, state: dict, step: int, stop_after: int | None) -> dict:
    """Steps from ``step`` to the end (or ``stop_after`` more): train, log, evaluate, save; returns the last metrics."""
    t = p.setup.config.train
    end = t.num_steps if stop_after is None else min(t.num_steps, step + stop_after)
    bar = ProgressBar(total=t.num_steps, initial=step, disable=not p.progress or jax.process_index() != 0,
                      desc="train", unit="step", dynamic_ncols=True)
    throughput, pending, last, shapes_seen, postfix = Throughput(), [], {}, set(), {}
    start_time, preempted = time.monotonic(), False
    while step < end:
        local = next(p.batches)
        shape = local["inputs"].shape
        new_shape = shape not in shapes_seen  # its first step includes compilation: timed on its own
        if new_shape:
            jax.block_until_ready(state)
        tic = time.monotonic()
        state, metrics = p.train_step(state, sharding.global_batch({k: local[k] for k in BATCH_KEYS}, p.setup.mesh))
        step += 1
        if new_shape:
            jax.block_until_ready(metrics)
            shapes_seen.add(shape)
            compile_s = time.monotonic() - tic
            logger.info("Compiled train step for batch shape %s in %.1f s", shape, compile_s)
            p.writer.write(step, compile_time_s=compile_s, batch_rows=shape[0], batch_length=shape[1])
            throughput.exclude(compile_s, float(metrics["target_tokens"]))
            bar.restart(steps=1)  # the ETA from steps that did not compile (the first also waited for data)
        pending.append((step, metrics))
        if len(pending) > STEPS_AHEAD:  # wait for step - STEPS_AHEAD: the host stays at most STEPS_AHEAD ahead
            jax.block_until_ready(pending[-1 - STEPS_AHEAD][1])
        preempted = p.watch.reached(step)
        log_now = step % t.log_every_steps == 0 or step == end or preempted
        save_now = p.checkpointer.due(step) or step == end or preempted
        eval_now = t.eval_every_steps and (step % t.eval_every_steps == 0 or step == t.num_steps)
        if log_now or save_now or eval_now:
            values = _check_finite(pending)  # one host sync per log interval, not per step
            pending = []
            tokens = sum(float(m["target_tokens"]) for m in values)
            last = {k: float(v) for k, v in values[-1].items()}
            # real (non-pad) tokens per step over the interval: what §5.1's "~25000 tokens" counts
            last.update(target_tokens_per_step=tokens / len(values),
                        source_tokens_per_step=sum(float(m["source_tokens"]) for m in values) / len(values))
            # losses averaged over the interval's tokens (one step's loss depends on its bucket's lengths)
            for key in ("train_loss", "train_nll", "train_rdrop_kl"):
                if key in last:
                    last[key] = sum(float(m[key]) * float(m["target_tokens"]) for m in values) / max(tokens, 1.0)
            last.update(tokens_per_s=throughput.rate(tokens), fill_rate=p.batches.stats["fill_rate"],
                        elapsed_s=time.monotonic() - start_time)
            if log_now:
                p.writer.write(step, **last)
                postfix.update(loss=f"{last['train_loss']:.3f}", lr=f"{last['learning_rate']:.2e}",
                               tok_s="–" if last["tokens_per_s"] is None else f"{last['tokens_per_s']:.0f}")
                bar.set_postfix(postfix)
        if eval_now:
            tic = time.monotonic()
            dev = evaluate_loss(p.setup, p.eval_step, state["params"], p.dev_batches)
            if p.eval_hook is not None:
                dev.update(p.eval_hook(p.setup, state["params"], step))
            p.writer.write(step, **dev)
            last.update(dev)
            logger.info("%s", eval_line(step, dev))
            postfix["dev_ppl"] = f"{dev['dev_ppl']:.2f}"  # shown until the next evaluation
            bar.set_postfix(postfix)
            throughput.exclude(time.monotonic() - tic)  # evaluation time is not training throughput
        if save_now:
            p.checkpointer.save(step, state, p.batches.get_state())
        bar.update(1)
        if preempted:
            break
    bar.close()
    p.checkpointer.wait()
    if preempted:
        logger.warning("SIGTERM: saved the checkpoint of step %d in %s and stopped.", step, p.checkpointer.directory)
        raise Preempted(step)
    last["step"] = step
    return last


# The evaluation's numbers as the log line names them (train/trainer.py's dev loss, evaluation.dev_bleu_hook's BLEU).
EVAL_LINE = (("dev_ppl", "dev PPL", ".2f"), ("dev_loss", "loss", ".4f"), ("dev_bleu", "BLEU", ".2f"),
             ("dev_tokenized_bleu", "tokenized BLEU", ".2f"), ("dev_chrf", "chrF", ".2f"),
             ("dev_brevity_penalty", "BP", ".3f"))


def eval_line(step: int, dev: dict) -> str:
    """The log line of an evaluation for a person, e.g. ``step 500: dev PPL 5.82, loss 1.8912, BLEU 25.31``
    (perplexity per word-piece, Table 3's "PPL (dev)"; metrics.jsonl keeps every number)."""
    parts = [f"{name} {dev[key]:{spec}}" for key, name, spec in EVAL_LINE if dev.get(key) is not None]
    return f"step {step}: " + ", ".join(parts)


def _check_finite(pending: list) -> list[dict]:
    """Fetches the pending step metrics; raises naming the first step whose loss or update is not finite."""
    values = []
    for step, metrics in pending:
        metrics = jax.device_get(metrics)
        if not np.isfinite(metrics["train_loss"]) or not metrics["params_finite"]:
            what = "loss" if not np.isfinite(metrics["train_loss"]) else "update (parameters)"
            raise NonFiniteLossError(
                f"Training {what} became non-finite at step {step} (loss {metrics['train_loss']}); stopping. The last good "
                "checkpoint is intact: lower the learning rate (config.train.learning_rate_scale) or enable "
                "config.train.grad_clip_norm, then run the same command again.")
        values.append(metrics)
    return values
