#!/usr/bin/env bash
# run.sh FAMILY [ARGS...]: the one entry point of the benchmarks, from the repository root. Each family
# measures vecanneal against a peer in the same run where one exists and prints the ratios. Checks of
# the results: gpu exits 1 when vecanneal's anchors differ between repeated runs; stream when the
# streamed and the resident passes disagree; gpu-ab when they do end to end, or (REQUIRE_SAME=1) when
# the two builds' indexes differ; gpu-scaling and kernels print their comparisons (against 1 GPU, fused
# against GEMM). Results and their commands: docs/performance.md.
#   cpu          vecanneal vs scikit-learn (Lloyd) and faiss-cpu, and the memory check (run_cpu_compare.sh)
#   cpu-scaling  strong and weak scaling over MPI ranks on one node (scaling/run.py)
#   gpu          one GPU: vecanneal vs PyTorch Lloyd and flash-kmeans at 1M and 8M x 128 x 1024, the
#                prototype's large case, the CPU/GPU crossover (gpu_bench.sh; peer wheels in .whl/peers)
#   gpu-ab       one GPU: the loop before and after a change, the indexes compared (gpu_loop.sh)
#   gpu-scaling  several GPUs: the loop on 1, 2, 4, ... GPUs, weak and strong (gpu_loop_scaling.sh)
#   gpu-multi    several GPUs: compress scaling through scaling/run.py and embed on 1, 2, 4, ... GPUs
#                (gpu_multi.sh)
#   kernels      one GPU: each kernel against its CPU reference, then timed (gpu_kernels_bench N D K REPS)
#   stream       one GPU: rows streamed from pinned host memory (gpu_stream_bench N D K CHUNK_MB REPS)
#   embed-cpu    vecanneal embed vs sentence-transformers on the CPU (embed_cpu.sh)
#   embed-gpu    vecanneal embed vs sentence-transformers fp16 on one GPU (embed_gpu.sh)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
family=${1:-}
[ $# -gt 0 ] && shift
case $family in
  cpu) exec bash "$HERE/run_cpu_compare.sh" "$@" ;;
  cpu-scaling) exec python3 "$HERE/scaling/run.py" "$@" ;;
  gpu) exec bash "$HERE/gpu_bench.sh" "$@" ;;
  gpu-ab) exec bash "$HERE/gpu_loop.sh" "$@" ;;
  gpu-scaling) exec bash "$HERE/gpu_loop_scaling.sh" "$@" ;;
  gpu-multi) exec bash "$HERE/gpu_multi.sh" "$@" ;;
  kernels) exec "${BUILD_DIR:-build-gpu}/gpu_kernels_bench" "$@" ;;
  stream) exec "${BUILD_DIR:-build-gpu}/gpu_stream_bench" "$@" ;;
  embed-cpu) exec bash "$HERE/embed_cpu.sh" "$@" ;;
  embed-gpu) exec bash "$HERE/embed_gpu.sh" "$@" ;;
  *)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//'
    [ -z "$family" ] && exit 0
    echo "run.sh: unknown family '$family'" >&2
    exit 2
    ;;
esac
