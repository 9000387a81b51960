#!/bin/bash
# session 12 final 2 (wgmma groups): build, ctest -L gpu, kernel bench, iterations, peers at 1M and 8M
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
B=build-gpu
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > $OUT/cmake.log 2>&1 && make -C $B -j16 > $OUT/build.log 2>&1 ) || { tail -30 $OUT/build.log; exit 1; }
( cd $B && timeout 400 ctest -L gpu --output-on-failure -j1 > $OUT/ctest_gpu_final.log 2>&1; grep -E "tests passed|Passed|Skipped|Failed" $OUT/ctest_gpu_final.log )
grep -E "farthest with k|replaced" $OUT/ctest_gpu_final.log | head -3
$B/gpu_kernels_bench 1000000 128 1024 20 > $OUT/gpu_kernels_1M.log 2>&1; grep -E "^stats .*sorted|^loop iteration|^farthest|argmin kernel alone (fp16|bf16|tf32) wgmma" $OUT/gpu_kernels_1M.log | head -20
mpirun -n 16 $B/vecanneal gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
for prec in fp16 bf16; do
  $B/vecanneal compress --input /tmp/g1.h5:/train --anchors 1024 --out /tmp/x.h5 --backend cuda --set precision=$prec --set init=random --set max_iter=20 --set tol=0 --set min_changes=0 --set lr=1 --set T0=1e9 --set cooling_rate=0 --set progress_every=1 --metrics /tmp/m_$prec.json > $OUT/iterations_1M_$prec.log 2>&1
  awk '$1 ~ /^[0-9]+$/ && NF >= 7 {print $1, $NF}' $OUT/iterations_1M_$prec.log | tr '\n' ' '; echo
  grep -E "^done" $OUT/iterations_1M_$prec.log
done
rm -f /tmp/g1.h5
ONLY_PEERS=1 BIG=1 OUT=$OUT/peers bash bench/gpu_bench.sh 2>&1 | tail -26
cp $OUT/peers/gpu_peers_1M.csv $OUT/peers/gpu_peers_8M.csv $OUT/ && rm -rf $OUT/peers $OUT/cmake.log $OUT/build.log
