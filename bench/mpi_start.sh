#!/usr/bin/env bash
# mpi_start.sh: on any machine with Open MPI, from the repository root: what `mpirun -n NP` costs before a
# program's first line and after its last, and which launch settings take that cost away. Each launch runs
# an empty MPI program (MPI_Init, a check of the world size, MPI_Finalize; built here with mpicc), REPS
# rounds, the variants interleaved within a round:
#   singleton          the program started without mpirun (Open MPI's defaults)
#   mpirun             mpirun -n NP --bind-to none (Open MPI's defaults)
#   mpirun-x-hwloc     the same, HWLOC_COMPONENTS forwarded to the ranks only (-x NAME=VALUE)
#   mpirun-hwloc       HWLOC_COMPONENTS=$NO_GPU_DISCOVERY in mpirun's own environment (and forwarded)
#   mpirun-transport   mpirun with --mca pml ob1 --mca btl self,vader (one node: no network transport probed)
#   mpirun-both        hwloc and transport together
# Every launch starts with HWLOC_COMPONENTS unset unless the variant sets it.
# NO_GPU_DISCOVERY is the list vecanneal's singleton start sets (src/cli/main.c): hwloc skips its OpenCL,
# OpenGL, CUDA, NVML, ROCm SMI and Level Zero backends, so neither mpirun's daemon nor a rank starts a GPU
# driver to list devices. The transport settings suit one node only: across nodes the ranks need a network
# BTL or UCX.
# Checks (bench/verify.py; the last line says passed or FAILED, exit 1 on a failure): every launch exits 0
# and its rank 0 reports NP ranks (1 for the singleton).
# Output under $OUT (default ./out-mpi-start): runs.csv (one row per launch), summary.txt (median seconds per
# variant and the ratio of plain mpirun's median to it).
# usage: bench/mpi_start.sh [NP] [REPS]    (defaults 2 and 3)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
NP=${1:-2} REPS=${2:-3}
OUT=${OUT:-$PWD/out-mpi-start}; W=/tmp/mpi-start; mkdir -p "$OUT" "$W"
export VERIFY_LOG=$OUT/verification.log; : > "$VERIFY_LOG"
V="python3 bench/verify.py"
NO_GPU_DISCOVERY=-opencl,-gl,-cuda,-nvml,-rsmi,-levelzero
echo "== $(date -u +%FT%TZ) $(hostname), $(nproc) cores; $(mpirun --version 2>&1 | head -1)"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c

cat > "$W/empty.c" << 'EOF'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) printf("ranks %d\n", size);
  MPI_Finalize();
  return 0;
}
EOF
mpicc -O2 -o "$W/empty" "$W/empty.c" || { $V fail "mpicc could not build the empty MPI program"; exec $V verdict; }

variant() { # name -> the command line, one word per line
  local m=(mpirun -n "$NP" --bind-to none) t=(--mca pml ob1 --mca btl self,vader)
  case $1 in
    singleton) printf '%s\n' "$W/empty" ;;
    mpirun) printf '%s\n' "${m[@]}" "$W/empty" ;;
    mpirun-x-hwloc) printf '%s\n' "${m[@]}" -x "HWLOC_COMPONENTS=$NO_GPU_DISCOVERY" "$W/empty" ;;
    mpirun-hwloc) printf '%s\n' env "HWLOC_COMPONENTS=$NO_GPU_DISCOVERY" "${m[@]}" -x HWLOC_COMPONENTS "$W/empty" ;;
    mpirun-transport) printf '%s\n' "${m[@]}" "${t[@]}" "$W/empty" ;;
    mpirun-both) printf '%s\n' env "HWLOC_COMPONENTS=$NO_GPU_DISCOVERY" "${m[@]}" -x HWLOC_COMPONENTS "${t[@]}" \
      "$W/empty" ;;
  esac
}
VARIANTS=(singleton mpirun mpirun-x-hwloc mpirun-hwloc mpirun-transport mpirun-both)

echo "variant,round,seconds,ranks_reported" > "$OUT/runs.csv"
for r in $(seq "$REPS"); do
  for v in "${VARIANTS[@]}"; do
    mapfile -t cmd < <(variant "$v")
    s=$(date +%s%N)
    out=$(env -u HWLOC_COMPONENTS "${cmd[@]}" 2> "$W/err_$v")
    rc=$?
    e=$(date +%s%N)
    want=$NP; [ "$v" = singleton ] && want=1
    got=$(sed -n 's/^ranks //p' <<< "$out")
    if [ $rc -ne 0 ] || [ "$got" != "$want" ]; then
      $V fail "$v, round $r: exit $rc, rank 0 reported '${got}' ranks (want $want): $(tail -1 "$W/err_$v")"
    else
      echo "ok: $v, round $r: exit 0, rank 0 reported $got ranks" >> "$VERIFY_LOG"
    fi
    secs=$(python3 -c "import sys; print('%.3f' % ((int(sys.argv[2]) - int(sys.argv[1])) / 1e9))" "$s" "$e")
    echo "$v,$r,$secs,$got" >> "$OUT/runs.csv"
  done
done

python3 - "$OUT/runs.csv" "$NP" << 'PY' | tee "$OUT/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
names = list(dict.fromkeys(r["variant"] for r in rows))
med = {n: statistics.median(float(r["seconds"]) for r in rows if r["variant"] == n) for n in names}
print(f"median seconds over {len(rows) // len(names)} rounds, {sys.argv[2]} ranks; ratio: plain mpirun / variant")
for n in names:
    print(f"{n:18s} {med[n]:7.3f} s  {med['mpirun'] / med[n]:5.2f}x")
PY
exec $V verdict
