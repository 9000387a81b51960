#!/usr/bin/env bash
# codes_gpu.sh: `bash bench/run.sh codes-gpu [ARGS]` on a GPU machine (one or two H100/H200), from the
# repository root: residual PQ codes on the GPU at 1M x 128, 1024 anchors, M 16 and 32: the encoding rate of
# `compress --codes pq --backend cuda` on 1 and 2 GPUs against the same compress on the CPU, and `search
# --backend cuda --scan codes` (alone and with --rerank 100) against `--scan rows` on the same GPU, 10000
# queries, k 10, nprobe 1-64 (bench/codes_gpu.py: the steps, the checks; ARGS go to it). The binary: $VA, else
# $BUILD_DIR/vecanneal (default build-gpu), built there with CUDA when missing. Results under $OUT (default
# ./out-gpu): DATE_GPU_codes-gpu.{md,csv} and codes-gpu-work/ (every step's log, sweep CSV and metrics); data
# and indexes in $VA_BENCH_DATA (default /tmp/vecanneal-search-gpu, search-gpu's: the data is shared, kept
# between runs). Needs numpy and h5py for python3. Ends with bench/verify.py's line, "verification: passed
# (N checks)" or FAILED, exit 1.
set -u
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
HERE=$(dirname "${BASH_SOURCE[0]}")
case " $* " in *" --help "* | *" -h "*) exec python3 "$HERE/codes_gpu.py" --help ;; esac
export OUT=${OUT:-$PWD/out-gpu}
mkdir -p "$OUT"
VA=${VA:-}
if [ -z "$VA" ]; then
  B=${BUILD_DIR:-build-gpu}
  VA=$B/vecanneal
  if [ ! -x "$VA" ]; then
    echo "building $VA (CUDA, sm_90)"
    { cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DVECANNEAL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      > "$OUT/cmake.log" 2>&1 &&
      make -C "$B" -j"$(nproc)" vecanneal > "$OUT/build.log" 2>&1; } || {
      tail -20 "$OUT/build.log" "$OUT/cmake.log" 2> /dev/null
      export VERIFY_LOG=$OUT/verification.log
      : > "$VERIFY_LOG"
      python3 "$HERE/verify.py" fail "the build of $VA failed ($OUT/build.log)"
      exec python3 "$HERE/verify.py" verdict
    }
  fi
fi
case $VA in /*) ;; *) VA=$PWD/$VA ;; esac
exec python3 "$HERE/codes_gpu.py" --vecanneal "$VA" "$@"
