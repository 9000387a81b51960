#!/bin/bash
# session 21, call 4: two changes to the long-row wgmma kernel, each built on its own and measured in the
# same call: (b, this tree) the tiles' half biases into 4 slots of shared memory with each tile's first
# piece (ncu in call 3: the scan's global loads were the largest stall); (a, .gpu-src/clu.tar: call 2's
# cluster form with each stage released by a plain mbarrier.arrive.shared::cluster instead of
# .release.cluster, ncu's memory-barrier stall). test_cuda_kernels for both, then gpu_kernels_bench
# (n 1M, k 1024, argmin kernel alone) at d 384, 768, 192, 512.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
(mkdir -p /tmp/clu && tar -xf .gpu-src/clu.tar -C /tmp/clu && cmake -S /tmp/clu -B /tmp/clu/b -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmc.log 2>&1 && make -C /tmp/clu/b -j8 gpu_kernels_bench test_cuda_kernels > /tmp/bc.log 2>&1; echo "cluster build rc $? $(( $(date +%s) - T0 )) s") &
CP=$!
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmn.log 2>&1 && make -C build-gpu -j8 gpu_kernels_bench test_cuda_kernels > /tmp/bn.log 2>&1) || { grep -E "error" /tmp/bn.log | head; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
timeout 120 build-gpu/test_cuda_kernels > $OUT/kernels_test_call4.log 2>&1; echo "test_cuda_kernels (b) rc $?"; tail -1 $OUT/kernels_test_call4.log
wait $CP
timeout 120 /tmp/clu/b/test_cuda_kernels > $OUT/kernels_test_call4_cluster.log 2>&1; echo "test_cuda_kernels (a) rc $?"; tail -1 $OUT/kernels_test_call4_cluster.log
for d in 384 768 192 512; do for v in b a; do
  B=$([ $v = a ] && echo /tmp/clu/b || echo build-gpu)
  timeout 100 $B/gpu_kernels_bench 1000000 $d 1024 10 > /tmp/k_$v.txt 2>&1
  echo "d $d ($v): $(grep -E "argmin kernel alone (tf32|fp16) wgmma" /tmp/k_$v.txt | grep -v cosine | head -2 | sed 's/  */ /g' | tr '\n' ';')" | tee -a $OUT/kernels_call4.txt
done; done
echo "all $(( $(date +%s) - T0 )) s"
