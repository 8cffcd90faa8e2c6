#!/usr/bin/env bash
# The one-shot accelerator check (bench/accelerator_check.py): base and big training steps at the paper's ~25K+25K
# tokens in bf16 and a newstest-sized beam-4 decode, one JSON line each; at most 8 minutes, compiles included.
#
#   bash bench/accelerator_check.sh            # on a GPU/TPU machine with the project's packages installed
#   bash bench/accelerator_check.sh --smoke    # tiny shapes on CPU: the same code paths (tests/test_bench_smoke.py)
#
# PYTHON picks the interpreter (default python3); extra arguments go to the Python script (see its --help).
set -euo pipefail
cd "$(dirname "$0")/.."
exec timeout --signal=TERM "${CHECK_TIMEOUT_S:-480}" "${PYTHON:-python3}" bench/accelerator_check.py "$@"
