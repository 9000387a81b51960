#!/usr/bin/env bash
# search_gpu.sh (label gpu): `search --backend cuda` against `--backend cpu` on the same index and
# queries, l2 and cosine: /neighbors and /distances must be bitwise the same (the GPU engine computes each
# distance with the CPU's recipe and keeps the same k first entries: docs/search.md), on 1 and 2 ranks,
# through the lists (one nprobe, and the last of a sweep) and exact, k 1, 10 and 100; k 300 is above the
# GPU engine's limit and runs on the CPU with a note. The log, the metrics and the sweep CSV name the
# engine. Without a visible device, --backend cuda is a usage error (exit 2) and auto stays on the CPU.
# --precision tf32, fp16 and bf16 (tensor cores): the same answer on 1 and 2 ranks, recall@10 against the
# fp32 answer at least 0.95, the engine named with its precision. The scan on codes (compress --codes pq,
# M 4): --backend cuda = --backend cpu bit for bit on 1 and 2 ranks, alone and with --rerank 40.
# SKIP (77) without a CUDA build or device: never a silent pass.
source "$(dirname "$0")/lib.sh"
export NCCL_NVLS_ENABLE=0
"$BIN" --version | grep -q "cuda yes" || { echo "SKIP: built without CUDA"; exit 77; }
ngpu=$(visible_gpus)
[ "${ngpu:-0}" -ge 1 ] || { echo "SKIP: no CUDA device"; exit 77; }
n=30000 d=20 nq=300 anchors=48


for metric in l2 cosine; do
  data=$WORK/$metric.h5 index=$WORK/${metric}_index.h5
  distance=euclidean
  [ $metric = cosine ] && distance=angular
  run_np 2 gen --out "$data" --n $n --d $d --clusters 40 --test $nq --distance $distance > /dev/null || fail "gen $metric"
  run_np 2 compress --input "$data:/train" --anchors $anchors --out "$index" --backend cpu --set max_iter=8 \
    --set maintenance_interval=0 > /dev/null || fail "compress $metric"
  for k in 1 10 100 300; do
    for mode in "--nprobe 4" "--nprobe 1,2,16" "--exact"; do
      [ $k = 300 ] && [ "$mode" != "--nprobe 4" ] && continue
      args=(search --index "$index" --queries "$data:/test" --k $k $mode)
      run_np 1 "${args[@]}" --backend cpu --out "$WORK/cpu.h5" > "$WORK/cpu.log" || { cat "$WORK/cpu.log"; fail "cpu $metric k $k $mode"; }
      results_of "$WORK/cpu.h5" > "$WORK/cpu.bin"
      for p in 1 2; do
        run_np $p "${args[@]}" --backend cuda --out "$WORK/gpu$p.h5" --sweep-csv "$WORK/gpu$p.csv" \
          --metrics "$WORK/gpu$p.json" > "$WORK/gpu$p.log" || { cat "$WORK/gpu$p.log"; fail "cuda $metric k $k $mode, $p ranks"; }
        results_of "$WORK/gpu$p.h5" | cmp -s "$WORK/cpu.bin" - ||
          fail "$metric k $k $mode: --backend cuda on $p rank(s) differs from --backend cpu"
        if [ $k = 300 ]; then
          grep -q "note: k = 300 is above the GPU search engine's limit" "$WORK/gpu$p.log" || { cat "$WORK/gpu$p.log"; fail "no note on k 300"; }
          grep -q '"backend": "cpu"' "$WORK/gpu$p.json" || fail "k 300: the metrics do not name the CPU engine"
        else
          grep -q "backend cuda (fp32)" "$WORK/gpu$p.log" || { cat "$WORK/gpu$p.log"; fail "the GPU engine was not used"; }
          grep -q '"backend": "cuda"' "$WORK/gpu$p.json" && grep -q '"precision": "fp32"' "$WORK/gpu$p.json" ||
            fail "the metrics do not name the GPU engine"
          tail -n +2 "$WORK/gpu$p.csv" | grep -qv "^cuda,fp32," && fail "the sweep CSV names another engine"
        fi
      done
      echo "$metric k $k $mode: --backend cuda on 1 and 2 ranks = --backend cpu, bit for bit"
    done
  done
  # The tensor-core precisions: rank-count independent, close to fp32.
  args=(search --index "$index" --queries "$data:/test" --k 10 --nprobe 4)
  run_np 1 "${args[@]}" --backend cpu --out "$WORK/ref.h5" > /dev/null || fail "cpu reference"
  for prec in tf32 fp16 bf16; do
    for p in 1 2; do
      run_np $p "${args[@]}" --backend cuda --precision $prec --ground-truth "$WORK/ref.h5:/neighbors" \
        --out "$WORK/prec$p.h5" --metrics "$WORK/prec$p.json" > "$WORK/prec$p.log" ||
        { cat "$WORK/prec$p.log"; fail "$metric --precision $prec on $p rank(s)"; }
      grep -q "backend cuda ($prec)" "$WORK/prec$p.log" || { cat "$WORK/prec$p.log"; fail "engine not named $prec"; }
      grep -q "\"precision\": \"$prec\"" "$WORK/prec$p.json" || fail "the metrics do not name $prec"
    done
    results_of "$WORK/prec2.h5" | cmp -s <(results_of "$WORK/prec1.h5") - ||
      fail "$metric --precision $prec: 2 ranks differ from 1"
    recall=$(grep -o "recall@10 [0-9.]*" "$WORK/prec1.log" | head -1 | cut -d' ' -f2)
    awk -v r="$recall" 'BEGIN { exit !(r >= 0.95) }' || fail "$metric --precision $prec: recall@10 $recall against fp32"
    echo "$metric --precision $prec: 1 and 2 ranks the same, recall@10 $recall against the fp32 answer"
  done
  # The scan on codes: the GPU engine's answer is the CPU's, bit for bit, alone and with --rerank.
  cindex=$WORK/${metric}_codes.h5
  run_np 2 compress --input "$data:/train" --anchors $anchors --out "$cindex" --backend cpu --set max_iter=8 \
    --set maintenance_interval=0 --codes pq --pq-m 4 > /dev/null || fail "compress --codes pq $metric"
  for extra in "" "--rerank 40"; do
    args=(search --index "$cindex" --queries "$data:/test" --k 10 --nprobe 1,4,48 --scan codes $extra)
    run_np 1 "${args[@]}" --backend cpu --out "$WORK/ccpu.h5" > "$WORK/ccpu.log" ||
      { cat "$WORK/ccpu.log"; fail "codes cpu"; }
    for p in 1 2; do
      run_np $p "${args[@]}" --backend cuda --out "$WORK/cgpu$p.h5" --metrics "$WORK/cgpu$p.json" \
        > "$WORK/cgpu$p.log" || { cat "$WORK/cgpu$p.log"; fail "codes cuda $metric $extra, $p ranks"; }
      results_of "$WORK/cgpu$p.h5" | cmp -s <(results_of "$WORK/ccpu.h5") - ||
        fail "$metric codes $extra: --backend cuda on $p rank(s) differs from --backend cpu"
      grep -q "backend cuda (pq4x8" "$WORK/cgpu$p.log" ||
        { cat "$WORK/cgpu$p.log"; fail "codes: the GPU engine not named"; }
      grep -q '"backend": "cuda"' "$WORK/cgpu$p.json" || fail "codes: the metrics do not name the GPU engine"
    done
    echo "$metric codes $extra: --backend cuda on 1 and 2 ranks = --backend cpu, bit for bit"
  done
  # auto takes the GPU where every rank sees one.
  run_np 2 search --index "$index" --queries "$data:/test" --k 10 --nprobe 4 --out "$WORK/auto.h5" > "$WORK/auto.log" ||
    fail "auto"
  grep -q "backend cuda (fp32)" "$WORK/auto.log" || { cat "$WORK/auto.log"; fail "auto did not take the GPU"; }
