#!/bin/bash
# session 15 call 3: what the process's exit costs after main on --backend cuda (traced HEAD): default exit,
# cudaDeviceReset before MPI_Finalize (VA_RESET), _exit after MPI_Finalize (VA_QUICK_EXIT)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s); R=$PWD
rm -rf /tmp/new && mkdir /tmp/new && tar -xf .gpu-src/base.tar -C /tmp/new
(cd /tmp/new && python3 $R/bench/results/gpu_h100_20261124_s15/trace_patch.py && cmake -S . -B bn -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmn.log 2>&1 && make -C bn -j16 vecanneal > /tmp/bn.log 2>&1) || { tail -30 /tmp/bn.log; exit 1; }
echo "build $(( $(date +%s) - T0 )) s"
V=/tmp/new/bn/vecanneal
$V gen --kind vlc-demo --n 10000 --d 128 --out /tmp/demo.h5 > /dev/null
run() { # variant env...
  local tag=$1; shift
  local s=$(date +%s.%N)
  env "$@" VA_TRACE=$s $V compress --config configs/vlc-demo-large.ini --input /tmp/demo.h5:/train --out /tmp/o_$tag.h5 --backend cuda --set progress_every=0 --set threads=16 > /tmp/o.log 2> /tmp/tr.log
  local rc=$? e=$(date +%s.%N)
  echo "$tag rc$rc shell $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') | $(awk '{printf "%s=%s ", $2, $NF}' /tmp/tr.log)" | tee -a $OUT/exit.txt
}
for i in 1 2 3 4 5 6 7 8; do run default X=1; run reset VA_RESET=1; run quick VA_QUICK_EXIT=1; done
for t in reset quick; do /tmp/new/bn/h5tool close /tmp/o_$t.h5 /tmp/o_default.h5 0 | tail -1; done
python3 - $OUT/exit.txt <<'PY'
import sys, statistics as S
rows = {}
for l in open(sys.argv[1]):
    w = l.split(); rows.setdefault(w[0], []).append((float(w[3]), dict(x.split('=') for x in w[5:] if '=' in x)))
for tag, v in rows.items():
    sh = [x[0] for x in v]; fin = [float(x[1]['finalized']) for x in v]; plan = [float(x[1]['plan']) - float(x[1]['mpi_init']) for x in v]
    rs = [float(x[1]['reset']) - float(x[1]['exit_all']) for x in v if 'reset' in x[1]]
    print(f"{tag}: shell median {S.median(sh):.3f} (min {min(sh):.3f}, max {max(sh):.3f}); finalized at {S.median(fin):.3f}; after it {S.median([a-b for a,b in zip(sh,fin)]):.3f}; plan {S.median(plan):.3f}" + (f"; reset {S.median(rs):.3f}" if rs else ""))
PY
echo "all $(( $(date +%s) - T0 )) s"
