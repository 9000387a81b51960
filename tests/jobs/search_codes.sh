#!/usr/bin/env bash
# search_codes.sh: `vecanneal search` on the codes of `compress --codes pq` (docs/search.md, "Search on
# codes"), l2 (d 32, M 8 and 16) and cosine (d 32, M 8). gen writes /train, /test and the exact /neighbors;
# then:
# - /neighbors and /distances bitwise the same on 1, 2 and 3 ranks, on codes alone and with --rerank, and
#   for another batch size and thread count;
# - recall@10 against gen's /neighbors does not fall as nprobe grows (codes alone and with --rerank), rises
#   with M (16 against 8 at nprobe = every list), and --rerank raises it;
# - the log and the metrics name the scan (codes, M bytes per row; rows, 4 d bytes) and the rerank;
# - the scan on codes reads no source row: with the source gone it gives the same results, and --rerank then
#   ends with the missing source's message;
# - bad input (--rerank below k, codes forced on an index without them, --scan codes with --exact, --rerank
#   with --scan rows or on an index without codes, --rerank without the source rows): one message from rank
#   0, the same exit code on every rank, no output. (The GPU scan on codes: tests/jobs/search_gpu.sh.)
source "$(dirname "$0")/lib.sh"
n=20000 d=32 nq=300 anchors=64

