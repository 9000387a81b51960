#!/usr/bin/env bash
# gpu_e2e.sh: on a GPU machine, from the repository root: build with CUDA, run the gpu-labelled tests,
# time the prototype's large parity case end to end, and time `vecanneal compress` per iteration on
# generated data in each precision. Logs and metrics under $OUT (default ./out-gpu).
#   bench/gpu_e2e.sh [n_million=1] [k=1024] [iterations=20]
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
OUT=${OUT:-$PWD/out-gpu}; mkdir -p "$OUT"
NM=${1:-1}; K=${2:-1024}; IT=${3:-20}
B=${BUILD_DIR:-build-gpu}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpus.txt"
NGPU=$(nvidia-smi -L | grep -c "^GPU")
t0=$(date +%s)
cmake -S . -B "$B" -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
make -C "$B" -j"$(nproc)" > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build $(( $(date +%s) - t0 )) s: $("$B/vecanneal" --version)"
BIN=$B/vecanneal
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  (cd "$B" && ctest -L gpu --output-on-failure --timeout 600) > "$OUT/ctest_gpu.log" 2>&1
  grep -E "Test +#|tests passed|tests failed" "$OUT/ctest_gpu.log"
  grep -E "precision|GPU|FAIL|differ|worst" "$OUT/ctest_gpu.log" | head -30
fi
# The prototype's large case, wall time including start-up (the prototype took 126 s on its GPU).
"$BIN" gen --kind vlc-demo --n 10000 --d 128 --out "$OUT/demo.h5" > /dev/null
for be in cuda cpu; do
  s=$(date +%s.%N)
  mpirun -n 1 "$BIN" compress --config configs/vlc-demo-large.ini --input "$OUT/demo.h5:/train" --out "$OUT/demo_$be.h5" \
    --backend $be --set progress_every=0 --set gpu_min_work=0 --metrics "$OUT/demo_$be.json" > "$OUT/demo_$be.log" 2>&1
  e=$(date +%s.%N)
  echo "parity large case, backend $be: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s; $(grep -o 'energy [0-9.e-]*' "$OUT/demo_$be.log" | tail -1), $(grep -o '[0-9]* iterations' "$OUT/demo_$be.log")"
done
# Per-iteration time on a Gaussian mixture, n = NM million, d = 128, k = K.
n=$((NM * 1000000))
mpirun -n 16 "$BIN" gen --out "$OUT/g.h5" --n $n --d 128 --clusters 2000 --spread 0.5 > /dev/null
for prec in tf32 fp16 bf16 fp32; do
  mpirun -n 1 "$BIN" compress --input "$OUT/g.h5:/train" --anchors $K --out "$OUT/g_$prec.h5" --backend cuda --set precision=$prec \
    --set max_iter=$IT --set tol=0 --set min_changes=0 --set progress_every=5 --set init=random --metrics "$OUT/g_$prec.json" > "$OUT/g_$prec.log" 2>&1
  python3 - "$OUT/g_$prec.json" $prec <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); it = m["iterations"]; ph = m["phases_seconds"]
per = lambda p: 1e3 * ph[p]["max"] / it
print(f"{sys.argv[2]}: {m['ms_per_iteration']:.3f} ms/iteration over {it} its (assign {per('assign'):.3f}, reduce {per('reduce'):.3f}, "
      f"allreduce {per('allreduce'):.3f}, update {per('update'):.3f}), energy {m['final_energy']:.6g}, total {m['total_seconds']:.2f} s")
PY
done
tail -3 "$OUT/g_tf32.log"
