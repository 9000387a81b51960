#!/bin/bash
# session 20, call 7: the wgmma argmin kernel for 16-bit rows of 160 to 384 elements (one 64-row block's
# fragments per warpgroup in registers, 64-anchor tiles): ctest cuda_kernels (d 300 and 384 on it), then
# gpu_kernels_bench at d 192, 256, 384 (n 1M, k 1024) against the mma.sync kernel and the GEMM path.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T0=$(date +%s)
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep -E "error" /tmp/bn.log | head; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -R "cuda_kernels" -V --timeout 600) > $OUT/ctest_call7.log 2>&1
grep -E "tests passed|tests failed|FAIL|case n|fused cfg 3" $OUT/ctest_call7.log | grep -B1 -A6 "d 300\|d 384" | head -40
grep -E "tests passed|tests failed" $OUT/ctest_call7.log
for d in 192 256 384; do
  timeout 120 build-gpu/gpu_kernels_bench 1000000 $d 1024 10 > $OUT/kernels7_d$d.txt 2>&1; echo "d $d rc $? $(( $(date +%s) - T0 )) s"
  grep -E "automatic fused|^assign (fp16|bf16)|fused (smem|wgmma).*differ|argmin kernel alone (fp16|bf16)|cuBLAS products alone fp16" $OUT/kernels7_d$d.txt | grep -v cosine | head -14
done
