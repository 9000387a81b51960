#!/bin/bash
# session 18 call 6: streamed 1M x 128 x 1024 fp16 with robust = trim (code path unchanged by 4ab50bb)
# and none, 5 alternating repeats, HEAD vs 70ec152 (.gpu-src/base.tar): is the trim difference of call 4 noise?
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
T0=$(date +%s)
rm -rf /tmp/base && mkdir /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base
(cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j8 vecanneal > /tmp/bb.log 2>&1) &
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmn.log 2>&1 && make -C build-gpu -j8 vecanneal h5tool > /tmp/bn.log 2>&1) || { tail -30 /tmp/bn.log; exit 1; }
wait
echo "builds $(( $(date +%s) - T0 )) s"
N=build-gpu/vecanneal; O=/tmp/base/bb/vecanneal
mpirun -n 16 $N gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
for robust in trim none; do for rep in 1 2 3 4 5; do for v in base new; do
  b=$N; [ $v = base ] && b=$O
  $b compress --input /tmp/g1.h5:/train --anchors 1024 --backend cuda --set precision=fp16 --set robust=$robust --set gpu_stream=on --set max_iter=20 --set tol=0 --set min_changes=0 --set init=random --set threads=16 --set progress_every=0 --metrics /tmp/m.json --out /tmp/d_$v.h5 > /tmp/j.log 2>&1 || tail -3 /tmp/j.log
  echo "$robust $v $(python3 -c "import json;m=json.load(open('/tmp/m.json'));print('%.3f ms/iteration' % m['ms_per_iteration'])") $(grep -o 'energy [0-9.]*' /tmp/j.log | tail -1)" | tee -a $OUT/trim_ab.txt
done; done; echo "$robust: $(build-gpu/h5tool close /tmp/d_new.h5 /tmp/d_base.h5 0 2>&1 | tr '\n' ' ')" | tee -a $OUT/trim_ab.txt; done
echo "all $(( $(date +%s) - T0 )) s"
