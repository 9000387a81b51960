#!/bin/bash
# session 21, call 6 (review mend, git a995e9b: the rows' shared-memory load and L2 prefetch shared by both
# wgmma kernels): `ctest -L gpu` (.gpu-model carried, model.safetensors linked to the fp16 file);
# gpu_kernels_bench at d 128 (the tiled kernel, rows in shared memory) and 384; then the peers at 1M and
# 8M x 128 x 1024 (bench/gpu_bench.sh ONLY_PEERS=1; .whl/peers carried).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
ln -sf model-fp16.safetensors .gpu-model/model.safetensors
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep -E "error" /tmp/bn.log | head; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
(cd build-gpu && timeout 240 ctest -L gpu --output-on-failure --timeout 200) > $OUT/ctest_mend.log 2>&1
grep -E "tests passed|tests failed|Test +#" $OUT/ctest_mend.log
echo "ctest $(( $(date +%s) - T0 )) s"
for d in 128 384; do
  timeout 60 build-gpu/gpu_kernels_bench 1000000 $d 1024 10 > $OUT/kernels_mend_d$d.txt 2>&1; echo "d $d rc $?"
  grep -E "^assign (tf32|fp16) fused wgmma|argmin kernel alone (tf32|fp16) wgmma" $OUT/kernels_mend_d$d.txt | grep -v cosine | head -4
done
ONLY_PEERS=1 OUT=/tmp/peers BUILD_DIR=build-gpu timeout $(( 585 - ($(date +%s) - T0) )) bash bench/gpu_bench.sh > $OUT/gpu_bench_peers.log 2>&1; echo "peers rc $?"; tail -26 $OUT/gpu_bench_peers.log
echo "all $(( $(date +%s) - T0 )) s"
