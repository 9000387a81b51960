#!/usr/bin/env bash
# make_h5_seeds.sh BUILD_DIR: regenerates tests/fuzz/corpus/h5probe and the h5 files of
# tests/fuzz/regressions/h5probe (committed): make_h5_seeds.py
# (h5py) plus files written by the project's own tools with the system HDF5: h5tool make-bad (every
# kind) and a tiny vecanneal gen dataset. Not run by CI.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
B=${1:?BUILD_DIR with vecanneal and h5tool}
OUT="$HERE/corpus/h5probe"
mkdir -p "$OUT"   # files the fuzzer added (hash names) stay
python3 "$HERE/make_h5_seeds.py" "$OUT" "$HERE/regressions/h5probe"
for k in 1d int32 nan inf empty nodata f64 u8 i8; do "$B/h5tool" make-bad "$OUT/tool_$k.h5" $k; done
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$B/vecanneal" gen --out "$OUT/gen_small.h5" --n 12 --d 4 --clusters 2 > /dev/null
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$B/vecanneal" gen --out "$OUT/gen_f16.h5" --n 12 --d 4 --dtype float16 > /dev/null
ls -l "$OUT" | awk '{s += $5} END {print NR - 1, "files,", s, "bytes"}'
