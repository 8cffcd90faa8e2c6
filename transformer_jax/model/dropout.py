"""Dropout (§5.4, "Residual Dropout"): inverted dropout with 16 random bits per element, and per-site keys.

The paper applies dropout (P_drop) to every sub-layer output before the residual addition and to the sums of
embeddings and positional encodings. Each element is kept with probability ``threshold / 65536``,
``threshold = round((1 - rate) · 65536)`` (within 2^-17 of 1 - rate), and kept elements are scaled by the inverse
of that probability, so the expectation is exact. Each 32-bit word of the counter-based PRNG (threefry) feeds two
elements: half the random-number work of one word per element, which on CPU is a visible part of a training
step.

In a lower-precision compute dtype the scale is not representable (in bfloat16 1/0.9 rounds to 1.109375, and
E[dropout(x)] would be 0.9985·x): such an input is upcast and the result returned in float32, exact to float32
precision, for the float32 residual sum and LayerNorm that follow (precision.py). Float32 inputs are computed as
they always were.

Where the random bits come from is ``model.dropout_rng`` (not the paper's concern), carried with the key in a
:class:`DropoutKey` so that every site draws from the model's choice:

- ``"threefry"`` (the default): ``jax.random.bits``, 16 bits an element as above.
- ``"hash"``: one 32-bit word an element from an integer hash of the element's index, keyed per site and step by
  the threefry key's two words: murmur3's 32-bit finalizer (fmix32, Appleby 2008) applied twice,
  ``fmix32(fmix32(index ^ k0) + k1)``. fmix32 is a bijection with full avalanche, so a site's words are distinct
  and uniform; the keys still come from threefry (``fold``), so sites and steps are independent as before. It
  costs a few integer operations an element, much less than threefry on CPU, where the masks' bits are a visible
  share of a training step (bench/train_throughput.py --profile). The index is the element's position in the whole
  array, so the mask does not depend on how the array is sharded.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

_LEVELS = 1 << 16  # 16 random bits decide one element
GENERATORS = ("threefry", "hash")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class DropoutKey:
    """A threefry key and the generator (``model.dropout_rng``) its sites draw their masks with."""
    key: jax.Array
    generator: str = dataclasses.field(default="threefry", metadata={"static": True})


def with_generator(key: "jax.Array | DropoutKey | None", generator: str) -> "DropoutKey | None":
    """``key`` tagged with ``generator`` (a key already tagged keeps its own); None stays None (no dropout)."""
    if generator not in GENERATORS:
        raise ValueError(f"model.dropout_rng must be one of {', '.join(GENERATORS)}; got {generator!r}.")
    if key is None or isinstance(key, DropoutKey):
        return key
    return DropoutKey(key, generator)


def _fmix32(h: jax.Array) -> jax.Array:
    """murmur3's 32-bit finalizer: a bijection of uint32 in which every input bit flips each output bit w.p. ½."""
    h = h ^ (h >> 16)
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> 13)
    h = h * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def hash_bits(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """uint32 words of ``shape``: ``fmix32(fmix32(index ^ k0) + k1)`` with (k0, k1) the threefry key's words."""
    if int(np.prod(shape, dtype=np.int64)) > 1 << 32:
        raise ValueError(f"model.dropout_rng='hash' numbers elements with 32 bits; an array of shape {shape} has "
                         f"more than 2^32 elements: use 'threefry'.")
    words = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    words = words.astype(jnp.uint32)
    index = jnp.zeros(shape, jnp.uint32)
    stride = 1
    for axis in reversed(range(len(shape))):  # the row-major index, built from per-axis iotas (shardable)
        index = index + jax.lax.broadcasted_iota(jnp.uint32, shape, axis) * jnp.uint32(stride)
        stride *= shape[axis]
    return _fmix32(_fmix32(index ^ words[0]) + words[1])


def keep_threshold(rate: float) -> int:
    """Elements whose 16 random bits are below this are kept: P(keep) = threshold / 65536 ≈ 1 - rate."""
    return round((1.0 - rate) * _LEVELS)


def dropout(x: jax.Array, rate: float, key: "jax.Array | DropoutKey | None") -> jax.Array:
    """Inverted dropout; identity when ``key`` is None (evaluation) or ``rate`` is 0. A bare key uses threefry.

    Returns float32 for a lower-precision ``x`` (bfloat16, float16) when active, else ``x``'s dtype.
    """
    if key is None or rate == 0.0:
        return x
    generator, key = (key.generator, key.key) if isinstance(key, DropoutKey) else ("threefry", key)
    keep, scale = (_hash_keep if generator == "hash" else _threefry_keep)(key, x.shape, rate)
    x = x.astype(jnp.promote_types(x.dtype, jnp.float32))  # no-op for float32
    return jnp.where(keep, x * jnp.asarray(scale, x.dtype), jnp.zeros((), x.dtype))


def _threefry_keep(key: jax.Array, shape: tuple[int, ...], rate: float) -> tuple[jax.Array, float]:
    """The kept elements from 16 threefry bits each (one 32-bit word per two), and the inverse of P(keep)."""
    threshold = keep_threshold(rate)
    *lead, last = shape
    words = jax.random.bits(key, (*lead, (last + 1) // 2), jnp.uint32)  # one 32-bit word per two elements
    halves = jnp.stack([words & (_LEVELS - 1), words >> 16], axis=-1).reshape(*lead, -1)[..., :last]
    return halves < threshold, _LEVELS / threshold


def _hash_keep(key: jax.Array, shape: tuple[int, ...], rate: float) -> tuple[jax.Array, float]:
    """The kept elements from one hashed 32-bit word each (P(keep) = threshold / 2^32), and its inverse."""
    threshold = min(round((1.0 - rate) * (1 << 32)), (1 << 32) - 1)
    return hash_bits(key, shape) < jnp.uint32(threshold), (1 << 32) / threshold


def fold(key: "jax.Array | DropoutKey | None", i: int) -> "jax.Array | DropoutKey | None":
    """A distinct dropout key per site: ``fold_in(key, i)`` (keeping a DropoutKey's generator); None stays None."""
    if key is None:
        return None
    if isinstance(key, DropoutKey):
        return DropoutKey(jax.random.fold_in(key.key, i), key.generator)
    return jax.random.fold_in(key, i)
