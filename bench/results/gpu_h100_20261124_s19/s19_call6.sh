#!/bin/bash
# session 19 call 6: the backend's upload of host rows (host-preprocessed fp16, embedded vectors on
# the host) copied into the pinned buffers on the rank's threads (working tree): ctest gpu_backend +
# embed_e2e_cuda; then call 5's 16M x 128 fp16 jobs again (GPU vs host preprocessing, 2 runs each).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; exit 1; }
(python3 -c "import h5py,numpy as np; r=np.random.default_rng(1); h5py.File('/tmp/g16.h5','w').create_dataset('train', data=r.standard_normal((16000000,128),dtype=np.float32))") &
GP=$!
(cd build-gpu && ctest -R "gpu_backend|embed_e2e_cuda" --output-on-failure --timeout 600) > $OUT/ctest_call6.log 2>&1
grep -E "Test +#|tests passed|tests failed|FAIL" $OUT/ctest_call6.log | head
wait $GP
echo "ctest + data $(( $(date +%s) - T0 )) s"
N=build-gpu/vecanneal
for rep in 1 2; do for v in gpu host; do
  lim=0; [ $v = host ] && lim=6000
  s=$(date +%s.%N); $N compress --input /tmp/g16.h5:/train --anchors 1024 --backend cuda --set precision=fp16 --set gpu_mem_limit_mb=$lim --set max_iter=10 --set tol=0 --set min_changes=0 --set threads=16 --set progress_every=0 --set init=random --metrics /tmp/m_$v.json --out /tmp/d_$v.h5 > /tmp/j_$v.log 2>&1; rc=$?; e=$(date +%s.%N)
  echo "prep on $v rc $rc: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(grep -o 'read [0-9.]* s, init [0-9.]* s (backend [0-9.]* s' /tmp/j_$v.log) | $(python3 -c "import json;m=json.load(open('/tmp/m_$v.json'));g=m['gpu_memory_bytes'];print('%.3f ms/iteration | gpu loop %.0f MiB peak %.0f MiB | peak RSS %.0f MiB' % (m['ms_per_iteration'], g['loop']['max']/2**20, g['peak']['max']/2**20, m['peak_rss_bytes']['max']/2**20))") | $(grep -c 'preprocessing them on the host' /tmp/j_$v.log) host line" | tee -a $OUT/host_prep_call6.txt
  [ $rc = 0 ] || tail -5 /tmp/j_$v.log
done; done
echo "gpu vs host: $(build-gpu/h5tool close /tmp/d_host.h5 /tmp/d_gpu.h5 0 2>&1 | tr '\n' ' ')" | tee -a $OUT/host_prep_call6.txt
echo "all $(( $(date +%s) - T0 )) s"
