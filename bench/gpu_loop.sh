#!/usr/bin/env bash
# gpu_loop.sh: on one GPU, from the repository root, in one go: build this tree (or the source tree
# AFTER_SRC, e.g. a `git archive` of a commit, to leave others' unfinished edits out) and, in parallel,
# the source tree BEFORE_SRC (default: `git archive HEAD~1`) for a before/after comparison; the
# gpu-labelled tests (the embedding stage's excluded: not this script's subject); then
#  1. the per-iteration cost of the GPU loop before and after, at 1M x 128 x 1024 (fp16, tf32; 50
#     Lloyd-step iterations, eta = 1 as bench/gpu_peers.py; two runs each): ms/iteration and phases;
#  2. out-of-core at 8M x 128 x 1024 (fp16, tf32; 10 iterations): resident vs gpu_stream = on
#     (256 MB chunks), end to end, with the rows' streaming rate;
#  3. bench/gpu_stream.c at the same shape: streamed vs resident passes against the measured pinned
#     host-to-device copy rate, and their agreement.
# Results under $OUT (results_loop.csv, results_stream_e2e.csv, results_stream_bench.csv,
# gpu_stream_bench.txt, ctest_gpu.log) and every log in $OUT/logs.tgz; a summary is printed last.
# Checks (bench/verify.py; the last line says passed or FAILED, exit 1 on a failure): every run of both
# builds finishes; the streamed and resident indexes agree (identical assignments, anchors 1e-5
# relative, as the gpu_backend test); gpu_stream_bench exits 0; with REQUIRE_SAME=1 (a change that
# moves no arithmetic) the two builds' indexes are bitwise identical (without it that is printed only).
# Environment: AFTER_SRC, BEFORE_SRC, SKIP_TESTS=1, N1 (1000000), N8 (8000000), REQUIRE_SAME.
set -u
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/out-gpu}; W=$OUT/work; mkdir -p "$W"
ROOT=$PWD
export VERIFY_LOG=$OUT/verification.log; : > "$VERIFY_LOG"
V="python3 $ROOT/bench/verify.py"
N1=${N1:-1000000}; N8=${N8:-8000000}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$W/env.txt"
cfg() { cmake -S "$1" -B "$2" -DVECANNEAL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DVECANNEAL_CUDA_ARCHITECTURES=90 > "$3.cmake.log" 2>&1; }
BSRC=${BEFORE_SRC:-}
if [ -z "$BSRC" ]; then BSRC=/tmp/before-src; rm -rf $BSRC && mkdir -p $BSRC && git archive HEAD~1 | tar -x -C $BSRC; fi
( cfg $BSRC $BSRC/build-gpu "$W/before" && make -C $BSRC/build-gpu -j8 vecanneal > "$W/before.build.log" 2>&1 ) &
pb=$!
SRC=${AFTER_SRC:-.}
BG=$SRC/build-gpu
cfg $SRC $BG "$W/after" && make -C $BG -j10 vecanneal test_cuda_kernels test_nccl gpu_stream_bench > "$W/after.build.log" 2>&1 \
  || { grep -E "error" "$W/after.build.log" | head -20; tail -5 "$W/after.build.log"; $V fail "the build of $SRC failed"; exec $V verdict; }
wait $pb || { tail -5 "$W/before.build.log"; $V fail "the build of $BSRC failed"; }
echo "builds: $(( $(date +%s) - t0 )) s (after: $SRC, before: $BSRC)"
AFTER=$(cd $BG && pwd)/vecanneal BEFORE=$(cd $BSRC/build-gpu && pwd)/vecanneal
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  (cd $BG && ctest -L gpu -E embed --output-on-failure) > "$W/ctest_gpu.log" 2>&1
  grep -E "Test +#|tests passed|tests failed" "$W/ctest_gpu.log"
  cp $BG/Testing/Temporary/LastTest.log "$W/ctest_last.log" 2>/dev/null
  echo "tests: $(( $(date +%s) - t0 )) s"
fi
# Phases per iteration from a metrics file: the phase totals include the final pass (one more assign
# and statistics pass) and the init, so assign/reduce over 50 iterations read about 2% high.
phases() {
  python3 - "$@" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); it = m["iterations"]; ph = m["phases_seconds"]
