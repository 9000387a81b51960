#!/usr/bin/env bash
# run.sh FAMILY [ARGS...]: the one entry point of the benchmarks, from the repository root. Each family
# measures vecanneal against a peer in the same run where one exists, prints the ratios, checks its own
# result and ends with one line, "verification: passed (N checks)" or "verification: FAILED (...)",
# exiting 1 on a failure (the rules: bench/verify.py). Sizes are the benchmarks' own, never a machine's
# time limit. Results and their commands: docs/performance.md; the checks: bench/README.md.
#   cpu          vecanneal vs scikit-learn (Lloyd) and faiss-cpu, and the memory check (run_cpu_compare.sh).
#                Checks: vecanneal's plain Lloyd ends at scikit-learn's energy (1e-4 relative), every
#                vecanneal energy <= 1.01 x scikit-learn's, repeats alike, peak RSS within 5% of the formula
#   cpu-scaling  strong and weak scaling over MPI ranks on one node (scaling/run.py). Checks: every index
#                usable, repeats bitwise identical, P ranks vs 1: same assignments, anchors within 1e-5
#   gpu          one GPU: vecanneal vs PyTorch Lloyd and flash-kmeans at 1M and 8M x 128 x 1024, the
#                prototype's large case, the CPU/GPU crossover (gpu_bench.sh; peer wheels in .whl/peers).
#                Checks: each configuration's repeated runs bitwise identical, the large case's GPU index
#                the CPU's, every crossover index usable
#   gpu-ab       one GPU: the loop before and after a change, the indexes compared (gpu_loop.sh). Checks:
#                streamed = resident (anchors 1e-5, same assignments), gpu_stream_bench, every run
#                finished; REQUIRE_SAME=1: the two builds' indexes bitwise identical
#   gpu-scaling  several GPUs: the loop on 1, 2, 4, ... GPUs, weak and strong (gpu_loop_scaling.sh).
#                Checks: every index usable, strong on P GPUs vs 1: anchors within 1e-4
#   gpu-multi    several GPUs: compress scaling through scaling/run.py and embed on 1, 2, 4, ... GPUs
#                (gpu_multi.sh). Checks: run.py's (P GPUs vs 1: anchors within 1e-4), embed rows on P
#                GPUs vs 1: cosine >= 0.9999 each
#   kernels      one GPU: each kernel timed (gpu_kernels_bench N D K REPS); the binary's own checks
#                (bench/gpu_kernels.c)
#   stream       one GPU: rows streamed from pinned host memory (gpu_stream_bench N D K CHUNK_MB REPS);
#                the binary checks streamed against resident passes, exit 1 on a disagreement
#   embed-cpu    vecanneal embed vs sentence-transformers on the CPU (embed_cpu.sh). Checks: every row's
#                cosine to sentence-transformers' >= 0.9999 (without the peer: to tests/data/embed_ref.f32)
#   embed-gpu    vecanneal embed vs sentence-transformers fp16 on one GPU (embed_gpu.sh). Checks: every
#                row's cosine to sentence-transformers' >= 0.999
#   search-cpu   vecanneal search vs faiss-cpu IndexIVFFlat on our anchors and lists (to_faiss) and on
#                faiss's own k-means: recall@10 and queries/s at nprobe 1-64 (search_cpu.py). Checks:
#                recall >= 0.999 at nprobe = K, recall non-decreasing in nprobe, every layout alike,
#                faiss on our lists within 0.005 of vecanneal's recall, every run finished. --text: the same
#                on vecanneal embed's embeddings of WordNet's glosses, ground truth from search --exact
#   codes-cpu    residual PQ codes (compress --codes pq, search on the codes) vs faiss-cpu IndexIVFPQ at the
#                same nlist, M and 8 bits: training time, reconstruction error, recall@10 and queries/s at
#                nprobe 1-64 with and without re-ranking, and faiss with an OPQ rotation (codes_cpu.py);
#                --text: on search-cpu --text's embeddings. Checks: decode() gives the /pq error, the /pq
#                variance numpy's, two searches alike, no recall curve falls by more than 0.005, re-ranked
#                recall >= recall on codes, the OPQ rotation orthonormal, every run finished
#   search-gpu   one or two GPUs: vecanneal search --backend cuda per nprobe against an exact PyTorch
#                brute force at 1M and 8M x 128, the list scan's share of the copy bandwidth, 2-GPU strong
#                scaling (search_gpu.sh). Checks: nprobe = K bitwise = --exact, --exact's recall against
#                PyTorch >= 0.999 (and = gen's /neighbors), recall non-decreasing in nprobe, 2 GPUs
#                bitwise = 1 GPU, every run on the engine asked for and finished
#   codes-gpu    one or two GPUs: residual PQ codes at 1M x 128, M 16 and 32: compress --codes pq --backend cuda
#                encoding rows/s on 1 and 2 GPUs against --backend cpu, search --backend cuda --scan codes (and
#                --rerank 100) q/s and recall@10 at nprobe 1-64 against --scan rows (codes_gpu.sh). Checks: codes
#                on 2 GPUs bitwise = 1 GPU (and = the CPU's where the anchors match), search on codes cuda bitwise
#                = cpu, 2 GPUs bitwise = 1 GPU, recall non-decreasing in nprobe, re-ranked recall >= recall on
#                codes, every run on the engine asked for and finished
#   gpu-loop-ncu one GPU: one iteration of the loop at 1M x 128 x 1024 fp16, kernel by kernel under Nsight
#                Compute (gpu_loop_ncu.py: --vecanneal BIN). Checks: an iteration found, argmin and statistics
#                kernels in it, its kernels' sum within 0.5-1.3 x the plain run's ms per iteration
#   embed-gpu-ncu one GPU: the CUDA encoder's forward at 32, 128 and 256 tokens a line, kernel group by group
#                under Nsight Compute (embed_gpu_ncu.py: --bench BUILD/embed_gpu_bench). Checks: the timed
#                pass found, products and attention in it, its kernels' sum within 0.5-1.5 x the plain forward
#   gpu-index-time  two GPUs: the time to index 64M x 128 float16 rows from HDF5 on local disk on 1 and 2 GPUs,
#                phase by phase: the read against dd's rate of the file, the loop's strong efficiency, the
#                allreduce per iteration (gpu_index_time.sh). Checks: both indexes usable, 2 GPUs against 1
#                with the cuda rank rule
#   mpi-start    any machine: what mpirun -n NP costs around an empty MPI program, with and without hwloc's GPU
#                discovery and the network transports (mpi_start.sh [NP] [REPS]). Checks: every launch exits 0
#                and reports NP ranks
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
  search-cpu) exec python3 "$HERE/search_cpu.py" "$@" ;;
  codes-cpu) exec python3 "$HERE/codes_cpu.py" "$@" ;;
  search-gpu) exec bash "$HERE/search_gpu.sh" "$@" ;;
  codes-gpu) exec bash "$HERE/codes_gpu.sh" "$@" ;;
  gpu-loop-ncu) exec python3 "$HERE/gpu_loop_ncu.py" "$@" ;;
  embed-gpu-ncu) exec python3 "$HERE/embed_gpu_ncu.py" "$@" ;;
  gpu-index-time) exec bash "$HERE/gpu_index_time.sh" "$@" ;;
  mpi-start) exec bash "$HERE/mpi_start.sh" "$@" ;;
  *)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//'
    [ -z "$family" ] && exit 0
    echo "run.sh: unknown family '$family'" >&2
    exit 2
    ;;
esac
