"""transformer_jax: "Attention Is All You Need" in JAX / Flax NNX (README.md; DESIGN.md for the layout).

Installed, the repository's top-level configs/, launch/ and experiments/ are transformer_jax.configs, .launch and
.experiments (pyproject.toml's package-dir mapping). In a checkout used without an install — a GPU image with its own
jax, where `pip install -e .` would need the network (bench/accelerator_check.sh) — the repository root joins this
package's path instead, so the same imports find them.
"""

import os as _os

_ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(__path__[0], "configs")) and _os.path.isfile(
        _os.path.join(_ROOT, "configs", "__init__.py")):
    __path__.append(_ROOT)