per = lambda p: 1e3 * ph[p]["max"] / it
s = m.get("gpu_stream", {})
cop = s.get("copied_bytes_per_rank", 0) / it
rate = cop / (1e-3 * (per("assign") + per("reduce"))) / 1e9 if cop else 0
print(f"{m['ms_per_iteration']:.3f},{per('assign'):.3f},{per('reduce'):.3f},{per('allreduce'):.3f},{per('update'):.3f},{per('maintenance'):.3f},{m['final_energy']:.8g},{cop / 1e9:.3f},{rate:.2f}")
PY
}
# 1. loop overhead, before vs after
mpirun -n 16 "$AFTER" gen --out /tmp/g1.h5 --n "$N1" --d 128 --clusters 2000 --spread 0.5 > /dev/null
lloyd=(--set lr=1 --set T0=1e9 --set cooling_rate=0 --set init=random --set max_iter=50 --set tol=0 --set min_changes=0 --set progress_every=0)
echo "binary,precision,run,ms_per_iter,assign_ms,reduce_ms,allreduce_ms,update_ms,maintenance_ms,final_energy,copied_GB_per_iter,stream_GB_per_s" > "$W/results_loop.csv"
for prec in fp16 tf32; do
  for run in 1 2; do
    for which in before after; do
      bin=$BEFORE; [ $which = after ] && bin=$AFTER
      mpirun -n 1 "$bin" compress --input /tmp/g1.h5:/train --anchors 1024 --out /tmp/l_$which.h5 --backend cuda --set precision=$prec "${lloyd[@]}" \
        --metrics "$W/loop_${which}_${prec}_$run.json" > "$W/loop_${which}_${prec}_$run.log" 2>&1 \
        || { tail -3 "$W/loop_${which}_${prec}_$run.log"; $V fail "loop, $which, $prec, run $run: the run failed"; continue; }
      echo "$which,$prec,$run,$(phases "$W/loop_${which}_${prec}_$run.json")" >> "$W/results_loop.csv"
    done
    # the two builds' indexes: identical for a change that moves no arithmetic (a check with REQUIRE_SAME=1)
    if [ "${REQUIRE_SAME:-0}" = 1 ]; then
      $V same /tmp/l_before.h5 /tmp/l_after.h5 --label "$prec run $run, before vs after" >> "$W/before_after.txt"
    else
      VERIFY_LOG= $V same /tmp/l_before.h5 /tmp/l_after.h5 --label "$prec run $run, before vs after (not required)" >> "$W/before_after.txt"
    fi
  done
done
echo "loop: $(( $(date +%s) - t0 )) s"
# 2. out-of-core end to end
mpirun -n 16 "$AFTER" gen --out /tmp/g8.h5 --n "$N8" --d 128 --clusters 2000 --spread 0.5 > /dev/null
echo "precision,mode,ms_per_iter,assign_ms,reduce_ms,allreduce_ms,update_ms,maintenance_ms,final_energy,copied_GB_per_iter,stream_GB_per_s" > "$W/results_stream_e2e.csv"
for prec in fp16 tf32; do
  for mode in off on; do
    mpirun -n 1 "$AFTER" compress --input /tmp/g8.h5:/train --anchors 1024 --out "/tmp/s8_${prec}_$mode.h5" --backend cuda --set precision=$prec \
      "${lloyd[@]}" --set max_iter=10 --set progress_every=5 --set gpu_stream=$mode --metrics "$W/s8_${prec}_$mode.json" > "$W/s8_${prec}_$mode.log" 2>&1 \
      || { tail -3 "$W/s8_${prec}_$mode.log"; $V fail "out-of-core, $prec, gpu_stream=$mode: the run failed"; continue; }
    echo "$prec,$([ $mode = on ] && echo streamed || echo resident),$(phases "$W/s8_${prec}_$mode.json")" >> "$W/results_stream_e2e.csv"
  done
  $V close "/tmp/s8_${prec}_on.h5" "/tmp/s8_${prec}_off.h5" 1e-5 0 --label "out-of-core, $prec, streamed vs resident" > "$W/s8_${prec}_close.txt"
done
rm -f /tmp/s8_*.h5
echo "stream e2e: $(( $(date +%s) - t0 )) s"
# 3. kernel-level streaming vs copy rate
$BG/gpu_stream_bench "$N8" 128 1024 256 5 > "$W/gpu_stream_bench.txt" 2>&1
rc=$?; echo "gpu_stream_bench rc $rc" >> "$W/gpu_stream_bench.txt"; [ $rc -eq 0 ] || $V fail "gpu_stream_bench exited $rc"
grep "^csv:" "$W/gpu_stream_bench.txt" | cut -c5- > "$W/results_stream_bench.csv"
echo "== summary ($(( $(date +%s) - t0 )) s)"
grep -E "tests passed|tests failed" "$W/ctest_gpu.log" 2>/dev/null
grep -hE "streamed vs resident|copy of one chunk|agree|FAILED" "$W/gpu_stream_bench.txt"
grep -E "pass" "$W/gpu_stream_bench.txt" | cut -c1-170
for f in results_loop results_stream_e2e; do column -s, -t "$W/$f.csv" 2> /dev/null || cat "$W/$f.csv"; done
cat "$W"/s8_*_close.txt "$W/before_after.txt"
grep -h "stream GB/s" -A3 "$W/s8_fp16_on.log" | head -4
for f in results_loop.csv results_stream_e2e.csv results_stream_bench.csv gpu_stream_bench.txt ctest_gpu.log; do cp "$W/$f" "$OUT/" 2> /dev/null; done
tar -czf "$OUT/logs.tgz" -C "$W" . && rm -rf "$W"
$V verdict
