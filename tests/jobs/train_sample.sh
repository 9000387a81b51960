#!/usr/bin/env bash
# train_sample.sh CASE: `compress --train-sample N` (the loop on N rows, the final pass on every row).
#   ranks      l2 and cosine: the index on 2, 3 and 4 ranks and with 3 threads bitwise that of 1 rank and
#              1 thread; a run stopped after a checkpoint and resumed bitwise the uninterrupted run.
#   read_once  each rank reads its block of the input once: the bytes the ranks read from the input file
#              (strace: read, pread64, readv, preadv, preadv2 on it) are its rows' bytes plus the HDF5
#              metadata, less than one and a half times the rows (a second read of the block doubles
#              them). SKIP (77) where strace is missing or cannot trace.
source "$(dirname "$0")/lib.sh"
case_=${1:?usage: train_sample.sh ranks|read_once}
data=$WORK/data.h5
run_np 2 gen --out "$data" --n 6000 --d 24 --clusters 12 --spread 0.4 --seed 5 > /dev/null || fail "gen"
args=(compress --input "$data:/train" --anchors 20 --train-sample 2500 --set progress_every=0)

case $case_ in
ranks)
  for metric in l2 cosine; do
    run_np 1 "${args[@]}" --set metric=$metric --set threads=1 --out "$WORK/$metric.p1.h5" > /dev/null ||
      fail "$metric: 1 rank"
    [ "$("$TOOL" attr "$WORK/$metric.p1.h5" train_rows)" = 2500 ] ||
      fail "$metric: the index does not record 2500 training rows"
    for run in "2 1" "3 1" "4 1" "2 3"; do
      set -- $run
      run_np $1 "${args[@]}" --set metric=$metric --set threads=$2 --out "$WORK/$metric.p$1t$2.h5" > /dev/null ||
        fail "$metric: $1 ranks, $2 threads"
      "$TOOL" same "$WORK/$metric.p1.h5" "$WORK/$metric.p$1t$2.h5" > /dev/null ||
        fail "$metric: $1 ranks x $2 threads differ from 1 rank x 1 thread"
    done
    echo "$metric: 1, 2, 3, 4 ranks and 3 threads bitwise identical"
  done
  resume=("${args[@]}" --set threads=1 --set max_iter=20 --set tol=0 --set min_changes=0)
  run_np 3 "${resume[@]}" --out "$WORK/full.h5" > /dev/null || fail "uninterrupted run"
  rm -f "$WORK/part.h5" "$WORK/part.h5.ckpt.h5"
  VECANNEAL_FAULT_STOP_AFTER=6 timeout 120 mpirun -n 3 --oversubscribe -x VECANNEAL_FAULT_STOP_AFTER "$BIN" \
    "${resume[@]}" --out "$WORK/part.h5" > "$WORK/stop.log" 2>&1
  rc=$?
  [ $rc -eq 75 ] && [ -f "$WORK/part.h5.ckpt.h5" ] && grep -q "stopped by a signal after iteration" "$WORK/stop.log" ||
    { cat "$WORK/stop.log"; fail "stop: exit $rc, expected 75 and a checkpoint from the loop"; }
  run_np 3 "${resume[@]}" --out "$WORK/part.h5" --resume "$WORK/part.h5.ckpt.h5" > "$WORK/resume.log" ||
    { cat "$WORK/resume.log"; fail "resume"; }
  "$TOOL" same "$WORK/full.h5" "$WORK/part.h5" > /dev/null || fail "resumed run differs from the uninterrupted one"
  echo "resumed after a checkpoint: bitwise the uninterrupted run"
  ;;
read_once)
  command -v strace > /dev/null && strace -o /dev/null true 2> /dev/null ||
    { echo "SKIP: strace is missing or cannot trace here"; exit 77; }
  file=$(readlink -f "$data")
  rows_bytes=$((6000 * 24 * 4))
  rm -f "$WORK"/trace.*
  # -ff: one trace per thread (no interleaved lines); -y: each descriptor with the path it reads.
  # LeakSanitizer cannot run under ptrace (an AddressSanitizer build): the traced job leaves leaks to
  # the other tests; its other checks stay on.
  timeout 120 mpirun -n 2 --oversubscribe sh -c 'ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    exec strace -ff -qq -y -e trace=read,pread64,readv,preadv,preadv2 \
    -e signal=none -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' "$WORK/trace" "$BIN" "${args[@]}" --set threads=2 \
    --out "$WORK/traced.h5" > "$WORK/traced.log" 2>&1 || { cat "$WORK/traced.log"; fail "compress under strace"; }
  read_bytes=$(cat "$WORK"/trace.* | grep -F "<$file>" | grep -o '= [0-9]*$' | awk '{s += $2} END {print s + 0}')
  echo "bytes read from the input: $read_bytes (rows: $rows_bytes)"
  [ "$read_bytes" -ge "$rows_bytes" ] || fail "the trace saw $read_bytes bytes read, fewer than the rows' $rows_bytes"
  [ "$read_bytes" -lt $((rows_bytes * 3 / 2)) ] || fail "the input was read more than once ($read_bytes bytes)"
  echo "the input was read once"
  ;;
*) fail "unknown case $case_" ;;
esac
echo "PASS: train_sample $case_"
