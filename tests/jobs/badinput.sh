#!/usr/bin/env bash
# badinput.sh: every bad input gets one clear message from rank 0, the same non-zero exit code on
# every rank (VECANNEAL_TRACE_EXIT makes each rank report its exit), no hang, and no index left behind.
source "$(dirname "$0")/lib.sh"
P=3
good=$WORK/good.h5
run_np 1 gen --out "$good" --n 500 --d 8 --clusters 4 > /dev/null || fail "gen"
for kind in 1d int32 nan inf empty nodata huge damaged; do "$TOOL" make-bad "$WORK/$kind.h5" $kind || fail "make-bad $kind"; done
run_np 1 gen --out "$WORK/big.h5" --n 20000 --d 32 > /dev/null || fail "gen big"
cp "$WORK/big.h5" "$WORK/trunc.h5" && truncate -s $(( $(stat -c %s "$WORK/big.h5") / 2 )) "$WORK/trunc.h5"
printf 'lr = banana\n' > "$WORK/nonsense.ini"
printf 'lrr = 0.1\n' > "$WORK/unknown.ini"
printf 'this is not a config\n' > "$WORK/garbage.ini"

# expect CODE PATTERN ARGS...: run compress on P ranks, check exit code, one message, every rank's exit.
expect() {
  local code=$1 pattern=$2
  shift 2
  expect_agreed_exit "$code" "$pattern" "$WORK/case.out" compress --out "$WORK/case.out" --set threads=1 "$@"
}
expect 3 "no such file"      --input "$WORK/missing.h5:/train" --anchors 4
expect 3 "no dataset"        --input "$good:/nothere" --anchors 4
expect 3 "dimension"         --input "$WORK/1d.h5:/train" --anchors 4
expect 3 "unsupported"       --input "$WORK/int32.h5:/train" --anchors 4
expect 3 "NaN or Inf"        --input "$WORK/nan.h5:/train" --anchors 4
expect 3 "NaN or Inf"        --input "$WORK/inf.h5:/train" --anchors 4
expect 3 "empty"             --input "$WORK/empty.h5:/train" --anchors 4
expect 3 "no data"           --input "$WORK/nodata.h5:/train" --anchors 4
expect 3 "truncated"         --input "$WORK/trunc.h5:/train" --anchors 4
expect 3 "damaged"           --input "$WORK/damaged.h5:/train" --anchors 4
expect 5 "GiB are available" --input "$WORK/huge.h5:/train" --anchors 4
expect 2 "more than"         --input "$good:/train" --anchors 501
expect 2 "outside"           --input "$good:/train" --anchors 0
expect 2 "banana"            --input "$good:/train" --anchors 4 --config "$WORK/nonsense.ini"
expect 2 "did you mean 'lr'" --input "$good:/train" --anchors 4 --config "$WORK/unknown.ini"
expect 2 "expected 'key"     --input "$good:/train" --anchors 4 --config "$WORK/garbage.ini"
expect 2 "not one of"        --input "$good:/train" --anchors 4 --set robust=median
expect 2 "cannot open config" --input "$good:/train" --anchors 4 --config "$WORK/none.ini"
expect 2 "unknown argument"  --input "$good:/train" --anchors 4 --bogus
# compress --codes pq (docs/codes.md): pq_m outside 1..d (good.h5 has d 8), bits other than 8, another kind of
# codes, fewer training rows than a codebook's 256 centroids
expect 2 "outside"           --input "$good:/train" --anchors 4 --codes pq --pq-m 0
expect 2 "more than the 8 columns" --input "$good:/train" --anchors 4 --codes pq --pq-m 9
expect 2 "4 is not supported yet" --input "$good:/train" --anchors 4 --codes pq --pq-m 4 --pq-bits 4
expect 2 "not one of none|pq" --input "$good:/train" --anchors 4 --codes opq
expect 2 "256 centroids"     --input "$good:/train" --anchors 4 --codes pq --pq-m 4 --train-sample 200
expect 2 "pq_train_sample"   --input "$good:/train" --anchors 4 --codes pq --pq-m 4 --set pq_train_sample=100
# backend cuda that cannot run: no CUDA in the build, no device, or (on a GPU machine) the ranks all on
# device 0, which NCCL refuses
expect 2 "CUDA\|GPU"         --input "$good:/train" --anchors 4 --backend cuda --set device=0
# Unwritable output: a directory that does not exist.
VECANNEAL_TRACE_EXIT=1 timeout 60 mpirun -n $P --oversubscribe -x VECANNEAL_TRACE_EXIT "$BIN" compress --input "$good:/train" --anchors 4 --out /nonexistent/dir/index.h5 > /dev/null 2> "$WORK/case.stderr"
rc=$?
[ $rc -eq 4 ] && [ "$(grep -c 'vecanneal: error:' "$WORK/case.stderr")" -eq 1 ] && [ "$(grep -c 'exits with code 4' "$WORK/case.stderr")" -eq $P ] || { cat "$WORK/case.stderr"; fail "unwritable output: rc $rc"; }
echo "unwritable output                        rc 4   $(grep 'vecanneal: error:' "$WORK/case.stderr")"
echo "PASS: badinput"
