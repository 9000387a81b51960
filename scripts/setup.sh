#!/usr/bin/env bash
# setup.sh: installs the build and runtime dependencies that are missing (Debian/Ubuntu, as root or
# with sudo), configures build/ (Release) and builds it, printing each step and one progress line for
# the build (the compiler's output goes to build/setup.log). Sourced by quickstart.sh and test.sh;
# safe to run again: it installs nothing that is already there and rebuilds incrementally.
# Environment (all optional):
#   VECANNEAL_SETUP_TARGETS  what to build: "all" (default; every test, fuzzer and benchmark) or
#                            targets such as "vecanneal" (quickstart.sh: the program alone)
#   VECANNEAL_TEST_DEPS=1    also install what the test suite needs (test.sh sets it)
#   VECANNEAL_CUDA           AUTO | ON | OFF: the CUDA backend. Unset: with VECANNEAL_SETUP_TARGETS=all,
#                            AUTO (built wherever the CUDA toolkit is, so that CI compiles it); for a
#                            smaller set, ON where `nvidia-smi -L` lists a GPU, else OFF
#   VECANNEAL_CMAKE_ARGS     further CMake arguments for build/, e.g. "-DVECANNEAL_HDF5=SERIAL"
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGETS=${VECANNEAL_SETUP_TARGETS:-all}
PKGS=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libhdf5-openmpi-dev libhdf5-dev hdf5-tools
      libopenblas-dev python3)
# The test suite also fuzzes (clang's libFuzzer), runs valgrind, checks the layout (clang-format 14)
# and reads indexes and metrics from Python (numpy, h5py); strace counts the bytes a job reads.
[ "${VECANNEAL_TEST_DEPS:-0}" = 1 ] && PKGS+=(clang libclang-rt-14-dev valgrind clang-format-14 python3-numpy
  python3-h5py strace)
# faiss for the Python index reader's test comes from pip (below).
[ "${VECANNEAL_TEST_DEPS:-0}" = 1 ] && PKGS+=(python3-pip)
SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" > /dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]} (apt-get)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" > /dev/null
else
  echo "setup: system packages present"
fi
# The test suite's Python is the first python3 on PATH; where that is not the system's (pyenv, a
# virtual environment), Debian's numpy and h5py are not its own: pip installs them there (numpy 1, as
# Debian 12's, which the suite runs with).
if [ "${VECANNEAL_TEST_DEPS:-0}" = 1 ] && ! python3 -c 'import numpy, h5py' > /dev/null 2>&1; then
  echo "setup: installing numpy and h5py for $(command -v python3) (pip)"
  $SUDO env PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q "numpy<2" h5py > /dev/null
fi
# faiss has no Debian package: pip into the system Python (PIP_BREAK_SYSTEM_PACKAGES passes PEP 668's
# guard; older pip ignores it), numpy held to the packaged major version (a numpy 2 from PyPI breaks
# Debian 12's h5py, built against numpy 1). Without faiss the reader's test skips its faiss part only.
if [ "${VECANNEAL_TEST_DEPS:-0}" = 1 ] && ! python3 -c 'import faiss' > /dev/null 2>&1; then
  np_major=$(python3 -c 'import numpy; print(numpy.__version__.split(".")[0])')
  echo "setup: installing faiss-cpu (pip)"
  $SUDO env PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q faiss-cpu "numpy<$((np_major + 1))" > /dev/null ||
    echo "setup: faiss-cpu not installed: the faiss part of python_index_reader will SKIP"
fi
# Open MPI refuses to run as root unless told; containers and CI run as root.
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_btl_base_warn_component_unused=0

cuda=${VECANNEAL_CUDA:-}
if [ -z "$cuda" ]; then
  if [ "$TARGETS" = all ]; then cuda=AUTO
  elif command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then cuda=ON
  else cuda=OFF; fi
fi
mkdir -p "$ROOT/build"
LOG=$ROOT/build/setup.log
echo "setup: configuring build/ (CUDA backend: $cuda; log: build/setup.log)"
cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DVECANNEAL_CUDA="$cuda" ${VECANNEAL_CMAKE_ARGS:-} > "$LOG" 2>&1 \
  || { cat "$LOG"; exit 1; }

# cmake --build with one progress line: rewritten in place on a terminal, every tenth elsewhere (logs).
build_targets=()
[ "$TARGETS" != all ] && for t in $TARGETS; do build_targets+=(--target "$t"); done
echo "setup: building ${TARGETS} with $(nproc) job(s)"
last=-10
while IFS= read -r line; do
  echo "$line" >> "$LOG"
  if [[ $line =~ ^\[\ *([0-9]+)%\] ]]; then
    p=${BASH_REMATCH[1]}
    if [ -t 1 ]; then printf '\rsetup: building %3d%%' "$p"
    elif [ "$p" -ge $((last + 10)) ]; then echo "setup: building $p%"; last=$p; fi
  fi
done < <(cmake --build "$ROOT/build" -j "$(nproc)" "${build_targets[@]}" 2>&1; echo "setup-build-status $?")
[ -t 1 ] && echo
if ! tail -1 "$LOG" | grep -qx 'setup-build-status 0'; then tail -50 "$LOG"; exit 1; fi
echo "setup: built $ROOT/build/vecanneal ($(grep -o "CUDA backend [A-Z]*, NCCL [A-Z]*, parallel HDF5 [A-Z]*" "$LOG" | head -1))"
