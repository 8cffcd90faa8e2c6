#!/usr/bin/env bash
# The one-shot accelerator check (bench/accelerator_check.py): base and big training steps at the paper's ~25K+25K
# tokens in bf16 and a newstest-sized beam-4 decode, one JSON line each; at most 8 minutes, compiles included.
#
#   bash bench/accelerator_check.sh            # on a GPU/TPU machine with the project's packages installed
#   bash bench/accelerator_check.sh --smoke    # tiny shapes on CPU: the same code paths (tests/test_bench_smoke.py)
#
# PYTHON picks the interpreter (default python3); extra arguments go to the Python script (see its --help).
# It runs from a bare checkout. Packages the GPU image lacks (ml_collections) travel as wheels in .whl/, fetched here
# by `bash bench/accelerator_wheels.sh`, and are installed offline into a temporary folder. With $OUT set (the device
# tool's output folder), the JSON lines are also written to $OUT/accelerator_check.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" > /dev/null; then
  site="$(mktemp -d)"
  "${PYTHON:-python3}" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
if [ -n "${OUT:-}" ]; then
  timeout --signal=TERM "${CHECK_TIMEOUT_S:-480}" "${PYTHON:-python3}" bench/accelerator_check.py "$@" \
    | tee "$OUT/accelerator_check.jsonl"
  exit "${PIPESTATUS[0]}"
fi
exec timeout --signal=TERM "${CHECK_TIMEOUT_S:-480}" "${PYTHON:-python3}" bench/accelerator_check.py "$@"
