#!/bin/bash
# session 20, call 6: the wgmma argmin kernel for every padded row up to 128 elements at 16 bits (d 32,
# 96 new; 64, 128 as before) and 32 at tf32: ctest cuda_kernels (each fused configuration against the
# CPU reference, d 20 and 77 now on wgmma too), then gpu_kernels_bench at d 32, 64, 96, 128 (every
# fused configuration that fits, n 1M, k 1024).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T0=$(date +%s)
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep -E "error" /tmp/bn.log | head; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -R "cuda_kernels" -V --timeout 600) > $OUT/ctest_call6.log 2>&1
grep -E "tests passed|tests failed|FAIL|fused cfg 3" $OUT/ctest_call6.log | head -40
for d in 32 64 96 128; do
  timeout 120 build-gpu/gpu_kernels_bench 1000000 $d 1024 10 > $OUT/kernels6_d$d.txt 2>&1; echo "d $d rc $? $(( $(date +%s) - T0 )) s"
  grep -E "automatic fused|fused (smem|reg|wgmma)|argmin kernel alone" $OUT/kernels6_d$d.txt | grep -v cosine | head -20
done
