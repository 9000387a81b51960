#!/usr/bin/env bash
# blas_vendor.sh SRC WORK: a user's BLA_VENDOR is honoured and BUILD_TESTING=OFF builds the program
# alone. Configures SRC with -DBLA_VENDOR=Generic (FindBLAS's plain libblas, the system's default
# BLAS through Debian's alternatives) -DBUILD_TESTING=OFF, builds vecanneal, checks that it links
# libblas rather than libopenblas directly, that no test target was made, and runs a small job.
set -euo pipefail
SRC=$1 WORK=$2
fail() { echo "blas_vendor: FAIL: $*" >&2; exit 1; }
compgen -G "/usr/lib*/libblas.so" > /dev/null || compgen -G "/usr/lib/*/libblas.so" > /dev/null || { echo "blas_vendor: no generic libblas.so: SKIP"; exit 77; }
rm -rf "$WORK" && mkdir -p "$WORK"
cmake -S "$SRC" -B "$WORK/b" -DBLA_VENDOR=Generic -DBUILD_TESTING=OFF -DVECANNEAL_CUDA=OFF > "$WORK/cmake.log" 2>&1 \
  || { tail -20 "$WORK/cmake.log"; fail "configure"; }
grep -q '^BLAS_blas_LIBRARY:FILEPATH=.*/libblas\.so' "$WORK/b/CMakeCache.txt" || fail "BLA_VENDOR=Generic did not pick libblas"
cmake --build "$WORK/b" -j "$(nproc)" --target vecanneal > "$WORK/build.log" 2>&1 || { tail -20 "$WORK/build.log"; fail "build"; }
libs=$(ldd "$WORK/b/vecanneal")
[[ $libs == *libblas.so* ]] || fail "vecanneal does not link libblas: $libs"
targets=$(cmake --build "$WORK/b" --target help)
[[ $targets != *h5tool* ]] || fail "BUILD_TESTING=OFF still defines the test tools"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$WORK"
mpirun -n 2 --oversubscribe b/vecanneal gen --out g.h5 --n 3000 --d 16 > /dev/null || fail "gen"
mpirun -n 2 --oversubscribe b/vecanneal compress --input g.h5:/train --anchors 8 --out i.h5 --set max_iter=3 \
  --set progress_every=0 > /dev/null || fail "compress"
echo "blas_vendor: BLA_VENDOR=Generic links $(ldd b/vecanneal | grep -o 'libblas\.so[.0-9]*' | head -1); BUILD_TESTING=OFF: no test targets; a job ran"
