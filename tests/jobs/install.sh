#!/usr/bin/env bash
# install.sh BUILD_DIR WORK: `cmake --install BUILD_DIR --prefix WORK/prefix`, then, from another folder
# and with the source tree out of reach of PATH, the installed binary runs gen, compress and info; the
# installed Slurm script runs a compress job outside Slurm (its mpirun fallback) with the installed
# default config; the configs, the Slurm scripts, the manual, the license and (when present) the Python
# reader are where cmake/install.cmake says.
set -euo pipefail
BUILD=$1 WORK=$2
fail() { echo "install: FAIL: $*" >&2; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK/run"
P=$WORK/prefix
cmake --install "$BUILD" --prefix "$P" > "$WORK/install.log" || { cat "$WORK/install.log"; fail "cmake --install"; }
for f in bin/vecanneal share/vecanneal/configs/default.ini share/vecanneal/jobs/slurm/common.sh \
         share/vecanneal/jobs/slurm/compress.sbatch share/doc/vecanneal/README.md share/doc/vecanneal/LICENSE \
         share/doc/vecanneal/architecture.md; do
  [ -e "$P/$f" ] || fail "$f not installed"
done
[ -x "$P/bin/vecanneal" ] && [ -x "$P/share/vecanneal/jobs/slurm/compress.sbatch" ] || fail "installed programs not executable"
if [ -d "$(dirname "$0")/../../python" ]; then ls "$P"/share/vecanneal/python/*.py > /dev/null || fail "Python reader not installed"; fi
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$WORK/run"
V=$P/bin/vecanneal
"$V" --version > /dev/null || fail "installed binary does not start"
mpirun -n 2 --oversubscribe "$V" gen --out g.h5 --n 4000 --d 16 > /dev/null || fail "installed gen"
mpirun -n 2 --oversubscribe "$V" compress --input g.h5:/train --anchors 8 --out i.h5 --set max_iter=5 \
  --set threads=1 --set progress_every=0 > /dev/null || fail "installed compress"
"$V" info i.h5 > info.txt || fail "installed info"
# The installed Slurm script outside Slurm: mpirun, the installed binary (found beside the scripts'
# share folder), the installed default config, outputs under VECANNEAL_OUT_DIR.
env -u VECANNEAL -u VECANNEAL_HOME PATH=/usr/bin:/bin VECANNEAL_OUT_DIR="$WORK/run/slurm-out" \
  bash "$P/share/vecanneal/jobs/slurm/compress.sbatch" --input "$WORK/run/g.h5:/train" --anchors 8 \
  --set max_iter=3 --set threads=1 > slurm.log 2>&1 || { cat slurm.log; fail "installed compress.sbatch"; }
ls slurm-out/*/index.h5 > /dev/null || { cat slurm.log; fail "installed compress.sbatch wrote no index"; }
echo "install: $(find "$P" -type f | wc -l) files under the prefix; installed gen, compress, info and compress.sbatch ran"
