#!/usr/bin/env bash
# Rehearses bench/accelerator_check.sh as it will first run on the GPU image, on this CPU: a fresh venv holding only
# what the image holds that the check uses (jax, flax, optax, orbax-checkpoint, sentencepiece, tqdm: no ml_collections,
# no tensorflow-datasets, no install of this project), a bare copy of the checkout (tracked and untracked files, as the
# device tool sends it), the wheels of bench/accelerator_wheels.sh installed offline, then `accelerator_check.sh
# --smoke` with its JSON lines under $OUT. Prints the wall time; exits with the check's status.
#
#   bash bench/rehearse_accelerator_check.sh            # JAX_VERSION=0.10.2 by default (the image has 0.11.x, which
#                                                       # this machine's package index does not offer)
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
"$work/venv/bin/python" -m pip install -q "jax==${JAX_VERSION:-0.10.2}" flax optax orbax-checkpoint sentencepiece tqdm
if "$work/venv/bin/python" -c "import ml_collections" 2>/dev/null; then
  echo "the rehearsal venv has ml_collections: it does not mimic the image" >&2
  exit 1
fi
bash bench/accelerator_wheels.sh > /dev/null
mkdir "$work/checkout" "$work/out"
(git ls-files; git ls-files --others --exclude-standard; ls .whl/*.whl) | grep -v '^experiments/results/' \
  | tar cf - -T - | tar xf - -C "$work/checkout"
start=$(date +%s)
status=0
(cd "$work/checkout" && OUT="$work/out" PYTHON="$work/venv/bin/python" JAX_PLATFORMS=cpu \
  bash bench/accelerator_check.sh --smoke) || status=$?
echo "rehearsal: status $status in $(( $(date +%s) - start )) s; JSON lines: $work/out/accelerator_check.jsonl" >&2
exit "$status"
