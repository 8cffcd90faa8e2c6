"""Tiny training configs and batches shared by the training tests and their subprocess scripts (2 CPU cores).

configs/tiny.py (d_model 32, d_ff 64, 2 heads, 1+1 layers) with a 384-piece vocabulary (a byte-fallback BPE on
the synthetic corpus needs at least 319), 2000 synthetic training pairs, batches of 16 rows × 64, fp32.
"""

import os

import ml_collections
import numpy as np

from transformer_jax.configs import tiny

# XLA flags for the test subprocesses: compile time dominates these tiny runs, and LLVM's optimisation passes are
# most of it on CPU (about half with these off). They change nothing a test compares within one set of flags.
FAST_COMPILE_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def set_xla_flags(device_count: int | None = None) -> None:
    """Appends the fast-compile flags (and a simulated CPU device count) to XLA_FLAGS; call before JAX starts."""
    flags = [os.environ.get("XLA_FLAGS", ""), FAST_COMPILE_FLAGS]
    if device_count:
        flags.append(f"--xla_force_host_platform_device_count={device_count}")
    os.environ["XLA_FLAGS"] = " ".join(f for f in flags if f)


def tiny_config(**train_overrides) -> ml_collections.ConfigDict:
    """configs/tiny.py without dropout and with per-step logging; ``train_overrides`` update ``config.train``."""
    c = tiny.get_config()
    c.model.vocab_size = 384
    c.model.dropout_rate = 0.0  # on where a test needs it (the RNG must then be restored exactly, too)
    d = c.data
    d.synthetic.dev_size = d.synthetic.test_size = 32
    d.shuffle_buffer = 512
    d.tokenizer_sample_size = 4000
    t = c.train
    t.num_steps = 10
    t.warmup_steps = 30
    t.learning_rate_scale = 0.6
    t.checkpoint_every_steps = 0
    t.checkpoint_every_minutes = 0.0
    t.keep_checkpoints = 100
    t.eval_every_steps = 0
    t.log_every_steps = 1
    t.update(train_overrides)
    return c


def packed_batches(num_batches: int, rows: int = 16, length: int = 16, vocab_size: int = 384, seed: int = 0
                   ) -> list[dict[str, np.ndarray]]:
    """Deterministic random *packed* batches in the trainer's format (no tokenizer needed).

    Each row holds 1–3 sentence pairs of random lengths (segment ids 1, 2, …; positions restarting at 0) and
    ends in padding (id 0) of varying amount, so rows carry different numbers of target tokens.
    """
    from transformer_jax.data.batching import BATCH_KEYS  # lazy: callers set XLA_FLAGS before JAX is imported

    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(num_batches):
        batch = {k: np.zeros((rows, length), np.int32) for k in BATCH_KEYS}
        for r in range(rows):
            for side in ("inputs", "targets"):
                pos, seg = 0, 1
                while seg <= 3:
                    n = int(rng.integers(2, length // 2))
                    if pos + n > length:
                        break
                    batch[side][r, pos:pos + n] = rng.integers(1, vocab_size, n)
                    batch[f"{side}_segmentation"][r, pos:pos + n] = seg
                    batch[f"{side}_position"][r, pos:pos + n] = np.arange(n)
                    pos, seg = pos + n, seg + 1
        # A source and target row must hold the same number of sentences: drop the extra segments.
        for r in range(rows):
            keep = min(batch["inputs_segmentation"][r].max(), batch["targets_segmentation"][r].max())
            for side in ("inputs", "targets"):
                extra = batch[f"{side}_segmentation"][r] > keep
                for k in (side, f"{side}_segmentation", f"{side}_position"):
                    batch[k][r, extra] = 0
        batches.append(batch)
    return batches


def sharding_config(shape: tuple[int, int, int] | None) -> ml_collections.ConfigDict:
    """The tiny config on a (data, fsdp, tensor) mesh (None = the default), with dropout on: the dropout masks must
    not depend on how the batch is split over devices or hosts either."""
    c = tiny_config()
    c.model.dropout_rate = 0.1
    if shape is not None:
        c.train.mesh = ml_collections.ConfigDict(dict(zip(("data", "fsdp", "tensor"), shape)))
    return c


SHARDING_STEPS = 3  # train steps compared across meshes / hosts


def sharding_batches() -> list[dict[str, np.ndarray]]:
    """The batches of the mesh and multi-host comparisons: SHARDING_STEPS + 1 packed batches of 16 × 16."""
    return packed_batches(SHARDING_STEPS + 1, rows=16, length=16, vocab_size=sharding_config(None).model.vocab_size,
                          seed=2)


def resume_config() -> ml_collections.ConfigDict:
    """tests/scripts/train_tiny.py's run: 24 steps, a checkpoint every 4, dropout on, an eval (and log) every step."""
    c = tiny_config(num_steps=24, checkpoint_every_steps=4, eval_every_steps=1, log_every_steps=1)
    c.model.dropout_rate = 0.1
    return c


# How long a host of a 2-process test run waits for the other to join (jax.distributed.initialize): generous, for a
# loaded machine where the other host's Python and JAX imports can take minutes; the tests' own deadlines are longer.
INITIALIZATION_TIMEOUT_S = 300
# How long a run held at a step (tests/scripts/train_tiny.py, multihost_train.py --hold_at) waits for its signal
# before giving up on its own (a test that died without killing it must not leave it behind for ever).
HOLD_DEADLINE_S = 1200

MULTIHOST_JUMP_S = 600.0  # a clock jump of one safety-save interval (checkpoint_every_minutes below)


def multihost_config(num_steps: int = 12) -> ml_collections.ConfigDict:
    """tests/scripts/multihost_train.py's run: a checkpoint every 4 steps, 10-minute safety saves, dropout on, an
    eval (and log, and clock check) every step."""
    c = tiny_config(num_steps=num_steps, checkpoint_every_steps=4, checkpoint_every_minutes=MULTIHOST_JUMP_S / 60,
                    eval_every_steps=1, log_every_steps=1)
    c.model.dropout_rate = 0.1  # the RNG must resume exactly too
    return c


def restore_checkpoint(workdir, config: ml_collections.ConfigDict, step: int) -> tuple[dict, dict]:
    """(train state as numpy, data position) of checkpoint ``step`` of ``workdir``, restored on one device."""
    import jax  # lazy: callers set XLA_FLAGS before JAX is imported

    from transformer_jax import sharding
    from transformer_jax.run.checkpoints import Checkpointer
    from transformer_jax.train.step import make_setup

    setup = make_setup(config, sharding.make_mesh(config.train.mesh, devices=jax.devices()[:1]))
    checkpointer = Checkpointer(str(workdir), keep=100)
    try:
        state, data_state = checkpointer.restore(step, setup.abstract_state)
    finally:
        checkpointer.close()
    return jax.tree.map(np.asarray, state), data_state
