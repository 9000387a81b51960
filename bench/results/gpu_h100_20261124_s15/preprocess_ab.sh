#!/bin/bash
# session 15 call 4: the final code (working tree) vs 2051353 (.gpu-src/base.tar = git archive 2051353: before the preprocess change):
# ctest -L gpu + cuda_blas_load; 1M x 128 x 1024 fp16 whole job A/B (read, init, wall) at 16 and 1 threads;
# the prototype's large case 10 x cuda / cpu / auto
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base
(cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j6 vecanneal > /tmp/bb.log 2>&1) &
BP=$!
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j12 > /tmp/bn.log 2>&1) || { tail -30 /tmp/bn.log; exit 1; }
wait $BP || { tail -20 /tmp/bb.log; exit 1; }
echo "builds $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 600; ctest -R cuda_blas_load --output-on-failure) > $OUT/ctest_gpu.log 2>&1
grep -E "Test +#|tests passed|tests failed" $OUT/ctest_gpu.log | head -20
echo "ctest $(( $(date +%s) - T0 )) s"
N=build-gpu/vecanneal; O=/tmp/base/bb/vecanneal
mpirun -n 16 $N gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
for th in 16 1; do for rep in 1 2 3; do for v in base new; do
  b=$N; [ $v = base ] && b=$O
  s=$(date +%s.%N); $b compress --input /tmp/g1.h5:/train --anchors 1024 --backend cuda --set precision=fp16 --set max_iter=20 --set tol=0 --set min_changes=0 --set init=random --set threads=$th --set progress_every=0 --out /tmp/j_$v.h5 > /tmp/j.log 2>&1; e=$(date +%s.%N)
  echo "1M fp16 $v threads $th: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(grep -E '^read' /tmp/j.log | cut -c1-90) | $(grep -o 'energy [0-9.]*' /tmp/j.log | tail -1)" | tee -a $OUT/preprocess_ab.txt
done; done; done
build-gpu/h5tool close /tmp/j_new.h5 /tmp/j_base.h5 0 | tail -2
$N gen --kind vlc-demo --n 10000 --d 128 --out /tmp/demo.h5 > /dev/null
for be in cuda cpu auto; do t=""; for rep in 1 2 3 4 5 6 7 8 9 10; do
  s=$(date +%s.%N); $N compress --config configs/vlc-demo-large.ini --input /tmp/demo.h5:/train --out /tmp/p_$be.h5 --backend $be --set progress_every=0 --set threads=16 > /tmp/p.log 2>&1; e=$(date +%s.%N)
  t="$t $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}')"; done
  echo "parity case $be:$t | $(grep -o 'energy [0-9.]*' /tmp/p.log | tail -1)" | tee -a $OUT/parity_wall.txt
done
build-gpu/h5tool close /tmp/p_cuda.h5 /tmp/p_cpu.h5 0 | tail -1
echo "all $(( $(date +%s) - T0 )) s"
