#!/usr/bin/env bash
# quickstart.sh: set up, generate the built-in default dataset (a 200000 x 128 Gaussian mixture) and
# run the compress job on it with mpirun on a few ranks. Prints where the index went.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/setup.sh"
RANKS=${RANKS:-2}
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
BIN=$ROOT/build/vecanneal
export NCCL_NVLS_ENABLE=0
mpirun -n "$RANKS" --oversubscribe "$BIN" gen --out "$OUT/default.h5" --n 200000 --d 128 --clusters 200 --spread 0.5 --test 1000
mpirun -n "$RANKS" --oversubscribe "$BIN" compress --config "$ROOT/configs/default.ini" --input "$OUT/default.h5:/train" \
  --anchors 256 --out "$OUT/default_index.h5" --metrics "$OUT/default_metrics.json"
"$BIN" info "$OUT/default_index.h5" | head -30
echo "quickstart: index written to $OUT/default_index.h5 (metrics: $OUT/default_metrics.json)"
