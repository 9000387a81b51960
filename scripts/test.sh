#!/usr/bin/env bash
# test.sh: set up (dependencies, build, model files for the embed tests) and run the whole CTest suite.
# GPU tests report SKIP on a machine without a CUDA device. Exit status: ctest's.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VECANNEAL_TEST_DEPS=1 source "$ROOT/scripts/setup.sh"
if [ -x "$ROOT/scripts/fetch-model" ]; then "$ROOT/scripts/fetch-model"; fi
cd "$ROOT/build"
ctest --output-on-failure --timeout 1800 "$@"
