#!/usr/bin/env bash
# progress.sh: what rank 0 prints while a job runs (docs/metrics.md, README "Running"): the read with its
# rows and rate, every kmeans|| stage (and its rows, kmeans_sample), an init line whose parts add up to the
# whole, an ETA column per iteration, and the heartbeat when nothing else was printed for
# VECANNEAL_PROGRESS_SECONDS.
source "$(dirname "$0")/lib.sh"
run_np 2 gen --out "$WORK/g.h5" --n 120000 --d 32 --clusters 40 > /dev/null || fail "gen"
run_np 2 compress --input "$WORK/g.h5:/train" --anchors 64 --out "$WORK/a.h5" --set max_iter=6 --set tol=0 \
  --set threads=1 > "$WORK/a.log" || fail "compress"
grep -Eq '^read 120000 rows \([0-9.]+ GB\) in [0-9.]+ s: [0-9.]+ GB/s$' "$WORK/a.log" || fail "no read line with rows and rate"
grep -q '^init kmeans||: round 1 of 3' "$WORK/a.log" || fail "no kmeans|| round line"
grep -q '^init kmeans||: weighted k-means++ from [0-9]* candidates to 64 anchors' "$WORK/a.log" || fail "no k-means++ line"
grep -q '^init kmeans||: on 4096 of 120000 rows (kmeans_sample 64 x k)$' "$WORK/a.log" || fail "no kmeans|| sample line"
# kmeans_sample = 1: kmeans|| reads k rows, so its candidates are those rows (at most k; topped up to k).
run_np 2 compress --input "$WORK/g.h5:/train" --anchors 64 --out "$WORK/s.h5" --set max_iter=1 --set threads=1 \
  --set kmeans_sample=1 > "$WORK/s.log" || fail "compress (kmeans_sample 1)"
grep -q '^init kmeans||: weighted k-means++ from 64 candidates to 64 anchors' "$WORK/s.log" ||
  fail "kmeans_sample = 1 drew candidates from outside its 64 rows: $(grep 'k-means++ from' "$WORK/s.log")"
python3 - "$WORK/a.log" <<'PY' || fail "the init line's parts do not add up to the whole"
import re, sys
line = [l for l in open(sys.argv[1]) if l.startswith("init ") and "preprocessing" in l][0]
m = re.match(r"init ([\d.]+) s: preprocessing ([\d.]+) s, backend ([\d.]+) s, anchors ([\d.]+) s \(.*\), warm-up ([\d.]+) s", line)
whole, parts = float(m.group(1)), [float(m.group(i)) for i in range(2, 6)]
assert abs(sum(parts) - whole) <= 0.02 + 0.02 * whole, (whole, parts)
print("init %.2f s = %s" % (whole, " + ".join("%.2f" % p for p in parts)))
PY
grep -Eq '^ +iter +T +energy +distortion +changed +anchors +ms/iter +ETA$' "$WORK/a.log" || fail "no ETA column"
[ "$(grep -Ec '^ +[1-6] .* ([0-9]+s|[0-9]+m[0-9]+s|-)$' "$WORK/a.log")" = 6 ] || fail "not every iteration line ends with its ETA"
# The heartbeat: no progress lines in the loop (progress_every above max_iter), a short threshold.
VECANNEAL_PROGRESS_SECONDS=0.05 run_np 2 compress --input "$WORK/g.h5:/train" --anchors 64 --out "$WORK/b.h5" \
  --set max_iter=30 --set tol=0 --set threads=1 --set progress_every=1000 > "$WORK/b.log" || fail "compress (heartbeat)"
grep -q '^  (still working: [0-9.]* s since the line above)$' "$WORK/b.log" || fail "no heartbeat line after a quiet stretch"
echo "progress: read, kmeans|| stages, init parts, ETA and heartbeat ($(grep -c 'still working' "$WORK/b.log") line(s)) as documented"
