#!/bin/bash
# run_device.sh: on a GPU machine, from the repository root: configure a build with the CUDA backend,
# build the CUDA tests and the kernel benchmark, run the CUDA tests and the benchmark.
# Logs go to $OUT (or ./out-device), at most 7 files: build.log, ctest.log, detail.txt, bench.txt,
# bench_before.txt, ncu.txt, summary.txt.
#   [BEFORE_REV=rev] [VA_NCU=1|fp16] tests/cuda/run_device.sh [bench args: n d k reps]
# BEFORE_REV: also build that revision's benchmark (a git worktree, built alongside this tree's) and run
# it after this tree's on the same machine, then print both automatic fused passes side by side.
# VA_NCU: Nsight Compute of the automatic fused kernels at the bench's shape (1: tf32, fp16 and bf16; fp16:
# fp16 only), last, and only while the call has time left (NCU_BEFORE_S, default 300 s since the start).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
OUT=${OUT:-$PWD/out-device}
mkdir -p "$OUT"
B=${BUILD_DIR:-build-cuda}
t0=$(date +%s)
build() { # dir targets... (test_nccl too where the configuration has it: NCCL found)
  local dir=$1; shift
  cmake -S . -B "$dir" -DVECANNEAL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 &&
    make -C "$dir" -j"$(nproc)" "$@" $(grep -q test_nccl "$dir/Makefile" && echo test_nccl)
}
{
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,driver_version --format=csv
  nvcc --version | tail -1
} 2>&1 | tee "$OUT/build.log"
before_pid=
if [ -n "${BEFORE_REV:-}" ]; then
  rm -rf /tmp/va-before
  git worktree add --detach /tmp/va-before "$BEFORE_REV" >/dev/null 2>&1 &&
    (cd /tmp/va-before && build build gpu_kernels_bench) >/tmp/va-before.log 2>&1 &
  before_pid=$!
fi
build "$B" test_cuda_kernels gpu_kernels_bench >>"$OUT/build.log" 2>&1 || { grep -E "error|Error" "$OUT/build.log" | head -40; tail -20 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
grep -E "spill|warning|C75[0-9][0-9]" "$OUT/build.log" | sort -u | head -10
obj=$(find "$B" -name 'assign*.cu.o' | tr '\n' ' ')
if command -v cuobjdump >/dev/null && [ -n "$obj" ]; then
  echo "SASS of $obj(instruction counts):"
  for o in $obj; do cuobjdump --dump-sass "$o"; done | grep -oE "HGMMA\.[0-9x]+\.[0-9A-Z.]+|HMMA\.[0-9A-Z.]+|LDSM[.A-Z0-9]*|LDGSTS[.A-Z0-9]*|\bLDL\b|\bSTL\b" | sort | uniq -c
fi
rc=0
(cd "$B" && ctest -R '^cuda_' --output-on-failure --timeout 900) >"$OUT/ctest.log" 2>&1 || rc=1
grep -E "tests passed|Test +#|SKIP" "$OUT/ctest.log" | head -20
grep -E "FAIL|mismatches|worst|checked|PASSED|FAILED|device:|case|fused kernel|differ" "$B"/Testing/Temporary/LastTest.log > "$OUT/detail.txt" 2>/dev/null
grep -E "^FAIL|FAILED|PASSED" "$OUT/detail.txt" | head -30
grep -E "fused cfg [2-3]" "$OUT/detail.txt" | sort -t'(' -k2 -r | head -4 | cut -c1-150
if [ -x "$B/test_nccl" ]; then
  echo "test_nccl on 1 rank (exercises the code path on a single GPU):"
  mpirun -n 1 "$B/test_nccl" 2>&1 | tail -3
fi
echo "benchmark ($(( $(date +%s) - t0 )) s):"
"$B/gpu_kernels_bench" "$@" >"$OUT/bench.txt" 2>&1 || rc=1
grep -E "automatic fused|rows differ|^FAILED|^verification" "$OUT/bench.txt" | cut -c1-100
if [ -n "$before_pid" ]; then
  if wait "$before_pid" && [ -x /tmp/va-before/build/gpu_kernels_bench ]; then
    echo "benchmark of $BEFORE_REV ($(( $(date +%s) - t0 )) s):"
    /tmp/va-before/build/gpu_kernels_bench "$@" >"$OUT/bench_before.txt" 2>&1
  else
    tail -30 /tmp/va-before.log >"$OUT/bench_before.txt"
    echo "build of $BEFORE_REV failed (bench_before.txt)"
  fi
fi
{
  sed -n '/== summary/,$p' "$OUT/bench.txt" | grep -vE "^(stats|farthest)|cuBLAS alone, |gemm, [0-9]+-row"
  [ -s "$OUT/bench_before.txt" ] && python3 - "$OUT/bench_before.txt" "$OUT/bench.txt" <<'PY'
# the automatic fused configuration's pass and argmin kernel, before and after, per precision
import re, sys
def parse(path):
    auto, rows = {}, {}
    for line in open(path):
        m = re.match(r"\s*automatic fused configuration (\w+): \d+ \((.*)\)", line)
        if m: auto[m.group(1)] = m.group(2)
        m = re.match(r"(.*?)\s+median\s+([\d.]+) ms\s+min\s+([\d.]+) ms(?:\s+([\d.]+) TFLOP/s)?", line)
        if m: rows[m.group(1).strip()] = (float(m.group(2)), m.group(4))
    return auto, rows
(ab, rb), (aa, ra) = parse(sys.argv[1]), parse(sys.argv[2])
print("%-6s %-34s %-34s %s" % ("prec", "before: pass / argmin ms (TFLOP/s)", "after: pass / argmin ms (TFLOP/s)", "configs"))
for p in ("tf32", "fp16", "bf16"):
    cell = []
    for auto, rows in ((ab, rb), (aa, ra)):
        c = auto.get(p, "?")
        ps, am = rows.get("assign %s fused %s" % (p, c), (0, "")), rows.get("argmin kernel alone %s %s" % (p, c), (0, ""))
        cell.append("%.3f / %.3f (%s / %s)" % (ps[0], am[0], ps[1], am[1]))
    print("%-6s %-34s %-34s %s -> %s" % (p, cell[0], cell[1], ab.get(p, "?"), aa.get(p, "?")))
PY
} | tee "$OUT/summary.txt"
if [ "${VA_NCU:-0}" != 0 ] && [ $(( $(date +%s) - t0 )) -lt "${NCU_BEFORE_S:-300}" ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -n "$NCU" ]; then
    # ncu mode runs two fused passes per precision, tf32, fp16, bf16: profile each one's second (the
    # argmin kernels are fused_* and *_wgmma_kernel; the r kernel matches neither)
    for p in tf32:1 fp16:3 bf16:5; do
      [ "${VA_NCU}" = fp16 ] && [ "${p%%:*}" != fp16 ] && continue
      echo "== ncu ${p%%:*}" >>"$OUT/ncu.txt"
      timeout 100 "$NCU" --clock-control none -k 'regex:fused_|wgmma_kernel' --launch-skip "${p##*:}" --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
        "$B/gpu_kernels_bench" "${1:-1000000}" "${2:-128}" "${3:-1024}" 1 ncu >>"$OUT/ncu.txt" 2>&1
    done
    grep -E "^== ncu|fused_|Compute \(SM\) Throughput|Memory Throughput|Duration|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Shared Memory Config" "$OUT/ncu.txt" | head -30 | cut -c1-150
  fi
fi
echo "total: $(( $(date +%s) - t0 )) s"
exit $rc
