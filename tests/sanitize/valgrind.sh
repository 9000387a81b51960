#!/usr/bin/env bash
# valgrind.sh VECANNEAL [WORKDIR]: runs a short single-rank job under valgrind memcheck - gen, compress
# (kmeans|| init, trimmed statistics, a maintenance pass), info, and compress --print-config from an
# INI file - with --leak-check=full, and
# passes only when memcheck reports no error and no definite or indirect leak in any of them.
# Single rank, no mpirun: Open MPI's singleton start (isolated: no orted is forked). Suppressions:
# Open MPI's own file (/usr/share/openmpi/openmpi-valgrind.supp, when installed) and
# tests/sanitize/valgrind.supp (leaks under Open MPI's MPI_Init only; reasons inside).
# Exit 77 (CTest: skipped) when valgrind is not installed.
set -uo pipefail
BIN=${1:?vecanneal binary}
WORK=${2:-$(mktemp -d)}
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v valgrind > /dev/null || { echo "SKIP: valgrind not installed (apt-get install valgrind)"; exit 77; }
mkdir -p "$WORK"; rm -f "$WORK"/*.vg "$WORK"/*.h5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_ess_singleton_isolated=1
export OMPI_MCA_btl=self OMPI_MCA_btl_base_warn_component_unused=0
# hwloc's x86 CPUID backend refuses to run under valgrind (and says so); the Linux backend suffices.
export HWLOC_COMPONENTS=-x86
# One thread: OpenMP / OpenBLAS worker pools are not what this checks, and valgrind serialises them.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
SUPP=(--suppressions="$HERE/valgrind.supp")
[ -f /usr/share/openmpi/openmpi-valgrind.supp ] && SUPP+=(--suppressions=/usr/share/openmpi/openmpi-valgrind.supp)
VG=(valgrind --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite,indirect --num-callers=30 --track-fds=no "${SUPP[@]}")
fail=0
run() {
  local name=$1; shift
  local t0=$SECONDS
  "${VG[@]}" --log-file="$WORK/$name.vg" "$BIN" "$@" > "$WORK/$name.out" 2>&1
  local rc=$?
  local summary; summary=$(grep -E "ERROR SUMMARY" "$WORK/$name.vg" | tail -1 | sed 's/^==[0-9]*== //')
  local leaks; leaks=$(grep -E "definitely lost:|indirectly lost:" "$WORK/$name.vg" | sed 's/^==[0-9]*== *//' | tr '\n' ' ')
  printf '%-8s rc %-3s %3ss  %s %s\n' "$name" "$rc" "$((SECONDS - t0))" "$summary" "$leaks"
  if [ $rc -ne 0 ]; then
    fail=1
    cat "$WORK/$name.out" | tail -20
    grep -v -E "^==[0-9]+== *$" "$WORK/$name.vg" | head -120
  fi
}
start=$SECONDS
run gen gen --out "$WORK/data.h5" --n 1500 --d 16 --clusters 6 --seed 3
run compress compress --input "$WORK/data.h5:/train" --anchors 8 --out "$WORK/index.h5" --set threads=1 \
    --set max_iter=8 --set robust=trim --set maintenance_interval=4 --set progress_every=0 --set backend=cpu
run info info "$WORK/index.h5"
# The configuration path alone (INI file + --set + --print-config), where nothing else hides a leak.
printf 'k = 12\nrobust = huber   # comment\n[update]\nlr = 0.5\n' > "$WORK/job.ini"
run config compress --config "$WORK/job.ini" --set max_iter=5 --print-config
[ $fail -eq 0 ] || { echo "FAIL: valgrind memcheck found errors (logs: $WORK/*.vg)"; exit 1; }
echo "PASS: valgrind clean ($((SECONDS - start)) s)"
