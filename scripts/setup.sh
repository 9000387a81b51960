#!/usr/bin/env bash
# setup.sh: installs the build and runtime dependencies that are missing (Debian/Ubuntu, as root or
# with sudo) and builds vecanneal into build/ (Release). Sourced by quickstart.sh and test.sh;
# safe to run again: it installs nothing that is already there and rebuilds incrementally.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PKGS=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libhdf5-openmpi-dev libhdf5-dev hdf5-tools
      libopenblas-dev python3)
# The test suite also fuzzes (clang's libFuzzer), runs valgrind and checks the layout (clang-format 14).
[ "${VECANNEAL_TEST_DEPS:-0}" = 1 ] && PKGS+=(clang libclang-rt-14-dev valgrind clang-format-14)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" > /dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" > /dev/null
fi
# Open MPI refuses to run as root unless told; containers and CI run as root.
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_btl_base_warn_component_unused=0
mkdir -p "$ROOT/build"
cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release ${VECANNEAL_CMAKE_ARGS:-} > "$ROOT/build/setup.log" 2>&1 \
  || { cat "$ROOT/build/setup.log"; exit 1; }
cmake --build "$ROOT/build" -j "$(nproc)" >> "$ROOT/build/setup.log" 2>&1 || { tail -50 "$ROOT/build/setup.log"; exit 1; }
echo "setup: built $ROOT/build/vecanneal ($(grep -o "CUDA backend [A-Z]*, NCCL [A-Z]*, parallel HDF5 [A-Z]*" "$ROOT/build/setup.log" | head -1))"
