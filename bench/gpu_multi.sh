#!/usr/bin/env bash
# gpu_multi.sh: on a machine with several GPUs, from the repository root: the gpu-labelled tests (1 vs
# 2 vs 4 GPUs, NCCL), strong and weak scaling of compress with the CUDA backend (fp16) through
# bench/scaling/run.py, then `vecanneal embed` (fp16, batch 256) on 1, 2, 4, ... GPUs over the test
# corpus repeated EMBED_REPEAT times (default 128: about 2M lines, so that a rank's fixed costs --
# model load, GPU set-up -- are a small part). mpirun gets --bind-to none, so every rank's tokenizer
# has the node's cores (mpirun binds 2 ranks to a core each by default). The model directory (MODEL,
# default .gpu-model) is copied along with the run. EMBED_REPS runs per GPU count (default 2); each
# records the command's wall time from launch to exit, its phases (max over ranks: load_model, read,
# tokenize, encode, write) and the launcher's share (wall time less the job's own total: mpirun's
# start, MPI's start and exit). ONLY_EMBED=1 builds vecanneal alone and runs only the embed part.
# LAUNCH (default "defaults"): a comma list of how embed's mpirun starts: "defaults" (Open MPI's), "tuned"
# (the README's one-node settings: HWLOC_COMPONENTS without GPU discovery in mpirun's environment, --mca pml
# ob1 --mca btl self,vader; bench/mpi_start.sh); every GPU count runs under each, alternating per run.
# Output under $OUT: embed_scaling.csv (one row per run), embed_summary.txt (medians, ratios to 1 GPU).
#   bench/gpu_multi.sh [strong_n=8000000] [rows_per_gpu=2000000] [iterations=20]
# Checks (bench/verify.py; the last line says passed or FAILED, exit 1 on a failure): run.py's (every
# run finishes with a usable index; strong runs on P GPUs against the 1-GPU run: anchors within 1e-4
# relative, RANK_RULES["cuda"]); every embed run finishes, and its rows on P GPUs against those on 1
# GPU: cosine >= 0.9999 on every row (EMBED_BATCHING: the fp16 encoder's tolerance for a line in
# another batch, tests/embed/test_encoder_cuda.c). The gpu-labelled tests are reported, not counted.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/out-gpu}; mkdir -p "$OUT"
export VERIFY_LOG=$OUT/verification.log; : > "$VERIFY_LOG"
V="python3 bench/verify.py"
B=${BUILD_DIR:-build-gpu}
NGPU=$(bash scripts/visible-gpus)
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
nvidia-smi topo -m 2>/dev/null | head -8
MODEL=$(realpath "${MODEL:-.gpu-model}") EMBED_REPEAT=${EMBED_REPEAT:-128} EMBED_REPS=${EMBED_REPS:-2}
TARGET=; [ "${ONLY_EMBED:-0}" = 1 ] && TARGET=vecanneal
cmake -S . -B "$B" -DVECANNEAL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR="$MODEL" \
  > "$OUT/cmake.log" 2>&1 &&
  make -C "$B" -j"$(nproc)" $TARGET > "$OUT/build.log" 2>&1 ||
  { tail -20 "$OUT/build.log"; $V fail "the build failed"; exec $V verdict; }
ranks=1; p=2; while [ $p -le "$NGPU" ]; do ranks="$ranks,$p"; p=$((p * 2)); done
if [ "${ONLY_EMBED:-0}" != 1 ]; then
(cd "$B" && ctest -L gpu --output-on-failure) > "$OUT/ctest_gpu.log" 2>&1
grep -E "Test +#|tests passed|tests failed|GPUs|differs|worst" "$OUT/ctest_gpu.log" | head -30
python3 bench/scaling/run.py --vecanneal "$PWD/$B/vecanneal" --backend cuda --precision fp16 --ranks "$ranks" \
  --n "${1:-8000000}" --rows-per-rank "${2:-2000000}" --d 128 --k 1024 --iterations "${3:-20}" --repeats 1 --threads 4 \
  --clusters 2000 --spread 0.5 --dtype float16 --no-calibrate --no-plots --data-dir /tmp/scaling-data \
  --work-dir /tmp/scaling-work --out "$OUT/scaling" \
  --tag "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print tolower($2)}')x$NGPU" \
  > "$OUT/scaling.log" 2>&1 \
  || $V fail "bench/scaling/run.py exited non-zero (see $OUT/scaling.log)"
