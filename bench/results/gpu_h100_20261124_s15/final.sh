#!/bin/bash
# session 15 call 5: the final code: ctest -L gpu + cuda_blas_load; the random init A/B against 4635b28
# (.gpu-src/base.tar = git archive 4635b28) in a 1M fp16 job (16 threads), and the 1M peers (gpu_bench.sh, ONLY_PEERS=1, BIG=0)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
rm -rf /tmp/base && mkdir /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base
(cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j6 vecanneal > /tmp/bb.log 2>&1) &
BP=$!
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j12 > /tmp/bn.log 2>&1) || { tail -30 /tmp/bn.log; exit 1; }
wait $BP || { tail -20 /tmp/bb.log; exit 1; }
echo "builds $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 600; ctest -R cuda_blas_load --output-on-failure) > $OUT/ctest_gpu.log 2>&1
grep -E "Test +#|tests passed|tests failed" $OUT/ctest_gpu.log | head -20
N=build-gpu/vecanneal; O=/tmp/base/bb/vecanneal
mpirun -n 16 $N gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
for rep in 1 2 3; do for v in base new; do
  b=$N; [ $v = base ] && b=$O
  s=$(date +%s.%N); $b compress --input /tmp/g1.h5:/train --anchors 1024 --backend cuda --set precision=fp16 --set max_iter=20 --set tol=0 --set min_changes=0 --set init=random --set threads=16 --set progress_every=0 --out /tmp/j_$v.h5 > /tmp/j.log 2>&1; e=$(date +%s.%N)
  echo "1M fp16 $v threads 16: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(grep -E '^read' /tmp/j.log | cut -c1-90) | $(grep -o 'energy [0-9.]*' /tmp/j.log | tail -1)" | tee -a $OUT/random_init_ab.txt
done; done
build-gpu/h5tool same /tmp/j_new.h5 /tmp/j_base.h5 | tail -1
echo "ab $(( $(date +%s) - T0 )) s"
ONLY_PEERS=1 BIG=0 OUT=$OUT/bench BUILD_DIR=build-gpu bash bench/gpu_bench.sh > $OUT/gpu_bench.log 2>&1; tail -14 $OUT/gpu_bench.log
echo "all $(( $(date +%s) - T0 )) s"
