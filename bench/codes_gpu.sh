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
source "$HERE/gpu_binary.sh" # VA
exec python3 "$HERE/codes_gpu.py" --vecanneal "$VA" "$@"
