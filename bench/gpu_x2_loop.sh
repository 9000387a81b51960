#!/usr/bin/env bash
# gpu_x2_loop.sh: on a 2-GPU machine, from the repository root: the 2-GPU compress loop's time per
# iteration, run REPS times each with NCCL's peer connections made at communicator creation (vecanneal's
# default, NCCL_RUNTIME_CONNECT=0) and lazily at the first collective (NCCL_RUNTIME_CONNECT=1, NCCL's own
# default), against 1 GPU: ROWS_PER_GPU rows per GPU, d 128, k 1024, fp16 products, 20 iterations,
# per-iteration times from the progress lines. Output under $OUT: loop.csv, summary.txt.
set -u
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
OUT=${OUT:-$PWD/out-gpu}; W=/tmp/gpu-x2-loop; mkdir -p "$OUT" "$W"
B=${BUILD_DIR:-build-gpu} ROWS_PER_GPU=${ROWS_PER_GPU:-8000000} REPS=${REPS:-3}
cmake -S . -B "$B" -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > "$W/cmake.log" 2>&1 && make -C "$B" -j"$(nproc)" vecanneal > "$W/build.log" 2>&1 \
  || { tail -20 "$W/build.log"; exit 1; }
for p in 1 2; do
  mpirun -n 16 "$B/vecanneal" gen --out "$W/d$p.h5" --n $((p * ROWS_PER_GPU)) --d 128 --clusters 2000 --spread 0.5 --dtype float16 > /dev/null
done
echo "gpus,runtime_connect,rep,ms_per_iteration,first_iter_ms,median_iter_ms,max_iter_ms,allreduce_s" > "$OUT/loop.csv"
run() { # gpus runtime_connect rep
  mpirun -n $1 -x NCCL_NVLS_ENABLE -x NCCL_RUNTIME_CONNECT="$2" --bind-to none "$B/vecanneal" compress --input "$W/d$1.h5:/train" --anchors 1024 \
    --out "$W/i.h5" --backend cuda --set precision=fp16 --set max_iter=20 --set tol=0 --set min_changes=0 --set threads=4 \
    --set progress_every=1 --metrics "$W/m.json" > "$W/run_$1_$2_$3.log" 2>&1 || { tail -5 "$W/run_$1_$2_$3.log"; return; }
  python3 - "$W/run_$1_$2_$3.log" "$W/m.json" "$1,$2,$3" >> "$OUT/loop.csv" <<'PY'
import json, re, statistics, sys
ms = [float(l.split()[-1]) for l in open(sys.argv[1]) if re.match(r"^\s+\d+\s", l)]
m = json.load(open(sys.argv[2]))
print(f"{sys.argv[3]},{m['ms_per_iteration']:.3f},{ms[0]:.2f},{statistics.median(ms):.2f},{max(ms):.2f},{m['phases_seconds']['allreduce']['max']:.3f}")
PY
}
for rep in $(seq "$REPS"); do
  run 1 0 $rep
  run 2 0 $rep
  run 2 1 $rep
done
column -s, -t "$OUT/loop.csv" | tee "$OUT/summary.txt"
