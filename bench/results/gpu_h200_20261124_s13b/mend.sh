#!/bin/bash
# session 13: after the review mends: ctest -L gpu, the device share, a progress-line run
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
B=build-gpu; T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmake.log 2>&1 && make -C $B -j16 > /tmp/build.log 2>&1 ) || { tail -30 /tmp/build.log; exit 1; }
( cd $B && timeout 300 ctest -L gpu --output-on-failure > $OUT/ctest_gpu.log 2>&1; grep -E "tests passed|tests failed|Passed|Skipped|\*\*\*" $OUT/ctest_gpu.log | head -8 )
$B/gpu_kernels_bench 1000000 128 1024 20 > /tmp/k.log 2>&1; grep -E "^loop iteration|argmin kernel alone (fp16|bf16|tf32) wgmma" /tmp/k.log | head -6 | tee $OUT/device_share.txt
echo "all $(( $(date +%s) - T0 )) s"
