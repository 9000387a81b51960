#!/bin/bash
# session 20, call 10 (review mend): dalloc/dfree shared through cuda_internal.cuh (cuda_vmm's fallback
# and free use them), cuMemCreate failures through the one checked-call path, the wgmma kernel's row
# lengths from one rule (ks_ok / ks_wide) and its instances from one fold: ctest cuda_kernels,
# gpu_backend, embed_e2e_cuda; gpu_kernels_bench at d 384 and 96 (the automatic configuration, timings).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -R "cuda_kernels|gpu_backend|embed_e2e_cuda" --output-on-failure --timeout 600) > $OUT/ctest_mend.log 2>&1
grep -E "Test +#|tests passed|tests failed" $OUT/ctest_mend.log
for d in 384 96; do
  timeout 100 build-gpu/gpu_kernels_bench 1000000 $d 1024 10 > $OUT/kernels_mend_d$d.txt 2>&1; echo "d $d rc $?"
  grep -E "automatic fused configuration (fp16|bf16)|^assign fp16 fused wgmma" $OUT/kernels_mend_d$d.txt | head -4
done
echo "all $(( $(date +%s) - T0 )) s"
