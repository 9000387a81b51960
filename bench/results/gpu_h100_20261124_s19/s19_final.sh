#!/bin/bash
# session 19 final call: the final code (820234b and later): ctest -L gpu + cuda_blas_load + bad_inputs.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; tail -30 /tmp/bn.log; exit 1; }
echo "build $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 600; ctest -R "cuda_blas_load|bad_inputs" --output-on-failure) > $OUT/ctest_final.log 2>&1
grep -E "Test +#|tests passed|tests failed|FAIL" $OUT/ctest_final.log | head -30
echo "all $(( $(date +%s) - T0 )) s"
