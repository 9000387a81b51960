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