tail -25 "$OUT/scaling/REPORT.md" 2>/dev/null || tail -30 "$OUT/scaling.log"
fi

W=/tmp/embed-scaling; mkdir -p "$W"; rm -f "$W"/e*.h5
zcat tests/data/embed_corpus.txt.gz > "$W/c1.txt"
for _ in $(seq "$EMBED_REPEAT"); do cat "$W/c1.txt"; done > "$W/corpus.txt"
LAUNCH=${LAUNCH:-defaults}
launch_opts() { # launch -> PRE (mpirun's own environment) and OPT (its options)
  case $1 in
    defaults) PRE=() OPT=() ;;
    tuned) PRE=(HWLOC_COMPONENTS=-opencl,-gl,-cuda,-nvml,-rsmi,-levelzero) OPT=(--mca pml ob1 --mca btl self,vader) ;;
    *) return 1 ;;
  esac
}
for l in ${LAUNCH//,/ }; do
  launch_opts "$l" || { $V fail "LAUNCH: unknown launch '$l' (defaults, tuned)"; exec $V verdict; }
done
echo "launch,gpus,lines,encode_lines_per_s,gpu_forward_lines_per_s,setup_wait_s,wall_s,lines_per_s_whole,\
load_model_s,read_s,tokenize_s,encode_s,write_s,job_s,launcher_s,ranks_with_vectors_in_gpu_memory" \
  > "$OUT/embed_scaling.csv"
for p in ${ranks//,/ }; do
  for rep in $(seq "$EMBED_REPS"); do for l in ${LAUNCH//,/ }; do
    launch_opts "$l"
    s=$(date +%s.%N)
    env -u HWLOC_COMPONENTS "${PRE[@]}" mpirun -n "$p" --bind-to none "${OPT[@]}" -x NCCL_NVLS_ENABLE \
      "$B/vecanneal" embed --backend cuda --model "$MODEL" --weights fp16 --input "$W/corpus.txt" \
      --out "$W/e$p.h5:/train" --metrics "$W/e$p.json" --progress 0 > "$W/embed$p.log" 2>&1 \
      || { tail -5 "$W/embed$p.log"; $V fail "embed on $p GPU(s), $l launch, run $rep: the run failed"; break 2; }
    e=$(date +%s.%N)
    python3 - "$W/e$p.json" "$p" "$s" "$e" "$l" >> "$OUT/embed_scaling.csv" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); wall = float(sys.argv[4]) - float(sys.argv[3])
ph = {k: v["max"] for k, v in m["phases_seconds"].items()}
print(f"{sys.argv[5]},{sys.argv[2]},{m['lines']},{m['encode_lines_per_second']:.0f},"
      f"{m['gpu_forward_lines_per_second']:.0f},"
      f"{m['gpu_setup_wait_seconds_max']:.3f},{wall:.2f},{m['lines'] / wall:.0f},"
      + ",".join(f"{ph[k]:.3f}" for k in ("load_model", "read", "tokenize", "encode", "write", "total"))
      + f",{wall - ph['total']:.3f},{m.get('ranks_with_vectors_in_gpu_memory', 0)}")
PY
  done; done
  [ "$p" = 1 ] || $V cosine "$W/e$p.h5:/train" "$W/e1.h5:/train" batching --label "embed, $p GPUs against 1"
done
python3 - "$OUT/embed_scaling.csv" <<'PY' | tee "$OUT/embed_summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = lambda l, p, k: statistics.median(float(r[k]) for r in rows if r["launch"] == l and r["gpus"] == p)
cols = ("wall_s", "launcher_s", "load_model_s", "read_s", "tokenize_s", "encode_s", "write_s", "job_s")
print("launch    gpus  " + "  ".join(cols) + "  (medians, s)  whole / job / encode against 1 GPU, same launch")
for l in dict.fromkeys(r["launch"] for r in rows):
    for p in sorted({r["gpus"] for r in rows if r["launch"] == l}, key=int):
        ratio = ("/".join(f"{med(l, '1', k) / med(l, p, k):.2f}x" for k in ("wall_s", "job_s", "encode_s"))
                 if p != "1" else "")
        print(f"{l:8s}  {p:>4}  " + "  ".join(f"{med(l, p, k):.2f}" for k in cols) + "  " + ratio)
PY
cat "$OUT/embed_scaling.csv" "$VERIFY_LOG"
$V verdict
