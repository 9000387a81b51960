#!/bin/bash
# session 15 review mends (da58db4): ctest -L gpu + cuda_blas_load on an H100
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cm.log 2>&1 && make -C build-gpu -j16 > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 600; ctest -R cuda_blas_load --output-on-failure) > $OUT/ctest_gpu_mend.log 2>&1
grep -E "Test +#|tests passed|tests failed" $OUT/ctest_gpu_mend.log