done

# No visible device: cuda is a usage error on every rank (one message), auto stays on the CPU.
data=$WORK/l2.h5 index=$WORK/l2_index.h5
rm -f "$WORK/none.h5"*
CUDA_VISIBLE_DEVICES= VECANNEAL_TRACE_EXIT=1 timeout 120 mpirun -n 2 --oversubscribe -x CUDA_VISIBLE_DEVICES \
  -x VECANNEAL_TRACE_EXIT "$BIN" search --index "$index" --queries "$data:/test" --k 10 --backend cuda \
  --out "$WORK/none.h5" > "$WORK/none.log" 2>&1
rc=$?
[ $rc = 2 ] || { cat "$WORK/none.log"; fail "--backend cuda without a device: exit $rc, not 2"; }
[ "$(grep -c "vecanneal: error:.*sees no CUDA device" "$WORK/none.log")" = 1 ] || { cat "$WORK/none.log"; fail "one message"; }
[ "$(grep -c "exits with code 2" "$WORK/none.log")" = 2 ] || { cat "$WORK/none.log"; fail "every rank exits 2"; }
ls "$WORK/none.h5"* > /dev/null 2>&1 && fail "output left behind"
CUDA_VISIBLE_DEVICES= timeout 120 mpirun -n 2 --oversubscribe -x CUDA_VISIBLE_DEVICES "$BIN" search --index "$index" \
  --queries "$data:/test" --k 10 --nprobe 4 --out "$WORK/none.h5" > "$WORK/none.log" 2>&1 || { cat "$WORK/none.log"; fail "auto without a device"; }
grep -q "backend cpu (fp32)" "$WORK/none.log" || { cat "$WORK/none.log"; fail "auto without a device did not take the CPU"; }
results_of "$WORK/none.h5" > "$WORK/none.bin"
run_np 1 search --index "$index" --queries "$data:/test" --k 10 --nprobe 4 --backend cuda --out "$WORK/gpu.h5" > /dev/null ||
  fail "cuda"
results_of "$WORK/gpu.h5" | cmp -s "$WORK/none.bin" - || fail "auto on the CPU differs from cuda"
echo "no device: --backend cuda exits 2 on every rank, auto takes the CPU engine (the same bits)"
echo "PASS"
