#!/usr/bin/env bash
# codes.sh: compress --codes pq (docs/codes.md). l2 (d 30, M 8: subspaces of 4 and 3 columns) and cosine
# (d 24, M 6), l2 with --train-sample and with pq_train_sample (the codebooks' own sample): /pq/codes and /pq/codebooks on 2, 3 and 4 ranks bitwise those
# of 1 rank (anchors within 1e-5 as ranks.sh allows; here they agree bitwise too); 3 threads = 1 thread
# and io = independent = collective, bitwise; the codes are the rows encoded again from the index
# (tests/unit/test_pq.c --index, on 2 ranks) and the /pq error their decoded error; the error with codes
# below the anchors' alone, which for l2 is the index's distortion; info and the metrics file report them.
source "$(dirname "$0")/lib.sh"
PQ=${VECANNEAL_TEST_PQ:?set VECANNEAL_TEST_PQ (the test_pq program)}
attr() { "$TOOL" attr "$1" "$2"; }
same_codes() {
  cmp -s <("$TOOL" raw "$1" /pq/codes) <("$TOOL" raw "$2" /pq/codes) || return 1
  cmp -s <("$TOOL" raw "$1" /pq/codebooks) <("$TOOL" raw "$2" /pq/codebooks)
}
run_np 2 gen --out "$WORK/l2.h5" --n 6000 --d 30 --clusters 12 --spread 0.4 --seed 5 > /dev/null || fail "gen l2"
run_np 2 gen --out "$WORK/cos.h5" --n 5000 --d 24 --clusters 10 --seed 6 --distance angular > /dev/null || fail "gen cos"

# case NAME DATA M [compress args...]
case_() {
  local name=$1 data=$2 M=$3; shift 3
  local common=(compress --input "$data:/train" --anchors 16 --codes pq --pq-m "$M" --set threads=1
    --set progress_every=0 "$@")
  run_np 1 "${common[@]}" --out "$WORK/$name.p1.h5" --metrics "$WORK/$name.json" > "$WORK/$name.p1.log" ||
    { cat "$WORK/$name.p1.log"; fail "$name: 1 rank"; }
  grep "^codes pq: $M codes" "$WORK/$name.p1.log" || fail "$name: no codes summary in the log"
  [ "$(grep -c "^codes pq: subspace" "$WORK/$name.p1.log")" -eq "$M" ] || fail "$name: not one line per subspace"
  for p in 2 3 4; do
    run_np $p "${common[@]}" --out "$WORK/$name.p$p.h5" > "$WORK/$name.p$p.log" ||
      { cat "$WORK/$name.p$p.log"; fail "$name: $p ranks"; }
    "$TOOL" close "$WORK/$name.p$p.h5" "$WORK/$name.p1.h5" 1e-5 > /dev/null || fail "$name: $p ranks' anchors differ"
    same_codes "$WORK/$name.p$p.h5" "$WORK/$name.p1.h5" || fail "$name: $p ranks' codes or codebooks differ from 1 rank's"
  done
  run_np 1 "${common[@]}" --set threads=3 --out "$WORK/$name.t3.h5" > /dev/null || fail "$name: 3 threads"
  "$TOOL" same "$WORK/$name.p1.h5" "$WORK/$name.t3.h5" > /dev/null || fail "$name: 3 threads write another index than 1"
  run_np 3 "${common[@]}" --set io=independent --out "$WORK/$name.p3i.h5" > /dev/null || fail "$name: independent io"
  "$TOOL" same "$WORK/$name.p3.h5" "$WORK/$name.p3i.h5" > /dev/null || fail "$name: io = independent writes other codes"
  timeout 120 mpirun -n 2 --oversubscribe "$PQ" --index "$WORK/$name.p3.h5" --input "$data:/train" ||
    fail "$name: the stored codes are not the rows encoded again"
  local ix=$WORK/$name.p1.h5
  [ "$(attr "$ix" pq/m)" = "$M" ] && [ "$(attr "$ix" pq/bits)" = 8 ] && [ "$(attr "$ix" pq/ksub)" = 256 ] ||
    fail "$name: /pq attributes"
  python3 - "$ix" "$WORK/$name.json" "$M" "$(attr "$ix" pq/error)" "$(attr "$ix" pq/anchor_error)" \
    "$(attr "$ix" distortion)" "$(attr "$ix" metric)" "$(attr "$ix" d)" "$(attr "$ix" pq/bytes_per_vector)" <<'PY' ||
import json, sys
ix, metrics, M, err, aerr, dist, metric, d, bpv = sys.argv[1:]
M, err, aerr, dist, d, bpv = int(M), float(err), float(aerr), float(dist), int(d), float(bpv)
assert 0 < err < aerr, (err, aerr)
if metric == "l2":  # the anchors alone: the final pass's distortion (residuals summed in float32 rows)
    assert abs(aerr - dist) <= 1e-5 * dist, (aerr, dist)
assert bpv == M + 4, bpv
c = json.load(open(metrics))["codes"]
assert c["kind"] == "pq" and c["m"] == M and c["bits"] == 8 and c["bytes_per_vector"] == bpv
assert c["compression_ratio"] == bpv / (4.0 * d) and c["error"] == err and c["anchor_error"] == aerr
print("%s: error %.4g of the variance with %d codes, %.4g with the anchors alone" % (ix, err, M, aerr))
PY
    fail "$name: errors or metrics not as documented"
  "$BIN" info "$ix" > "$WORK/$name.info" || fail "$name: info"
  grep -q "^  codes              pq: $M subspaces x 8 bits" "$WORK/$name.info" &&
    grep -q "^  code error         " "$WORK/$name.info" || { cat "$WORK/$name.info"; fail "$name: info shows no codes"; }
  echo "PASS case $name"
}
case_ l2 "$WORK/l2.h5" 8
case_ cosine "$WORK/cos.h5" 6 --set metric=cosine
case_ sample "$WORK/l2.h5" 5 --train-sample 2500
[ "$(attr "$WORK/sample.p1.h5" pq/train_rows)" = 2500 ] || fail "sample: /pq/train_rows is not 2500"
# The codebooks on their own sample (pq_train_sample below the anchors' rows); every row still encoded.
case_ pq_sample "$WORK/l2.h5" 8 --set pq_train_sample=1500
[ "$(attr "$WORK/pq_sample.p1.h5" pq/train_rows)" = 1500 ] || fail "pq_sample: /pq/train_rows is not 1500"
same_codes "$WORK/pq_sample.p1.h5" "$WORK/l2.p1.h5" && fail "pq_sample: the codebooks ignored pq_train_sample"
# More subspaces, smaller error: the same anchors, 10 codes against 5.
run_np 2 compress --input "$WORK/l2.h5:/train" --anchors 16 --codes pq --pq-m 10 --set threads=1 --set progress_every=0 \
  --train-sample 2500 --out "$WORK/m10.h5" > /dev/null || fail "M 10"
python3 -c "import sys; a, b = map(float, sys.argv[1:]); assert a < b, (a, b)" \
  "$(attr "$WORK/m10.h5" pq/error)" "$(attr "$WORK/sample.p1.h5" pq/error)" || fail "M 10 is not more accurate than M 5"
echo "PASS: codes"
