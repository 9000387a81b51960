#!/usr/bin/env bash
# gpu_index_time.sh: on a machine with 2 GPUs, from the repository root: the time to index N rows x 128
# (default N = 64M, float16 in HDF5 on local disk, 1024 anchors, fp16 products, 20 iterations) on 1 GPU
# and on 2, phase by phase from the metrics (max over ranks), each against its limit:
#   read   against the file's read rate measured by dd in the same run (the page cache holds the file:
#          gen has just written it, and dd reads it twice, the second rate is the one compared)
#   loop   the 2-GPU loop against the 1-GPU loop halved: strong efficiency t1 / (2 t2) on the mean and
#          on the median iteration (progress lines; the first iteration apart); the loop's collectives per
#          iteration beside it (metrics loop_allreduce_seconds), max and min over ranks: the rank that
#          reaches a collective last waits least, so the min is near the reductions' own cost and max - min
#          is the wait for the other rank
#   init, final pass and write, and the whole command (wall, start-up included)
# Checks (bench/verify.py; the last line says passed or FAILED, exit 1 on a failure): both indexes usable,
# N assignments each; the 2-GPU index against the 1-GPU one with the cuda rank rule (anchors 1e-4).
# Output under $OUT: index_time.csv (one row per run) and the table printed. The binary: $VA, or
# $BUILD_DIR/vecanneal built with CUDA (bench/gpu_binary.sh). BACKEND=cpu VA=<a CPU build's binary> (with
# a small N) runs the same steps on 1 and 2 ranks, to try the script where there is no GPU.
set -u
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-$PWD/out-gpu}; W=${WORK_DIR:-/tmp/gpu-index-time}; mkdir -p "$OUT" "$W"
export VERIFY_LOG=$OUT/verification.log; : > "$VERIFY_LOG"
V="python3 bench/verify.py"
N=${N:-64000000} BACKEND=${BACKEND:-cuda}
[ "$BACKEND" = cuda ] && nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
source "$HERE/gpu_binary.sh" # VA
data=$W/n$N.h5
t0=$(date +%s)
[ -f "$data" ] || mpirun -n "$(nproc)" --bind-to none "$VA" gen --out "$data" --n "$N" --d 128 \
  --clusters 2000 --spread 0.5 --dtype float16 > /dev/null || { $V fail "gen failed"; exec $V verdict; }
echo "gen: $N rows in $(($(date +%s) - t0)) s"
dd_rate() { dd if="$data" of=/dev/null bs=16M 2>&1 | awk '/copied/ {print $(NF-1), $NF}'; }
echo "file $data: $(du -h "$data" | cut -f1); dd read 1: $(dd_rate); dd read 2: $(dd_rate | tee "$W/dd.txt")"
csv_head="gpus,wall_s,read_s,read_GBps,init_s,loop_s,ms_per_iteration,first_iter_ms,median_iter_ms"
csv_head="$csv_head,allreduce_max_ms_per_iteration,allreduce_min_ms_per_iteration,write_s,total_s"
echo "$csv_head" > "$OUT/index_time.csv"
for p in 1 2; do
  rm -f "$W/i$p.h5" "$W/m$p.json"
  s=$(date +%s.%N)
  mpirun -n "$p" -x NCCL_NVLS_ENABLE --bind-to none "$VA" compress --input "$data:/train" --anchors 1024 \
    --out "$W/i$p.h5" --backend "$BACKEND" --set precision=fp16 --set max_iter=20 --set tol=0 --set min_changes=0 \
    --set threads=8 --set progress_every=1 --metrics "$W/m$p.json" > "$W/run$p.log" 2>&1 ||
    { tail -5 "$W/run$p.log"; $V fail "$p GPU(s): the run failed"; continue; }
  e=$(date +%s.%N)
  $V run "$W/i$p.h5" "$W/m$p.json" "$N" --label "$p GPU(s)" > /dev/null
  wall=$(awk -v a="$s" -v b="$e" 'BEGIN{print b-a}')
  python3 - "$W/m$p.json" "$p" "$wall" "$W/run$p.log" >> "$OUT/index_time.csv" <<'PY'
import json, re, statistics, sys
m, p, wall = json.load(open(sys.argv[1])), sys.argv[2], float(sys.argv[3])
# Progress lines: iter T energy distortion changed anchors ms/iter ETA [stream GB/s]
ms = [float(l.split()[6]) for l in open(sys.argv[4]) if re.match(r"^\s+\d+\s", l)] or [float("nan")] * 2
ph = {k: v["max"] for k, v in m["phases_seconds"].items()}
gb = m["n"] * m["d"] * 2 / 1e9  # float16 rows
it = max(1, m["iterations"])
ar = m["loop_allreduce_seconds"]
print(f"{p},{wall:.2f},{ph['read']:.3f},{gb / ph['read']:.2f},{ph['init']:.3f},{m['loop_seconds']:.3f},"
      f"{m['ms_per_iteration']:.3f},{ms[0]:.3f},{statistics.median(ms[1:] or ms):.3f},{1e3 * ar['max'] / it:.3f},"
      f"{1e3 * ar['min'] / it:.3f},{ph['write']:.3f},{m['total_seconds']:.2f}")
PY
done
[ -f "$W/i2.h5" ] && [ -f "$W/i1.h5" ] && $V ranks "$W/i2.h5" "$W/i1.h5" "$BACKEND" --label "2 GPUs against 1"
python3 - "$OUT/index_time.csv" "$(cat "$W/dd.txt" 2>/dev/null)" <<'PY'
import csv, sys
rows = {r["gpus"]: r for r in csv.DictReader(open(sys.argv[1]))}
print(f"dd read rate of the file (page cache): {sys.argv[2]}")
print("gpus  wall s  read s (GB/s)  init s  loop s  ms/iter (first, median)  allreduce ms/iter max/min  write s")
for p, r in sorted(rows.items()):
    v = {k: float(x) for k, x in r.items()}
    print(f"{p:>4}  {v['wall_s']:6.2f}  {v['read_s']:6.2f} ({v['read_GBps']:5.2f})  {v['init_s']:6.2f}"
          f"  {v['loop_s']:6.2f}  {v['ms_per_iteration']:7.3f} ({v['first_iter_ms']:.3f}, {v['median_iter_ms']:.3f})"
          f"  {v['allreduce_max_ms_per_iteration']:9.3f} / {v['allreduce_min_ms_per_iteration']:.3f}"
          f"  {v['write_s']:7.3f}")
if "1" in rows and "2" in rows:
    eff = lambda key: float(rows["1"][key]) / (2 * float(rows["2"][key]))
    print(f"loop strong efficiency on 2 GPUs t1 / (2 t2): {eff('ms_per_iteration'):.3f} on the mean iteration, "
          f"{eff('median_iter_ms'):.3f} on the median; whole command 1 GPU / 2 GPUs: "
          f"{float(rows['1']['wall_s']) / float(rows['2']['wall_s']):.2f}x")
PY
[ "${KEEP_DATA:-0}" = 1 ] || rm -f "$data"
rm -f "$W"/i?.h5
$V verdict
