#!/bin/bash
# session 19 review mend: the backend's upload of host rows goes back through va_cuda_upload_rows, which
# copies into the pinned buffers on the context's host threads (va_copy_rows_padded; va_memcpy_threads
# removed): ctest cuda_kernels + gpu_backend + embed_e2e_cuda; call 6's host-preprocessed 16M x 128 fp16
# job twice (attaching the backend = the upload).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; exit 1; }
(python3 -c "import h5py,numpy as np; r=np.random.default_rng(1); h5py.File('/tmp/g16.h5','w').create_dataset('train', data=r.standard_normal((16000000,128),dtype=np.float32))") &
GP=$!
(cd build-gpu && ctest -R "cuda_kernels|gpu_backend|embed_e2e_cuda" --output-on-failure --timeout 600) > $OUT/ctest_mend.log 2>&1
grep -E "Test +#|tests passed|tests failed|FAIL" $OUT/ctest_mend.log | head
wait $GP
N=build-gpu/vecanneal
for rep in 1 2; do
  s=$(date +%s.%N); $N compress --input /tmp/g16.h5:/train --anchors 1024 --backend cuda --set precision=fp16 --set gpu_mem_limit_mb=6000 --set max_iter=10 --set tol=0 --set min_changes=0 --set threads=16 --set progress_every=0 --set init=random --out /tmp/d_host.h5 > /tmp/j.log 2>&1; rc=$?; e=$(date +%s.%N)
  echo "prep on host rc $rc: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(grep -o 'read [0-9.]* s, init [0-9.]* s (backend [0-9.]* s' /tmp/j.log) | $(grep -o 'energy [0-9.]*' /tmp/j.log | tail -1)" | tee -a $OUT/host_prep_mend.txt
done
echo "all $(( $(date +%s) - T0 )) s"
