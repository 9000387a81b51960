#!/bin/bash
# session 19 call 8: streamed rows whose d is not a multiple of 32 copied into the padded pinned copy on
# the rank's threads (working tree) vs HEAD (.gpu-src/base.tar): ctest cuda_kernels (stream_case at d 77
# and 300 goes through that copy); 8M x 100 float32 (h5py, Gaussian) streamed fp16 jobs, 2 runs each:
# read, wall, the same index to the bit.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base
(cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j6 vecanneal > /tmp/bb.log 2>&1) &
BP=$!
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmn.log 2>&1 && make -C build-gpu -j12 vecanneal h5tool test_cuda_kernels > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; exit 1; }
python3 -c "import h5py,numpy as np; r=np.random.default_rng(2); h5py.File('/tmp/g100.h5','w').create_dataset('train', data=r.standard_normal((8000000,100),dtype=np.float32))" &
GP=$!
wait $BP || { tail -20 /tmp/bb.log; exit 1; }
echo "builds $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -R "cuda_kernels" --output-on-failure --timeout 600) > $OUT/ctest_call8.log 2>&1
grep -E "Test +#|tests passed|tests failed|FAIL" $OUT/ctest_call8.log | head
wait $GP
N=build-gpu/vecanneal; O=/tmp/base/bb/vecanneal
for rep in 1 2; do for v in base new; do
  b=$N; [ $v = base ] && b=$O
  s=$(date +%s.%N); $b compress --input /tmp/g100.h5:/train --anchors 1024 --backend cuda --set precision=fp16 --set gpu_stream=on --set max_iter=5 --set tol=0 --set min_changes=0 --set threads=16 --set progress_every=0 --set init=random --out /tmp/d_$v.h5 > /tmp/j_$v.log 2>&1; rc=$?; e=$(date +%s.%N)
  echo "8M x 100 streamed fp16 $v rc $rc: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(grep -o 'read [0-9.]* s, init [0-9.]* s (backend [0-9.]* s' /tmp/j_$v.log) | $(grep -o 'energy [0-9.]*' /tmp/j_$v.log | tail -1)" | tee -a $OUT/padded_ab_call8.txt
  [ $rc = 0 ] || tail -5 /tmp/j_$v.log
done; done
echo "new vs base: $(build-gpu/h5tool close /tmp/d_new.h5 /tmp/d_base.h5 0 2>&1 | tr '\n' ' ')" | tee -a $OUT/padded_ab_call8.txt
echo "all $(( $(date +%s) - T0 )) s"
