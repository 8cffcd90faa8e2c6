#!/usr/bin/env bash
# Fetches, as wheels in .whl/, the packages bench/accelerator_check.sh needs that the GPU image lacks (its Python 3.12
# has jax, flax, optax, orbax-checkpoint, sentencepiece and tqdm, not ml_collections), so that they travel with the
# checkout to a machine with no network; accelerator_check.sh installs them offline. Run it once, where pip reaches
# PyPI, from the repository root (it adds .whl/ to .git/info/exclude: the wheels travel but are never committed):
#
#   bash bench/accelerator_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
grep -qx "/.whl/" .git/info/exclude 2>/dev/null || echo "/.whl/" >> .git/info/exclude
# ml_collections is pure Python (py3-none-any); its own needs (absl-py, PyYAML) are on the image.
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "${WHEEL_PYTHON:-3.12}" \
  --implementation py -d .whl "ml_collections==1.1.0"
ls -l .whl
