#!/bin/bash
# session 20, call 5: the assign kernels at other d than 128 (n 1M, k 1024): which fused configuration
# each precision takes and at what rate, against the GEMM path and cuBLAS's products alone.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T0=$(date +%s)
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 gpu_kernels_bench > /tmp/bn.log 2>&1) || { tail -20 /tmp/bn.log; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
for d in 96 384 768 960; do
  timeout 150 build-gpu/gpu_kernels_bench 1000000 $d 1024 10 > $OUT/kernels_d$d.txt 2>&1; echo "d $d rc $? $(( $(date +%s) - T0 )) s"
  grep -E "automatic fused|^assign|cuBLAS products alone" $OUT/kernels_d$d.txt | grep -v "cosine" | head -20
done
