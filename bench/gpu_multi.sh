#!/usr/bin/env bash
# gpu_multi.sh: on a machine with several GPUs, from the repository root: the gpu-labelled tests (1 vs
# 2 vs 4 GPUs, NCCL), then strong and weak scaling of compress with the CUDA backend (fp16) through
# bench/scaling/run.py. Output under $OUT.
#   bench/gpu_multi.sh [strong_n=8000000] [rows_per_gpu=2000000] [iterations=20]
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/out-gpu}; mkdir -p "$OUT"
B=${BUILD_DIR:-build-gpu}
NGPU=$(nvidia-smi -L | grep -c "^GPU")
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
nvidia-smi topo -m 2>/dev/null | head -8
cmake -S . -B "$B" -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > "$OUT/cmake.log" 2>&1 && make -C "$B" -j"$(nproc)" > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
(cd "$B" && ctest -L gpu --output-on-failure --timeout 600) > "$OUT/ctest_gpu.log" 2>&1
grep -E "Test +#|tests passed|tests failed|GPUs|differs|worst" "$OUT/ctest_gpu.log" | head -30
ranks=1; p=2; while [ $p -le "$NGPU" ]; do ranks="$ranks,$p"; p=$((p * 2)); done
python3 bench/scaling/run.py --vecanneal "$PWD/$B/vecanneal" --backend cuda --precision fp16 --ranks "$ranks" \
  --n "${1:-8000000}" --rows-per-rank "${2:-2000000}" --d 128 --k 1024 --iterations "${3:-20}" --repeats 1 --threads 4 \
  --clusters 2000 --spread 0.5 --no-calibrate --data-dir /tmp/scaling-data --work-dir /tmp/scaling-work \
  --out "$OUT/scaling" --tag "h200x$NGPU" > "$OUT/scaling.log" 2>&1
tail -25 "$OUT/scaling/REPORT.md" 2>/dev/null || tail -30 "$OUT/scaling.log"
