#!/bin/bash
# session 21, call 1: the wgmma argmin kernel for rows of 640 to 1536 bytes (tf32 d 160-384, 16-bit d
# 416-768; rows in shared memory, anchors in 128-byte pieces): ctest cuda_kernels (d 200, 384, 400, 700
# on it), then gpu_kernels_bench (n 1M, k 1024) at d 384, 768, 192, 512 against configuration 1 and the
# GEMM path.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep -E "error" /tmp/bn.log | head; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -R "cuda_kernels" -V --timeout 600) > $OUT/ctest_call1.log 2>&1
grep -E "FAIL|failure" $OUT/ctest_call1.log | head -20
grep -E "tests passed|tests failed|Test +#" $OUT/ctest_call1.log
echo "ctest $(( $(date +%s) - T0 )) s"
for d in 384 768 192 512; do
  timeout 110 build-gpu/gpu_kernels_bench 1000000 $d 1024 10 > $OUT/kernels1_d$d.txt 2>&1; echo "d $d rc $? $(( $(date +%s) - T0 )) s"
  grep -E "automatic fused|^assign (tf32|fp16|bf16) (gemm|fused)|fused (smem|wgmma).*differ|argmin kernel alone|cuBLAS products alone" $OUT/kernels1_d$d.txt | grep -v "cosine\|chunks" | head -24
done
