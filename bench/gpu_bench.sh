#!/usr/bin/env bash
# gpu_bench.sh: on one GPU (H100/H200), from the repository root, with the peer wheels in .whl/peers
# (h5py, flash-kmeans, tqdm: see bench/README.md): vecanneal vs PyTorch Lloyd and flash-kmeans at
# 1M x 128 x 1024 and 8M x 128 x 1024 (with LARGE_K=1 at k 65536, 1M and 4M x 128 and x 768; with WIDE=1
# 1M x 768, 1024 and 1536 at k 4096), the prototype's large case end to end, and the CPU/GPU crossover
# that sets gpu_min_work. Output under $OUT.
# Checks (bench/verify.py; the last line says passed or FAILED, exit 1 on a failure): the large case's
# index on the GPU equals the CPU backend's (identical assignments, anchors to 0, as the gpu_backend
# test); every crossover run finishes with a usable index; in gpu_peers.py every vecanneal run's index
# is bitwise identical to the first run of its configuration.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/out-gpu}; mkdir -p "$OUT"
export VERIFY_LOG=$OUT/verification.log; : > "$VERIFY_LOG"
V="python3 bench/verify.py"
B=${BUILD_DIR:-build-gpu}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/peers/*.whl && export PYTHONPATH=/tmp/site
cmake -S . -B "$B" -DVECANNEAL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/cmake.log" 2>&1 && make -C "$B" -j"$(nproc)" vecanneal > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; $V fail "the build failed"; exec $V verdict; }
BIN=$PWD/$B/vecanneal
nvidia-smi --query-gpu=name --format=csv,noheader
if [ "${ONLY_PEERS:-0}" != 1 ]; then
# 1. the prototype's large case, wall time of the whole command (start-up included), one process.
"$BIN" gen --kind vlc-demo --n 10000 --d 128 --out "$OUT/demo.h5" > /dev/null
for be in cpu cuda; do
  for rep in 1 2; do
    s=$(date +%s.%N)
    "$BIN" compress --config configs/vlc-demo-large.ini --input "$OUT/demo.h5:/train" --out "$OUT/demo_$be.h5" --backend $be \
      --set progress_every=0 --set threads=16 > "$OUT/demo_$be.log" 2>&1 || $V fail "large case, $be: the run failed"
    e=$(date +%s.%N)
  done
  echo "parity large case ($be, no mpirun, 16 threads): wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s, $(grep -o 'energy [0-9.e-]*' "$OUT/demo_$be.log" | tail -1), $(grep -o '[0-9]* iterations' "$OUT/demo_$be.log")"
done
$V close "$OUT/demo_cuda.h5" "$OUT/demo_cpu.h5" 0 0 --label "large case, GPU against CPU"
# 2. CPU (16 threads) vs GPU crossover: ms per iteration at growing n, k = 256, d = 128.
for n in 5000 20000 80000 320000; do
  "$BIN" gen --out "$OUT/x$n.h5" --n $n --d 128 --clusters 100 > /dev/null
  line="n $n (rows x k x d = $(python3 -c "print(f'{$n*256*128:.2g}')")):"
  for be in cpu cuda; do
    "$BIN" compress --input "$OUT/x$n.h5:/train" --anchors 256 --out "$OUT/x_$be.h5" --backend $be --set threads=16 --set max_iter=20 \
      --set tol=0 --set min_changes=0 --set progress_every=0 --set init=random --metrics "$OUT/x_$be.json" > /dev/null 2>&1
    $V run "$OUT/x_$be.h5" "$OUT/x_$be.json" $n --label "crossover n $n, $be" > /dev/null
    line="$line $be $(python3 -c "import json; m=json.load(open('$OUT/x_$be.json')); print(f\"{m['ms_per_iteration']:.3f} ms/it (total {m['total_seconds']:.2f} s)\")")"
  done
  echo "$line"
done
fi
# 3. peers at 1M and 8M rows x 128 x 1024 (BASE=0 leaves 1M out, BIG=0 8M), at k 65536 (LARGE_K=1) and at
# embedding widths (WIDE=1).
rows() { # N D: the path of generated rows N x D under $OUT, generated on the first use
  local f="$OUT/g$1x$2.h5"
  [ -f "$f" ] || mpirun -n 16 "$BIN" gen --out "$f" --n "$1" --d "$2" --clusters 2000 --spread 0.5 > /dev/null ||
    $V fail "gen of $1 x $2 rows failed" >&2
  echo "$f"
}
peers() { # TAG ARGS...: gpu_peers.py, its warnings left out; a run that did not end normally is a failed check
  python3 bench/gpu_peers.py --vecanneal "$BIN" --out "$OUT" "${@:2}" 2>&1 | grep -v Warning
  [ "${PIPESTATUS[0]}" -eq 0 ] || $V fail "gpu_peers.py $1 exited non-zero"
  cp "$OUT/gpu_peers.csv" "$OUT/gpu_peers_$1.csv"
}
if [ "${BASE:-1}" = 1 ]; then
  peers 1M --data "$(rows 1000000 128)" --k 1024 --iters 20 \
    --precisions tf32,fp16,bf16,tf32+default,fp16+default,bf16+default
fi
if [ "${LARGE_K:-0}" = 1 ]; then
  # The nlist of billion-row IVF indexes: k 65536 at LARGE_K_ROWS (default 1M and 4M) x LARGE_K_DIMS (128
  # and 768), 10 Lloyd steps, LARGE_K_REPS runs of each method (3), against LARGE_K_PEERS (both).
  for n in ${LARGE_K_ROWS:-1000000 4000000}; do
    for d in ${LARGE_K_DIMS:-128 768}; do
      peers "$((n / 1000000))Mx$d-k65536" --data "$(rows "$n" "$d")" --k 65536 --iters 10 --precisions fp16,bf16 \
        --reps "${LARGE_K_REPS:-3}" --peers "${LARGE_K_PEERS:-torch-fp16,flash}"
    done
  done
fi
if [ "${WIDE:-0}" = 1 ]; then
  # Embedding-sized rows: WIDE_ROWS (default 1M) x WIDE_DIMS (768, 1024, 1536) at k WIDE_K (4096), 10 Lloyd
  # steps, WIDE_REPS runs of each method (2), against flash-kmeans (the configuration 4 kernel's rows).
  for d in ${WIDE_DIMS:-768 1024 1536}; do
    peers "wide-d$d" --data "$(rows "${WIDE_ROWS:-1000000}" "$d")" --k "${WIDE_K:-4096}" --iters 10 \
      --precisions fp16,bf16 --reps "${WIDE_REPS:-2}" --peers flash
  done
fi
if [ "${BIG:-1}" = 1 ]; then
  peers 8M --data "$(rows 8000000 128)" --k 1024 --iters 10 --precisions fp16,bf16,fp16+default --peers torch-fp16,flash
fi
rm -f "$OUT"/*.h5
$V verdict
