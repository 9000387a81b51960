#!/bin/bash
# session 12 final: build, ctest -L gpu, parity timings, kernel bench, iterations, peers at 1M and 8M
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
B=build-gpu
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > $OUT/cmake.log 2>&1 && make -C $B -j16 > $OUT/build.log 2>&1 ) || { tail -30 $OUT/build.log; exit 1; }
( cd $B && timeout 400 ctest -L gpu --output-on-failure -j1 > $OUT/ctest_gpu_final.log 2>&1; grep -E "tests passed|Passed|Skipped|Failed" $OUT/ctest_gpu_final.log )
grep -E "farthest with k|replaced" $OUT/ctest_gpu_final.log | head -3
$B/vecanneal gen --kind vlc-demo --n 10000 --d 128 --out /tmp/demo.h5 > /dev/null
for be in cuda cpu auto; do
  n=20; [ $be != cuda ] && n=8
  : > /tmp/walls
  for i in $(seq 1 $n); do
    s=$(date +%s.%N)
    $B/vecanneal compress --config configs/vlc-demo-large.ini --input /tmp/demo.h5:/train --out /tmp/o_$be.h5 --backend $be --set threads=16 --set progress_every=0 > /tmp/p.log 2>&1 || echo "FAILED rc $?"
    e=$(date +%s.%N); awk -v a=$s -v b=$e 'BEGIN{printf "%.3f\n", b-a}' >> /tmp/walls
  done
  echo "parity $be: $n runs, wall s: $(sort -n /tmp/walls | awk '{a[NR]=$1} END{printf "min %.3f median %.3f max %.3f", a[1], a[int((NR+1)/2)], a[NR]}') ($(awk '{s+=$1} END{printf "mean %.3f", s/NR}' /tmp/walls)); $(grep -o 'energy [0-9.e-]*' /tmp/p.log | tail -1)"
done
$B/h5tool close /tmp/o_cuda.h5 /tmp/o_cpu.h5 0 && echo "parity: cuda index == cpu index"
$B/gpu_kernels_bench 1000000 128 1024 20 > $OUT/gpu_kernels_1M.log 2>&1; grep -E "^stats .*sorted|^loop iteration|^farthest|argmin kernel alone (fp16|bf16|tf32) wgmma" $OUT/gpu_kernels_1M.log | head -20
mpirun -n 16 $B/vecanneal gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
for prec in fp16 bf16; do
  $B/vecanneal compress --input /tmp/g1.h5:/train --anchors 1024 --out /tmp/x.h5 --backend cuda --set precision=$prec --set init=random --set max_iter=20 --set tol=0 --set min_changes=0 --set lr=1 --set T0=1e9 --set cooling_rate=0 --set progress_every=1 --metrics $OUT/m_$prec.json > $OUT/iterations_1M_$prec.log 2>&1
  awk '$1 ~ /^[0-9]+$/ && NF >= 7 {print $1, $NF}' $OUT/iterations_1M_$prec.log | tr '\n' ' '; echo
  grep -E "^done" $OUT/iterations_1M_$prec.log
done
rm -f /tmp/g1.h5
ONLY_PEERS=1 BIG=1 OUT=$OUT/peers bash bench/gpu_bench.sh 2>&1 | tail -26
