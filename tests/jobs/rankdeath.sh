#!/usr/bin/env bash
# rankdeath.sh: SIGKILL of one rank in the middle of a run ends every rank with a non-zero exit within
# 30 s (no hang), and leaves no index or partial file behind.
source "$(dirname "$0")/lib.sh"
run_np 2 gen --out "$WORK/d.h5" --n 100000 --d 64 --clusters 40 > /dev/null || fail gen
out=$WORK/idx.h5
rm -f "$out" "$out.partial"
timeout 300 mpirun -n 3 --oversubscribe "$BIN" compress --input "$WORK/d.h5:/train" --anchors 128 --out "$out" --set threads=1 \
  --set max_iter=100000 --set tol=0 --set min_changes=0 > "$WORK/run.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do grep -q "^ *2 " "$WORK/run.log" 2> /dev/null && break; sleep 0.1; done
victim=$(pgrep -f "vecanneal compress --input $WORK/d.h5" | grep -v "^$pid\$" | tail -1)
[ -n "$victim" ] || fail "no rank process found"
t0=$(date +%s.%N)
kill -9 "$victim"
wait $pid
rc=$?
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
echo "killed rank process $victim: mpirun exited with $rc after $secs s"
[ $rc -ne 0 ] || fail "exit status 0 after a rank died"
[ $rc -ne 124 ] || fail "hang: the job outlived the 300 s timeout"
awk -v s="$secs" 'BEGIN { exit !(s <= 30) }' || fail "took $secs s (> 30 s)"
sleep 1
pgrep -f "vecanneal compress --input $WORK/d.h5" > /dev/null && fail "ranks still running after mpirun exited"
[ -e "$out" ] && fail "index left behind"
[ -e "$out.partial" ] && fail "partial index left behind"
echo "PASS: rank death"
