#!/bin/bash
# session 12 call 12: loop time without the final download (peers' start, fp16/bf16 Lloyd and default)
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/peers/*.whl && export PYTHONPATH=/tmp/site
B=build-gpu
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /dev/null 2>&1 && make -C $B -j16 vecanneal > /tmp/build.log 2>&1 ) || { tail -30 /tmp/build.log; exit 1; }
[ -f /tmp/g1.h5 ] || mpirun -n 16 $B/vecanneal gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
python3 - <<'PY'
import h5py, torch
X = h5py.File("/tmp/g1.h5")["train"][:]
g = torch.Generator().manual_seed(7)
idx = torch.randperm(X.shape[0], generator=g)[:1024].sort().values
with h5py.File("/tmp/init.h5", "w") as f: f["anchors"] = X[idx.numpy()]
PY
for prec in fp16 bf16; do
  for sched in lloyd default; do
    extra=""; [ $sched = lloyd ] && extra="--set lr=1 --set T0=1e9 --set cooling_rate=0"
    $B/vecanneal compress --input /tmp/g1.h5:/train --out /tmp/x.h5 --backend cuda --set precision=$prec --set init=file:/tmp/init.h5:/anchors --set max_iter=20 --set tol=0 --set min_changes=0 $extra --set progress_every=1 > $OUT/pull_${prec}_$sched.log 2>&1
    echo "$prec $sched: sum/20 $(awk '$1 ~ /^[0-9]+$/ && NF >= 7 {s += $NF; n++} END {printf "%.3f", s/n}' $OUT/pull_${prec}_$sched.log); $(grep -o '[0-9.]* ms/iteration' $OUT/pull_${prec}_$sched.log)"
  done
done
