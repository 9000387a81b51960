#!/bin/bash
# session 18 review mends: the upload's handed pointer removed. ctest cuda_kernels + gpu_backend;
# a streamed 1M x 128 fp16 job and a padded 300k x 100 one (gpu_stream=on) against resident: same anchors.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 vecanneal h5tool test_cuda_kernels > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; exit 1; }
echo "build $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -R "cuda_kernels|gpu_backend" --output-on-failure --timeout 600) > $OUT/ctest_mend.log 2>&1
grep -E "Test +#|tests passed|tests failed|FAIL" $OUT/ctest_mend.log | head
N=build-gpu/vecanneal
mpirun -n 16 $N gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
mpirun -n 16 $N gen --out /tmp/g3.h5 --n 300000 --d 100 --clusters 500 --spread 0.5 > /dev/null
for f in g1 g3; do for s in on off; do
  $N compress --input /tmp/$f.h5:/train --anchors 256 --backend cuda --set precision=fp16 --set gpu_stream=$s --set max_iter=20 --set tol=0 --set min_changes=0 --set init=random --set threads=16 --set progress_every=0 --out /tmp/${f}_$s.h5 > /tmp/j.log 2>&1 || tail -3 /tmp/j.log
  echo "$f stream=$s: $(grep -E '^read' /tmp/j.log | cut -c1-60) | $(grep -o 'energy [0-9.]*' /tmp/j.log | tail -1)"
done; echo "$f streamed vs resident: $(build-gpu/h5tool close /tmp/${f}_on.h5 /tmp/${f}_off.h5 1e-5 2>&1 | tr '\n' ' ')"; done | tee $OUT/mend_jobs.txt
echo "all $(( $(date +%s) - T0 )) s"
