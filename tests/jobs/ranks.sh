#!/usr/bin/env bash
# ranks.sh NAME [compress args...]: the whole job on 1, 2, 3 and 4 ranks against the 1-rank run:
# identical assignments and anchors equal to 1e-5 relative; a repeated 1-rank and 3-rank run is
# bitwise identical, and so is the 1-rank run on 3 threads (total variance included); the serial-HDF5 path (io = independent) writes the same index as the collective one.
source "$(dirname "$0")/lib.sh"
name=$1; shift
data=$WORK/$name.data.h5
run_np 2 gen --out "$data" --n 6000 --d 24 --clusters 12 --spread 0.4 --seed 5 > /dev/null || fail "gen"
common=(compress --input "$data:/train" --set threads=1 --set progress_every=0 "$@")
run_np 1 "${common[@]}" --out "$WORK/$name.p1.h5" > "$WORK/$name.p1.log" || { cat "$WORK/$name.p1.log"; fail "1 rank"; }
grep "^done" "$WORK/$name.p1.log"
run_np 1 "${common[@]}" --out "$WORK/$name.p1b.h5" > /dev/null || fail "1 rank, repeat"
"$TOOL" same "$WORK/$name.p1.h5" "$WORK/$name.p1b.h5" || fail "two 1-rank runs differ"
run_np 1 "${common[@]}" --set threads=3 --out "$WORK/$name.p1t3.h5" > /dev/null || fail "1 rank, 3 threads"
"$TOOL" same "$WORK/$name.p1.h5" "$WORK/$name.p1t3.h5" || fail "3 threads per rank write another index than 1"
[ "$("$TOOL" attr "$WORK/$name.p1.h5" total_variance)" = "$("$TOOL" attr "$WORK/$name.p1t3.h5" total_variance)" ] ||
  fail "the total variance depends on the thread count"
for p in 2 3 4; do
  run_np $p "${common[@]}" --out "$WORK/$name.p$p.h5" > "$WORK/$name.p$p.log" || { cat "$WORK/$name.p$p.log"; fail "$p ranks"; }
  echo "$p ranks vs 1 rank:"
  "$TOOL" close "$WORK/$name.p$p.h5" "$WORK/$name.p1.h5" 1e-5 || fail "$p ranks differ from 1 rank"
done
run_np 3 "${common[@]}" --out "$WORK/$name.p3b.h5" > /dev/null || fail "3 ranks, repeat"
"$TOOL" same "$WORK/$name.p3.h5" "$WORK/$name.p3b.h5" || fail "two 3-rank runs differ"
run_np 3 "${common[@]}" --set io=independent --out "$WORK/$name.p3i.h5" > /dev/null || fail "3 ranks, independent io"
"$TOOL" same "$WORK/$name.p3.h5" "$WORK/$name.p3i.h5" || fail "serial-HDF5 path writes a different index"
echo "PASS: $name"
