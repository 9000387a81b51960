# lib.sh: shared helpers of the job-level tests (sourced). Every mpirun is bounded by a timeout so that
# a hang fails the test instead of stalling CI.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Quiet Open MPI's notices about missing high-speed transports on laptops and CI boxes.
export OMPI_MCA_btl_base_warn_component_unused=0
BIN=${VECANNEAL_BIN:?set VECANNEAL_BIN}
TOOL=${VECANNEAL_H5TOOL:?set VECANNEAL_H5TOOL}
WORK=${VECANNEAL_WORK:-$(mktemp -d)}
mkdir -p "$WORK"
fail() { echo "FAIL: $*"; exit 1; }
# visible_gpus: the CUDA devices this test's processes see (CUDA_VISIBLE_DEVICES honoured; 0 without a driver).
VA_VISIBLE_GPUS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)/visible-gpus
visible_gpus() { "$VA_VISIBLE_GPUS"; }
# expect_agreed_exit CODE PATTERN OUT ARGS...: vecanneal ARGS on $P ranks (default 3) must end every rank
# with CODE (each rank's exit traced by VECANNEAL_TRACE_EXIT), print one error message that mentions
# PATTERN, never hang, and leave nothing at OUT*.
expect_agreed_exit() {
  local code=$1 pattern=$2 out=$3 ranks=${P:-3}
  shift 3
  rm -f "$out"*
  VECANNEAL_TRACE_EXIT=1 timeout 60 mpirun -n "$ranks" --oversubscribe -x VECANNEAL_TRACE_EXIT "$BIN" "$@" \
    > "$WORK/case.stdout" 2> "$WORK/case.stderr"
  local rc=$?
  local msgs=$(grep -c "vecanneal: error:" "$WORK/case.stderr") exits=$(grep -c "exits with code $code" "$WORK/case.stderr")
  local msg=$(grep "vecanneal: error:" "$WORK/case.stderr" | head -1)
  printf '%-40.40s rc %-3s %s\n' "$*" "$rc" "$msg"
  [ $rc -eq 124 ] && fail "hang: $*"
  [ $rc -eq "$code" ] || { cat "$WORK/case.stderr"; fail "expected exit $code, got $rc: $*"; }
  [ "$msgs" -eq 1 ] || { cat "$WORK/case.stderr"; fail "expected one error message, got $msgs: $*"; }
  [ "$exits" -eq "$ranks" ] || { cat "$WORK/case.stderr"; fail "expected $ranks ranks to exit with $code, saw $exits: $*"; }
  echo "$msg" | grep -qi -- "$pattern" || fail "message does not mention '$pattern': $msg"
  ls "$out"* > /dev/null 2>&1 && fail "output left behind: $(ls "$out"*)"
  return 0
}
# results_of FILE: the raw bytes of a search result's /neighbors and /distances (bitwise comparisons;
# h5tool, so that no HDF5 command-line tool is needed).
results_of() {
  "$TOOL" raw "$1" /neighbors && "$TOOL" raw "$1" /distances || fail "h5tool raw $1"
}
# run_np P ARGS...: vecanneal on P ranks, one thread each, 120 s at most.
run_np() {
  local p=$1; shift
  timeout 120 mpirun -n "$p" --oversubscribe "$BIN" "$@"
}
