#!/usr/bin/env bash
# gpu_loop_scaling.sh: on a machine with several GPUs, from the repository root: the compress loop on
# 1, 2, 4, ... GPUs (up to the machine's count, or GPUS="1,2"), REPS runs each, d D (128), k K (1024), fp16
# products, 20 iterations, per-iteration times from the progress lines (the median iteration leaves
# out the first one, where NCCL's first-use costs would land) and the loop's collectives from --metrics
# (loop_allreduce_seconds) divided by the iterations, max and min over ranks (the max includes the wait
# for the slowest rank; the min is near the collectives' own cost).
#   weak:   ROWS_PER_GPU rows per GPU (default 2000000): efficiency t1 / tP on the median iteration
#   strong: STRONG_N rows in all (default 8000000): efficiency t1 / (P tP)
# Checks (bench/verify.py; the last line says passed or FAILED, exit 1 on a failure): every run, weak
# and strong, finishes with a usable index (anchors non-empty and finite, one assignment per row, finite
# energy); each strong run on P GPUs agrees with the 1-GPU run of the same repeat to rounding: anchors
# within 1e-4 relative (RANK_RULES["cuda"] in verify.py; the share of assignments that differ is
# printed, not bounded: rows at a near-tie may follow the anchors' rounding).
# SET: further compress settings, space-separated KEY=VALUE (e.g. SET=init=random: initial anchors drawn
# from the rows, as the k 65536 comparison with peers starts).
# RUNTIME_CONNECT=1 also runs every P > 1 with NCCL's lazy peer connections (NCCL_RUNTIME_CONNECT=1,
# NCCL's own default) beside vecanneal's default (connections made at communicator creation).
# Output under $OUT: loop.csv (one row per run), summary.txt (medians over the runs and efficiencies).
set -u
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
OUT=${OUT:-$PWD/out-gpu}; W=/tmp/gpu-loop-scaling; mkdir -p "$OUT" "$W"
export VERIFY_LOG=$OUT/verification.log; : > "$VERIFY_LOG"
V="python3 bench/verify.py"
B=${BUILD_DIR:-build-gpu} ROWS_PER_GPU=${ROWS_PER_GPU:-2000000} STRONG_N=${STRONG_N:-8000000} REPS=${REPS:-3}
D=${D:-128} K=${K:-1024}
EXTRA=(); for kv in ${SET:-}; do EXTRA+=(--set "$kv"); done
NGPU=$(bash scripts/visible-gpus)
if [ -z "${GPUS:-}" ]; then GPUS=1; p=2; while [ $p -le "$NGPU" ]; do GPUS="$GPUS,$p"; p=$((p * 2)); done; fi
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
cmake -S . -B "$B" -DVECANNEAL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 > "$W/cmake.log" 2>&1 &&
  make -C "$B" -j"$(nproc)" vecanneal > "$W/build.log" 2>&1 \
  || { tail -20 "$W/build.log"; $V fail "the build failed"; exec $V verdict; }
gen() {
  [ -f "$W/n$1x$D.h5" ] || mpirun -n "$(nproc)" --bind-to none "$B/vecanneal" gen --out "$W/n$1x$D.h5" --n "$1" \
    --d "$D" --clusters 2000 --spread 0.5 --dtype float16 > /dev/null
}
echo "mode,gpus,runtime_connect,rep,n,ms_per_iteration,first_iter_ms,median_iter_ms,max_iter_ms,\
allreduce_ms_per_iter,allreduce_min_ms_per_iter,vs_1gpu" > "$OUT/loop.csv"
run() { # mode gpus runtime_connect rep n
  local tag="$1_$2_$3_$4" cmp=""
  rm -f "$W/i_$tag.h5" "$W/m_$tag.json"
  mpirun -n "$2" -x NCCL_NVLS_ENABLE -x NCCL_RUNTIME_CONNECT="$3" --bind-to none "$B/vecanneal" compress \
    --input "$W/n$5x$D.h5:/train" --anchors "$K" --out "$W/i_$tag.h5" --backend cuda --set precision=fp16 \
    --set max_iter=20 --set tol=0 --set min_changes=0 --set threads=4 --set seed=1 --set progress_every=1 \
    --metrics "$W/m_$tag.json" "${EXTRA[@]}" \
    > "$W/run_$tag.log" 2>&1 \
    || { tail -5 "$W/run_$tag.log"; $V fail "run $tag failed"; return; }
  $V run "$W/i_$tag.h5" "$W/m_$tag.json" "$5" --label "run $tag" > /dev/null || return
  if [ "$1" = strong ] && [ "$2" -gt 1 ]; then
    cmp=$($V ranks "$W/i_$tag.h5" "$W/i_strong_1_0_$4.h5" cuda --label "strong, $2 GPUs against 1, run $4" | tr ',' ';')
  fi
  local bad="run $tag: its progress lines could not be read"
  python3 - "$W/run_$tag.log" "$W/m_$tag.json" "$1,$2,$3,$4,$5" "$cmp" >> "$OUT/loop.csv" <<'PY' || $V fail "$bad"
import json, re, statistics, sys
# Progress lines: iter T energy distortion changed anchors ms/iter ETA [stream GB/s]
ms = [float(l.split()[6]) for l in open(sys.argv[1]) if re.match(r"^\s+\d+\s", l)]
m = json.load(open(sys.argv[2]))
ar = [1e3 * m["loop_allreduce_seconds"][k] / max(1, m["iterations"]) for k in ("max", "min")]
print(f"{sys.argv[3]},{m['ms_per_iteration']:.3f},{ms[0]:.2f},{statistics.median(ms[1:]):.3f},{max(ms):.2f},"
      f"{ar[0]:.3f},{ar[1]:.3f},{sys.argv[4]}")
PY
}
IFS=, read -r -a plist <<< "$GPUS"
for p in "${plist[@]}"; do gen $((p * ROWS_PER_GPU)); done
gen "$STRONG_N"
for rep in $(seq "$REPS"); do
  for p in "${plist[@]}"; do
    run weak "$p" 0 "$rep" $((p * ROWS_PER_GPU))
    run strong "$p" 0 "$rep" "$STRONG_N"
    if [ "${RUNTIME_CONNECT:-0}" = 1 ] && [ "$p" -gt 1 ]; then run weak "$p" 1 "$rep" $((p * ROWS_PER_GPU)); fi
  done
done
python3 - "$OUT/loop.csv" <<'PY' | tee "$OUT/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(mode, p, rc="0", key="median_iter_ms"):
    v = [float(r[key]) for r in rows if r["mode"] == mode and r["gpus"] == str(p) and r["runtime_connect"] == rc]
    return (statistics.median(v), min(v), max(v)) if v else None
gpus = sorted({int(r["gpus"]) for r in rows})
print("mode   gpus  median iteration ms [min, max over runs]  allreduce ms/iter max/min rank  efficiency")
for mode in ("weak", "strong"):
    t1 = med(mode, 1)
    for p in gpus:
        t, a = med(mode, p), med(mode, p, key="allreduce_ms_per_iter")
        amin = med(mode, p, key="allreduce_min_ms_per_iter")
        if not t: continue
        eff = (t1[0] / t[0] if mode == "weak" else t1[0] / (p * t[0])) if t1 else float("nan")
        print(f"{mode:6s} {p:4d}  {t[0]:8.3f} [{t[1]:.3f}, {t[2]:.3f}]  {a[0]:17.3f} / {amin[0]:.3f}  {eff:10.2f}")
PY
cat "$VERIFY_LOG"
$V verdict
