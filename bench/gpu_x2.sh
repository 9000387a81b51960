#!/usr/bin/env bash
# gpu_x2.sh: on a machine with 2 (or more) GPUs, from the repository root, the multi-GPU checks and
# measurements in one call:
#  1. build; the gpu-labelled tests that need 2 GPUs (TESTS, a ctest -R regex: CPU vs CUDA and 1 vs 2
#     GPUs incl. out-of-core, NCCL allreduce, rank death with NCCL; the single-GPU tests run in
#     bench/gpu_final.sh);
#  2. compress scaling over 1 and 2 GPUs with bench/scaling/run.py (fp16 products, k 1024, d 128,
#     20 iterations): strong at N_STRONG rows, weak at ROWS_PER_GPU rows per GPU;
#  3. embed scaling over 1 and 2 GPUs: `vecanneal embed --backend cuda` on the test corpus repeated
#     EMBED_REPEAT times (encode lines/s from --metrics, and the whole command's wall time).
# The model directory (MODEL, default .gpu-model: vocab.txt, config.json, model-fp16.safetensors) is
# carried with the call. Output under $OUT: summary.txt, ctest_gpu.log, scaling.csv, REPORT.md,
# embed_scaling.csv, logs.tgz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/out-gpu}; W=/tmp/gpu-x2; mkdir -p "$OUT" "$W"
B=${BUILD_DIR:-build-gpu}
MODEL=$(realpath "${MODEL:-.gpu-model}")
TESTS=${TESTS:-gpu_backend|cuda_nccl|rank_death_gpu} N_STRONG=${N_STRONG:-16000000} ROWS_PER_GPU=${ROWS_PER_GPU:-8000000} EMBED_REPEAT=${EMBED_REPEAT:-32}
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$OUT/summary.txt"; }
say "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sort | uniq -c | tr -s ' ')"
nvidia-smi topo -m 2>/dev/null | head -4 > "$W/topo.txt"; cat "$W/topo.txt" >> "$OUT/summary.txt"

cmake -S . -B "$B" -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR="$MODEL" > "$W/cmake.log" 2>&1 &&
  make -C "$B" -j"$(nproc)" > "$W/build.log" 2>&1 || { grep -E "error" "$W/build.log" | head -20; tail -20 "$W/build.log"; exit 1; }
say "built"

(cd "$B" && timeout 330 ctest -L gpu -R "$TESTS" --output-on-failure --timeout 240) > "$OUT/ctest_gpu.log" 2>&1
grep -E "Test +#|tests passed|tests failed" "$OUT/ctest_gpu.log" | tee -a "$OUT/summary.txt"
grep -E "to rank process|VECANNEAL_NCCL_TIMEOUT|PASS: rank death|GPUs \(|differ" "$OUT/ctest_gpu.log" | head -12 | tee -a "$OUT/summary.txt"
say "gpu tests done"

python3 bench/scaling/run.py --vecanneal "$PWD/$B/vecanneal" --backend cuda --precision fp16 --ranks 1,2 \
  --n "$N_STRONG" --rows-per-rank "$ROWS_PER_GPU" --d 128 --k 1024 --iterations 20 --repeats 1 --threads 4 \
  --clusters 2000 --spread 0.5 --dtype float16 --no-calibrate --no-plots --no-install --timeout 200 \
  --data-dir "$W/scaling-data" --work-dir "$W/scaling-work" --out "$W/scaling" --tag h200x2 > "$W/scaling.log" 2>&1
cp "$W/scaling/scaling.csv" "$OUT/scaling.csv" 2>/dev/null; cp "$W/scaling/REPORT.md" "$OUT/REPORT.md" 2>/dev/null
grep -E "^\| *(strong|weak)" "$W/scaling/REPORT.md" 2>/dev/null | head -8 | tee -a "$OUT/summary.txt" || tail -20 "$W/scaling.log"
say "compress scaling done"

zcat tests/data/embed_corpus.txt.gz > "$W/c1.txt"
for _ in $(seq "$EMBED_REPEAT"); do cat "$W/c1.txt"; done > "$W/corpus.txt"
echo "gpus,lines,encode_lines_per_s,wall_s,lines_per_s_whole" > "$OUT/embed_scaling.csv"
for p in 1 2; do
  for rep in 1 2; do
    s=$(date +%s.%N)
    mpirun -n $p -x NCCL_NVLS_ENABLE "$B/vecanneal" embed --backend cuda --model "$MODEL" --weights fp16 --input "$W/corpus.txt" \
      --out "$W/e$p.h5:/train" --metrics "$W/e$p.json" --progress 0 > "$W/embed$p.log" 2>&1 || { tail -5 "$W/embed$p.log"; break; }
    e=$(date +%s.%N)
    python3 - "$W/e$p.json" "$p" "$s" "$e" >> "$OUT/embed_scaling.csv" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); wall = float(sys.argv[4]) - float(sys.argv[3])
print(f"{sys.argv[2]},{m['lines']},{m['encode_lines_per_second']:.0f},{wall:.2f},{m['lines'] / wall:.0f}")
PY
  done
done
cat "$OUT/embed_scaling.csv" | tee -a "$OUT/summary.txt"
say "embed scaling done"
(cd "$W" && tar -czf "$OUT/logs.tgz" $(ls *.log *.json topo.txt 2>/dev/null) scaling-work 2>/dev/null)
cat "$OUT/summary.txt"
