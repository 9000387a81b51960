#!/usr/bin/env bash
# search.sh: `vecanneal search` end to end, l2 and cosine. gen writes /train, /test and the exact
# /neighbors; compress makes an index; then:
# - search --exact finds gen's neighbours: recall@10 = 1 (and, with h5py, the same ids in the same order
#   and the same distance bits as gen's first 10 columns);
# - a sweep over nprobe = 1, 2, 4, ... up to the anchors: recall never falls as nprobe grows and is 1 at
#   nprobe = anchors; the CSV has one line per nprobe;
# - /neighbors and /distances are bitwise the same on 1, 2, 3 and 4 ranks, and for another batch size and
#   thread count (inverted lists and exact);
# - every bad input ends every rank with one message from rank 0 and the same exit code, no output left
#   (--backend cuda in a build without CUDA among them).
source "$(dirname "$0")/lib.sh"
n=20000 d=16 nq=200 anchors=32

have_h5py=0
python3 -c 'import h5py, numpy' 2> /dev/null && have_h5py=1

for metric in l2 cosine; do
  data=$WORK/$metric.h5 index=$WORK/${metric}_index.h5
  distance=euclidean
  [ $metric = cosine ] && distance=angular
  run_np 2 gen --out "$data" --n $n --d $d --clusters 40 --test $nq --distance $distance > "$WORK/gen.out" ||
    fail "gen $metric"
  grep -q "/neighbors (exact top 100" "$WORK/gen.out" || { cat "$WORK/gen.out"; fail "gen wrote no /neighbors"; }
  run_np 2 compress --input "$data:/train" --anchors $anchors --out "$index" --set max_iter=8 --set threads=1 \
    --set maintenance_interval=0 > /dev/null || fail "compress $metric"
  [ "$("$TOOL" attr "$index" metric)" = $metric ] || fail "index metric is not $metric"
  k_index=$("$TOOL" attr "$index" k_final)

  # Exact search against gen's own exact neighbours.
  run_np 1 search --index "$index" --queries "$data:/test" --k 10 --exact --out "$WORK/exact1.h5" \
    --ground-truth "$data:/neighbors" > "$WORK/search.out" || { cat "$WORK/search.out"; fail "search --exact $metric"; }
  [ "$("$TOOL" attr "$WORK/exact1.h5" recall)" = 1 ] || fail "$metric: exact recall@10 is $("$TOOL" attr "$WORK/exact1.h5" recall), not 1"
  if [ $have_h5py = 1 ]; then
    python3 - "$WORK/exact1.h5" "$data" << 'EOF' || fail "$metric: exact results differ from gen's /neighbors"
import h5py, numpy as np, sys
r, g = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
assert (r["neighbors"][:] == g["neighbors"][:, :10]).all(), "ids"
assert (r["distances"][:].view(np.uint32) == g["distances"][:, :10].view(np.uint32)).all(), "distance bits"
EOF
  fi
  echo "$metric: exact search = gen's /neighbors (recall@10 1)"

  # The sweep: monotone recall, 1 at nprobe = anchors.
  sweep=1
  for ((p = 2; p < k_index; p *= 2)); do sweep="$sweep,$p"; done
  sweep="$sweep,$k_index"
  run_np 1 search --index "$index" --queries "$data:/test" --k 10 --nprobe "$sweep" --out "$WORK/sweep.h5" \
    --ground-truth "$data:/neighbors" --sweep-csv "$WORK/sweep.csv" --metrics "$WORK/sweep.json" > "$WORK/search.out" ||
    { cat "$WORK/search.out"; fail "search sweep $metric"; }
  head -1 "$WORK/sweep.csv" | grep -qx "backend,precision,nprobe,recall,qps" || fail "CSV header: $(head -1 "$WORK/sweep.csv")"
  [ "$(tail -n +2 "$WORK/sweep.csv" | wc -l)" -eq "$(echo "$sweep" | tr ',' '\n' | wc -l)" ] || fail "CSV lines"
  tail -n +2 "$WORK/sweep.csv" | awk -F, -v last="$k_index" '
    { if ($4 + 0 < prev - 1e-12) { print "recall falls at nprobe " $3 ": " $4 " < " prev; bad = 1 } prev = $4 + 0 }
    END { if ($3 != last || $4 + 0 != 1) { print "recall at nprobe " $3 " is " $4 ", not 1"; bad = 1 } exit bad }' ||
    { cat "$WORK/sweep.csv"; fail "$metric: sweep"; }
  [ "$("$TOOL" attr "$WORK/sweep.h5" nprobe)" = "$k_index" ] || fail "the output holds another nprobe than the last"
  grep -q '"recall": 1' "$WORK/sweep.json" || fail "metrics: no recall"
  echo "$metric: recall over nprobe $sweep: $(tail -n +2 "$WORK/sweep.csv" | cut -d, -f4 | tr '\n' ' ')"
  if python3 -c 'import matplotlib' 2> /dev/null; then
    python3 "$VECANNEAL_SOURCE/scripts/plot-recall-qps.py" "$WORK/sweep.csv" "$WORK/sweep.png" || fail "plot"
    [ -s "$WORK/sweep.png" ] || fail "no PNG"
  fi

  # The same bits on 1-4 ranks, through the lists (nprobe 4) and exact.
  for mode in "--nprobe 4" "--exact"; do
    for p in 1 2 3 4; do
      run_np $p search --index "$index" --queries "$data:/test" --k 10 $mode --out "$WORK/np$p.h5" > /dev/null ||
        fail "search $mode on $p ranks"
      results_of "$WORK/np$p.h5" > "$WORK/np$p.bin"
      [ $p = 1 ] || cmp -s "$WORK/np1.bin" "$WORK/np$p.bin" || fail "$metric $mode: $p ranks differ from 1 rank"
    done
    run_np 2 search --index "$index" --queries "$data:/test" --k 10 $mode --out "$WORK/npb.h5" --batch 7 \
      --threads 2 > /dev/null || fail "search $mode, batch 7, 2 threads"
    results_of "$WORK/npb.h5" | cmp -s "$WORK/np1.bin" - || fail "$metric $mode: batch 7 and 2 threads differ"
    echo "$metric $mode: bitwise the same on 1-4 ranks, batch 7 and 2 threads"
  done
