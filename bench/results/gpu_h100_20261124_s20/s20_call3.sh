#!/bin/bash
# session 20, call 3: call 2 again after cuda_vmm became two parts (head kept, tail given back) in place of 256 pieces. ctest cuda_kernels (the in-place
# conversion against the host's rounding), gpu_backend (GPU memory of the fp16 jobs, a 440 MB limit
# preprocessed on the GPU), embed_e2e_cuda (rows adopted from the embedder); then 16M x 128 fp16 jobs,
# base (7555089, .gpu-src/base.tar) against new, alternated: start phases, GPU memory, the same index;
# new under gpu_mem_limit_mb 9500 (GPU preprocessing, was host) and 6000 (host preprocessing).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
(mkdir -p /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base && cmake -S /tmp/base -B /tmp/base/b -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/b -j8 vecanneal > /tmp/bb.log 2>&1; echo "base build rc $?") &
BP=$!
(python3 -c "import h5py,numpy as np; r=np.random.default_rng(1); h5py.File('/tmp/g16.h5','w').create_dataset('train', data=r.standard_normal((16000000,128),dtype=np.float32))") &
GP=$!
(cd build-gpu && ctest -R "cuda_kernels|gpu_backend|embed_e2e_cuda" --output-on-failure --timeout 600) > $OUT/ctest_call3.log 2>&1
grep -E "Test +#|tests passed|tests failed|GPU memory|converted in place" $OUT/ctest_call3.log
wait $BP; wait $GP
echo "data ready $(( $(date +%s) - T0 )) s"
J="--input /tmp/g16.h5:/train --anchors 1024 --backend cuda --set precision=fp16 --set max_iter=10 --set tol=0 --set min_changes=0 --set threads=16 --set progress_every=0 --set init=random"
job() { # label binary out extra...
  local l=$1 b=$2 o=$3; shift 3
  s=$(date +%s.%N); $b compress $J "$@" --out /tmp/$o.h5 --metrics /tmp/$o.json > /tmp/$o.log 2>&1; rc=$?; e=$(date +%s.%N)
  echo "$l rc $rc: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(grep -o 'read [0-9.]* s, init [0-9.]* s (backend [0-9.]* s' /tmp/$o.log) | $(grep -o 'on the host' /tmp/$o.log | head -1) | $(python3 -c "import json; m=json.load(open('/tmp/$o.json')); g=m['gpu_memory_bytes']; print('gpu MiB loop %.0f peak %.0f | ms/iter %.3f' % (g['loop']['max']/1048576, g['peak']['max']/1048576, 1e3*m['loop_seconds']/m['iterations']))" 2>&1)" | tee -a $OUT/vmm_call3.txt
}
for rep in 1 2; do
  job "base rep$rep" /tmp/base/b/vecanneal d_base
  job "new  rep$rep" build-gpu/vecanneal d_new
done
job "new limit 9500" build-gpu/vecanneal d_9500 --set gpu_mem_limit_mb=9500
job "new limit 6000" build-gpu/vecanneal d_6000 --set gpu_mem_limit_mb=6000
for o in d_base d_9500 d_6000; do echo "$o vs d_new: $(build-gpu/h5tool close /tmp/$o.h5 /tmp/d_new.h5 0 2>&1 | tr '\n' ' ')" | tee -a $OUT/vmm_call3.txt; done
echo "all $(( $(date +%s) - T0 )) s"
