#!/bin/bash
# session 18 final call: the working tree (the owed assign pass inside the statistics pass, test fixed:
# part ALL is 0; atomic statistics compared within 1e-12): ctest -L gpu + cuda_blas_load + bad_inputs;
# the owed-pass lines of cuda_kernels.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; tail -30 /tmp/bn.log; exit 1; }
echo "build $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 600; ctest -R "cuda_blas_load|bad_inputs" --output-on-failure) > $OUT/ctest_final.log 2>&1
grep -E "Test +#|tests passed|tests failed|FAIL" $OUT/ctest_final.log | head -30
build-gpu/test_cuda_kernels 2>&1 | grep -E "owed|FAIL" | tee $OUT/owed_final.txt | head -12
echo "all $(( $(date +%s) - T0 )) s"