done

# Bad inputs: one message, the same exit code on every rank, nothing left at --out.
data=$WORK/l2.h5 index=$WORK/l2_index.h5
P=3
expect() {
  local code=$1 pattern=$2
  shift 2
  expect_agreed_exit "$code" "$pattern" "$WORK/bad_result.h5" search --k 10 --out "$WORK/bad_result.h5" "$@"
}
run_np 1 gen --out "$WORK/d8.h5" --n 100 --d 8 --test 10 --no-neighbors > /dev/null || fail "gen d8"
cp "$data" "$WORK/nanq.h5" && "$TOOL" poke "$WORK/nanq.h5" /test 17 nan || fail "poke NaN"
# An index whose source changed after compress (same size, one value), and one whose source is gone.
cp "$data" "$WORK/changed.h5" && cp "$data" "$WORK/gone.h5"
run_np 1 compress --input "$WORK/changed.h5:/train" --anchors 8 --out "$WORK/changed_index.h5" --set max_iter=2 > /dev/null &&
  run_np 1 compress --input "$WORK/gone.h5:/train" --anchors 8 --out "$WORK/gone_index.h5" --set max_iter=2 > /dev/null ||
  fail "compress the indexes of the changed and missing sources"
"$TOOL" poke "$WORK/changed.h5" /train 12345 7.5 || fail "poke"
rm "$WORK/gone.h5"
run_np 1 gen --out "$WORK/other.h5" --n $n --d $d --seed 9 --no-neighbors > /dev/null || fail "gen other"
expect 3 "dimensions" --index "$index" --queries "$WORK/d8.h5:/test"
expect 3 "NaN" --index "$index" --queries "$WORK/nanq.h5:/test"
expect 2 "more than" --index "$index" --queries "$data:/test" --k $((n + 1))
expect 3 "changed.h5" --index "$WORK/changed_index.h5" --queries "$data:/test"
expect 3 "not those" --index "$index" --queries "$data:/test" --data "$WORK/other.h5:/train"
expect 3 "missing" --index "$WORK/gone_index.h5" --queries "$data:/test"
expect 3 "no such file" --index "$index" --queries "$data:/test" --data "$WORK/nothere.h5:/train"
expect 3 "cannot open index" --index "$WORK/nothere_index.h5" --queries "$data:/test"
expect 2 "$(basename "$data")" --index "$index" --queries "$data:/test" --out "$data"
expect 2 "$(basename "$index")" --index "$index" --queries "$data:/test" --out "$index"
expect 2 "auto, cpu or cuda" --index "$index" --queries "$data:/test" --backend gpu
expect 2 "fp32, tf32, fp16 or bf16" --index "$index" --queries "$data:/test" --precision fp8
# --backend cuda in a build without CUDA (tests/jobs/search_gpu.sh covers a CUDA build without a device)
"$BIN" --version | grep -q "cuda no" && expect 2 "no CUDA backend" --index "$index" --queries "$data:/test" --backend cuda
[ -s "$index" ] && [ -s "$data" ] || fail "an input was touched by a refused output"
# nprobe beyond the anchors: a note, not an error; the lists are all probed (recall 1).
run_np $P search --index "$index" --queries "$data:/test" --k 10 --nprobe 100000 --out "$WORK/clamped.h5" \
  --ground-truth "$data" > "$WORK/search.out" || fail "nprobe beyond the anchors failed"
grep -q "note: nprobe 100000 is more than" "$WORK/search.out" || fail "no note on the clamped nprobe"
[ "$("$TOOL" attr "$WORK/clamped.h5" recall)" = 1 ] || fail "clamped nprobe: recall is not 1"
echo "nprobe 100000: clamped with a note, recall 1"
# A tensor-core precision on the CPU engine: a note, and the fp32 answer bit for bit.
run_np 1 search --index "$index" --queries "$data:/test" --k 10 --nprobe 4 --backend cpu --out "$WORK/fp32.h5" \
  > /dev/null || fail "search fp32"
run_np 1 search --index "$index" --queries "$data:/test" --k 10 --nprobe 4 --backend cpu --precision bf16 \
  --out "$WORK/bf16.h5" > "$WORK/search.out" || fail "search --precision bf16 on the CPU"
grep -q "note: --precision bf16 is the GPU engine's" "$WORK/search.out" || fail "no note on --precision bf16"
results_of "$WORK/bf16.h5" | cmp -s <(results_of "$WORK/fp32.h5") - || fail "--precision bf16 on the CPU differs"
echo "--precision bf16 on the CPU engine: a note, the fp32 answer"
echo "PASS"
