#!/usr/bin/env bash
# quickstart.sh: the main job on the built-in default dataset, from a fresh checkout: installs what is
# missing, builds the program alone (the CUDA backend where a GPU is visible or VECANNEAL_CUDA=ON asks
# for it), generates a 200000 x 128 Gaussian mixture and compresses it into an index with 256 anchors
# on RANKS MPI ranks (default 2). Prints each step as it goes and where the index went.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
start=$SECONDS
VECANNEAL_SETUP_TARGETS=${VECANNEAL_SETUP_TARGETS:-vecanneal} source "$ROOT/scripts/setup.sh"
RANKS=${RANKS:-2}
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
BIN=$ROOT/build/vecanneal
echo "quickstart: generating $OUT/default.h5 (200000 x 128, 200 clusters) on $RANKS ranks"
mpirun -n "$RANKS" --oversubscribe "$BIN" gen --out "$OUT/default.h5" --n 200000 --d 128 --clusters 200 --spread 0.5 --test 1000 --no-neighbors
echo "quickstart: compressing it into $OUT/default_index.h5 (256 anchors) on $RANKS ranks"
mpirun -n "$RANKS" --oversubscribe "$BIN" compress --input "$OUT/default.h5:/train" \
  --anchors 256 --out "$OUT/default_index.h5" --metrics "$OUT/default_metrics.json"
"$BIN" info "$OUT/default_index.h5" | head -30
echo "quickstart: index written to $OUT/default_index.h5 (metrics: $OUT/default_metrics.json) in $((SECONDS - start)) s"
