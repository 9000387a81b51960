#!/bin/bash
# session 20, call 1: the statistics' NCCL allreduce ordered on the device (va_nccl_allreduce_on; the host
# waits once an iteration): the whole gpu label (cuda_nccl_allreduce_1 exercises the ordered allreduce on
# one rank), a 1-rank 1M x 128 x 1024 fp16 job (unchanged path: ms/iteration) and 2 ranks sharing the GPU
# through gpu_collectives = mpi (the host fallback) against 1 rank.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
(python3 -c "import h5py,numpy as np; r=np.random.default_rng(1); c=r.standard_normal((2000,128)).astype(np.float32)*4; h5py.File('/tmp/g1.h5','w').create_dataset('train', data=(c[r.integers(0,2000,1000000)]+r.standard_normal((1000000,128),dtype=np.float32)).astype(np.float32))") &
GP=$!
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 600) > $OUT/ctest_call1.log 2>&1
grep -E "Test +#|tests passed|tests failed" $OUT/ctest_call1.log
wait $GP
N=build-gpu/vecanneal
J="--input /tmp/g1.h5:/train --anchors 1024 --backend cuda --set precision=fp16 --set max_iter=20 --set tol=0 --set min_changes=0 --set progress_every=0 --set seed=1"
for rep in 1 2 3; do
  $N compress $J --out /tmp/p1.h5 --metrics /tmp/m1.json > /tmp/j1.log 2>&1 || { echo "1 rank rc $?"; tail -5 /tmp/j1.log; }
  python3 -c "import json; m=json.load(open('/tmp/m1.json')); print('1 rank ms/iter %.3f' % (1e3*m['loop_seconds']/m['iterations']))" | tee -a $OUT/call1_jobs.txt
done
mpirun -n 2 --bind-to none $N compress $J --set gpu_collectives=mpi --out /tmp/p2.h5 --metrics /tmp/m2.json > /tmp/j2.log 2>&1 || { echo "2 ranks rc $?"; tail -5 /tmp/j2.log; }
python3 -c "import json; m=json.load(open('/tmp/m2.json')); print('2 ranks (one GPU, mpi) ms/iter %.3f' % (1e3*m['loop_seconds']/m['iterations']))" | tee -a $OUT/call1_jobs.txt
build-gpu/h5tool close /tmp/p1.h5 /tmp/p2.h5 1e-4 2>&1 | tail -3 | tee -a $OUT/call1_jobs.txt
echo "all $(( $(date +%s) - T0 )) s"
