#!/usr/bin/env bash
# search_gpu.sh: `bash bench/run.sh search-gpu [ARGS]` on a GPU machine (one or two H100/H200), from the
# repository root: vecanneal search on the GPU against an exact PyTorch brute force at 1M and 8M x 128,
# 10000 queries, k 10, with the list scan at each precision of --precisions (fp32, tf32, fp16, bf16; PyTorch
# at fp32, the ground truth, and at each tensor-core one), and strong scaling on 2 GPUs when two are
# visible (bench/search_gpu.py: the steps, the checks; ARGS go to it). The binary: $VA, else
# $BUILD_DIR/vecanneal (default build-gpu), built there with CUDA when missing. Results under $OUT
# (default ./out-gpu): DATE_GPU_search-gpu.{md,csv,png} and search-gpu-work/ (every step's log, sweep CSV
# and metrics); data and indexes in $VA_BENCH_DATA (default /tmp/vecanneal-search-gpu), kept between runs.
# Needs numpy and h5py (matplotlib for the plot) for python3, and PyTorch for the peer's interpreter
# (--python PATH, default that python3). Ends with bench/verify.py's line, "verification: passed (N checks)"
# or FAILED, exit 1.
set -u
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
HERE=$(dirname "${BASH_SOURCE[0]}")
case " $* " in *" --help "* | *" -h "*) exec python3 "$HERE/search_gpu.py" --help ;; esac
export OUT=${OUT:-$PWD/out-gpu}
mkdir -p "$OUT"
source "$HERE/gpu_binary.sh" # VA
exec python3 "$HERE/search_gpu.py" --vecanneal "$VA" "$@"
