#!/usr/bin/env bash
# CPU comparison of vecanneal with scikit-learn KMeans (lloyd) and faiss-cpu, plus the memory check of
# docs/memory.md. Installs the Python packages it needs, builds vecanneal when build/vecanneal is
# missing, generates the datasets with `vecanneal gen`, then runs bench/cpu_compare.py.
#
#   bench/run_cpu_compare.sh                 # comparison + memory check (about 5-8 minutes on 2 cores)
#   bench/run_cpu_compare.sh --no-memory     # comparison only
#   bench/run_cpu_compare.sh --memory-only   # memory check only
#   any other argument is passed to cpu_compare.py (e.g. --budget 10, --threads 2, --tag quiet)
#
# Environment: VA_BENCH_DATA (datasets and scratch, default build/bench-data), VECANNEAL (binary,
# default build/vecanneal) and VECANNEAL_REV (what it was built from, for the record), PYTHON
# (default python3), CLUSTERS / SPREAD (generator, default 1000 / 1.0).
# Checks: cpu_compare.py's (its docstring: vecanneal's plain-Lloyd energy equals scikit-learn's, every
# vecanneal energy within 1.01 x scikit-learn's, repeats alike, memory within 5% of the formula); the
# last line says passed or FAILED (bench/verify.py), exit 1 on a failure or a step that failed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
V="$PY $ROOT/bench/verify.py"
VECANNEAL="${VECANNEAL:-$ROOT/build/vecanneal}"
DATA="${VA_BENCH_DATA:-$ROOT/build/bench-data}"
CLUSTERS="${CLUSTERS:-1000}"
SPREAD="${SPREAD:-1.0}"
SEED=7
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

compare=1 memory=1 pass=()
for arg in "$@"; do
  case "$arg" in
    --no-memory) memory=0 ;;
    --memory-only) compare=0 ;;
    *) pass+=("$arg") ;;
  esac
done

mkdir -p "$DATA"
export VERIFY_LOG=$DATA/verification.log; : > "$VERIFY_LOG"
trap 'rc=$?; [ $rc -eq 0 ] || { $V fail "bench/run_cpu_compare.sh stopped at a failed step (exit $rc)"; $V verdict; }' EXIT

# 1. Python packages (only the missing ones).
missing=()
for spec in numpy:numpy h5py:h5py sklearn:scikit-learn faiss:faiss-cpu threadpoolctl:threadpoolctl; do
  "$PY" -c "import ${spec%%:*}" 2>/dev/null || missing+=("${spec##*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  "$PY" -m pip install --quiet "${missing[@]}"
fi

# 2. vecanneal.
if [ ! -x "$VECANNEAL" ]; then
  echo "building vecanneal"
  cmake -S "$ROOT" -B "$ROOT/build" >/dev/null
  make -C "$ROOT/build" -j2 vecanneal >/dev/null
fi

# 3. Datasets: a Gaussian mixture with more components than anchors at k = 256 and about as many as
#    at k = 1024 (no small "true" k, as with real embeddings), components N(0,1)^128 with
#    per-coordinate noise std SPREAD. Made once, kept in $DATA.
gen() { # n d [dtype]
  local dt="${3:-float32}" sfx=""
  [ "$dt" = float32 ] || sfx="_$dt"
  local f="$DATA/gauss_n$1_d$2$sfx.h5" stamp="$DATA/gauss_n$1_d$2$sfx.args"
  local args="--n $1 --d $2 --clusters $CLUSTERS --spread $SPREAD --seed $SEED --dtype $dt"
  if [ ! -f "$f" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$args" ]; then
    mpirun -n 2 "$VECANNEAL" gen --out "$f" $args
    echo "$args" > "$stamp"
  fi
}
sizes=()
[ $compare = 1 ] && sizes+=(100000 200000)
[ $memory = 1 ] && sizes+=(16384 200000 400000 800000)
for n in $(printf '%s\n' "${sizes[@]}" | sort -un); do gen "$n" 128; done
[ $memory = 1 ] && gen 400000 128 float16  # the read-staging term (non-float32 input)

# 4. The benchmark.
flags=()
[ $compare = 0 ] && flags+=(--no-compare)
[ $memory = 1 ] && flags+=(--memory --mem-f16 "400000:$DATA/gauss_n400000_d128_float16.h5")
export VA_BENCH_OUTER_CMD="bench/run_cpu_compare.sh $*"
echo "load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews the timings)"
[ -n "${VECANNEAL_REV:-}" ] && flags+=(--vecanneal-rev "$VECANNEAL_REV")
"$PY" "$ROOT/bench/cpu_compare.py" --vecanneal "$VECANNEAL" --data-dir "$DATA" \
  --gen-info "vecanneal gen --clusters $CLUSTERS --spread $SPREAD --seed $SEED (d 128)" "${flags[@]}" "${pass[@]}" \
  || $V fail "bench/cpu_compare.py exited non-zero"
trap - EXIT
exec $V verdict