# recall_of FILE: its recall attribute.
recall_of() { "$TOOL" attr "$1" recall; }
# sweep_ok CSV: recall never falls from one nprobe to the next.
sweep_ok() {
  tail -n +2 "$1" | awk -F, '{ if ($4 + 0 < prev - 1e-12) { print "recall falls at nprobe " $3 ": " $4 " < " prev;
    bad = 1 } prev = $4 + 0 } END { exit bad }'
}
greater() { python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(0 if a > b else 1)" "$1" "$2"; }

run_np 2 gen --out "$WORK/l2.h5" --n $n --d $d --clusters 50 --spread 1.5 --test $nq --seed 4 > /dev/null || fail "gen l2"
run_np 2 gen --out "$WORK/cosine.h5" --n $n --d $d --clusters 50 --spread 1.5 --test $nq --seed 5 --distance angular \
  > /dev/null || fail "gen cosine"
compress() { # compress DATA OUT M [args...]
  local data=$1 out=$2 M=$3; shift 3
  run_np 2 compress --input "$data:/train" --anchors $anchors --codes pq --pq-m "$M" --out "$out" --set threads=1 \
    --set progress_every=0 "$@" > "$out.log" || { cat "$out.log"; fail "compress $out"; }
}
compress "$WORK/l2.h5" "$WORK/l2_8.h5" 8
compress "$WORK/l2.h5" "$WORK/l2_16.h5" 16
compress "$WORK/cosine.h5" "$WORK/cosine_8.h5" 8 --set metric=cosine
sweep=1,2,4,8,16,32,$anchors

for metric in l2 cosine; do
  data=$WORK/$metric.h5 index=$WORK/${metric}_8.h5
  common=(search --index "$index" --queries "$data:/test" --k 10)
  # The same bits on 1-3 ranks, on codes alone and re-ranked; another batch and thread count.
  for mode in "" "--rerank 40"; do
    for p in 1 2 3; do
      run_np $p "${common[@]}" --nprobe 4 $mode --out "$WORK/np$p.h5" > "$WORK/np$p.log" ||
        { cat "$WORK/np$p.log"; fail "$metric $mode: search on $p ranks"; }
      results_of "$WORK/np$p.h5" > "$WORK/np$p.bin"
      [ $p = 1 ] || cmp -s "$WORK/np1.bin" "$WORK/np$p.bin" || fail "$metric $mode: $p ranks differ from 1 rank"
    done
    run_np 2 "${common[@]}" --nprobe 4 $mode --batch 7 --threads 2 --out "$WORK/npb.h5" > /dev/null ||
      fail "$metric $mode: batch 7, 2 threads"
    results_of "$WORK/npb.h5" | cmp -s "$WORK/np1.bin" - || fail "$metric $mode: batch 7 and 2 threads differ"
    echo "$metric codes $mode: bitwise the same on 1-3 ranks, batch 7 and 2 threads"
  done
  grep -q "^scan: codes, 8 bytes per row (8 subspaces x 8 bits) instead of the $((4 * d)) of a float32 row" \
    "$WORK/np1.log" || { cat "$WORK/np1.log"; fail "$metric: the log does not name the scan"; }
  [ "$("$TOOL" attr "$WORK/np1.h5" scan)" = codes ] && [ "$("$TOOL" attr "$WORK/np1.h5" rerank)" = 40 ] ||
    fail "$metric: result attributes scan, rerank"

  # Recall over nprobe: codes alone, re-ranked, and the rows.
  for mode in codes rerank rows; do
    args=(--scan codes)
    [ $mode = rerank ] && args=(--rerank 40)
    [ $mode = rows ] && args=(--scan rows)
    run_np 2 "${common[@]}" --nprobe $sweep "${args[@]}" --ground-truth "$data:/neighbors" --out "$WORK/$mode.h5" \
      --sweep-csv "$WORK/$mode.csv" --metrics "$WORK/$mode.json" > "$WORK/$mode.log" ||
      { cat "$WORK/$mode.log"; fail "$metric: sweep $mode"; }
    sweep_ok "$WORK/$mode.csv" || { cat "$WORK/$mode.csv"; fail "$metric $mode: recall falls as nprobe grows"; }
    echo "$metric $mode: recall over nprobe $sweep: $(tail -n +2 "$WORK/$mode.csv" | cut -d, -f4 | tr '\n' ' ')"
  done
  python3 - "$WORK" "$d" <<'PY' || fail "$metric: metrics or CSV do not name the scan"
import csv, json, sys
work, d = sys.argv[1], int(sys.argv[2])
for mode, scan, bpr, rerank, precision in [("codes", "codes", 8, 0, "pq8x8"), ("rerank", "codes", 8, 40, "pq8x8+rerank40"),
                                           ("rows", "rows", 4 * d, 0, "fp32")]:
    m = json.load(open("%s/%s.json" % (work, mode)))
    assert (m["scan"], m["bytes_per_row_scanned"], m["rerank"]) == (scan, bpr, rerank), (mode, m["scan"])
    rows = list(csv.DictReader(open("%s/%s.csv" % (work, mode))))
    assert all(r["backend"] == "cpu" and r["precision"] == precision for r in rows), (mode, rows[0])
PY
  for p in 1 2 4 8; do
    r_codes=$(awk -F, -v p=$p '$3 == p { print $4 }' "$WORK/codes.csv")
    r_rerank=$(awk -F, -v p=$p '$3 == p { print $4 }' "$WORK/rerank.csv")
    greater "$r_rerank" "$r_codes" || fail "$metric nprobe $p: --rerank 40 recall $r_rerank is not above $r_codes"
  done
  [ "$(recall_of "$WORK/rows.h5")" = 1 ] || fail "$metric: the rows at every list do not find every neighbour"
  cp "$WORK/codes.csv" "$WORK/${metric}_codes.csv"
done

# More subspaces, higher recall: M 16 against M 8 at nprobe = every list (l2).
run_np 2 search --index "$WORK/l2_16.h5" --queries "$WORK/l2.h5:/test" --k 10 --nprobe $anchors \
  --ground-truth "$WORK/l2.h5:/neighbors" --out "$WORK/m16.h5" > /dev/null || fail "search M 16"
r16=$(recall_of "$WORK/m16.h5") r8=$(awk -F, -v p=$anchors '$3 == p { print $4 }' "$WORK/l2_codes.csv")
greater "$r16" "$r8" || fail "M 16 recall $r16 is not above M 8's $r8"
echo "l2 at nprobe $anchors: recall@10 $r8 with 8 codes, $r16 with 16"

# The codes alone read no source row: an index whose source is gone answers as before.
cp "$WORK/l2.h5" "$WORK/gone.h5"
compress "$WORK/gone.h5" "$WORK/gone_8.h5" 8
rm "$WORK/gone.h5"
run_np 3 search --index "$WORK/gone_8.h5" --queries "$WORK/l2.h5:/test" --k 10 --nprobe 4 --out "$WORK/gone_result.h5" \
  > "$WORK/gone.log" || { cat "$WORK/gone.log"; fail "codes search without the source"; }
run_np 1 search --index "$WORK/l2_8.h5" --queries "$WORK/l2.h5:/test" --k 10 --nprobe 4 --out "$WORK/kept.h5" \
  > /dev/null || fail "codes search l2"
results_of "$WORK/gone_result.h5" | cmp -s <(results_of "$WORK/kept.h5") - ||
  fail "the search without the source differs from the one with it"
echo "codes without the source rows: the same results"

# Bad inputs: one message, the same exit code on every rank, nothing left at --out.
P=3
expect() {
  local code=$1 pattern=$2
  shift 2
  expect_agreed_exit "$code" "$pattern" "$WORK/bad_result.h5" search --k 10 --out "$WORK/bad_result.h5" "$@"
}
run_np 2 compress --input "$WORK/l2.h5:/train" --anchors 16 --out "$WORK/plain.h5" --set max_iter=3 > /dev/null ||
  fail "compress without codes"
q=(--queries "$WORK/l2.h5:/test")
expect 2 "fewer candidates than the k" --index "$WORK/l2_8.h5" "${q[@]}" --rerank 5
expect 2 "has no codes" --index "$WORK/plain.h5" "${q[@]}" --scan codes
expect 2 "has no codes" --index "$WORK/plain.h5" "${q[@]}" --rerank 20
expect 2 "exact" --index "$WORK/l2_8.h5" "${q[@]}" --scan codes --exact
expect 2 "rerank" --index "$WORK/l2_8.h5" "${q[@]}" --scan rows --rerank 20
expect 2 "auto, codes or rows" --index "$WORK/l2_8.h5" "${q[@]}" --scan floats
expect 3 "missing" --index "$WORK/gone_8.h5" "${q[@]}" --rerank 20
[ -s "$WORK/l2_8.h5" ] && [ -s "$WORK/l2.h5" ] || fail "an input was touched"
echo "PASS: search on codes"
