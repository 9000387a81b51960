#!/bin/bash
# session 19 call 1: fp16/bf16 rows resident in 16 bits alone (working tree) vs HEAD 2861d09
# (.gpu-src/base.tar): ctest cuda_kernels + gpu_backend; jobs A/B (ms/iteration, wall, GPU memory, the
# same index to the bit) over every path that reads rows: fused fp16/bf16/tf32, cosine, farthest init,
# trim (r kernel), huber, streamed, the GEMM path (d 520), the DIRECT path (small).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base
(cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j6 vecanneal > /tmp/bb.log 2>&1) &
BP=$!
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j12 > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; tail -30 /tmp/bn.log; exit 1; }
wait $BP || { tail -20 /tmp/bb.log; exit 1; }
echo "builds $(( $(date +%s) - T0 )) s"
N=build-gpu/vecanneal; O=/tmp/base/bb/vecanneal
(mpirun -n 8 $N gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
 mpirun -n 8 $N gen --out /tmp/g4.h5 --n 4000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
 mpirun -n 8 $N gen --out /tmp/gw.h5 --n 200000 --d 520 --clusters 300 --spread 0.5 > /dev/null
 mpirun -n 2 $N gen --out /tmp/gs.h5 --n 10000 --d 128 --clusters 50 --spread 0.5 > /dev/null) &
GP=$!
(cd build-gpu && ctest -R "cuda_kernels|gpu_backend" --output-on-failure --timeout 600) > $OUT/ctest_call1.log 2>&1
grep -E "Test +#|tests passed|tests failed|FAIL|GPU memory" $OUT/ctest_call1.log | head -24
echo "ctest $(( $(date +%s) - T0 )) s"
wait $GP
peak() { # max memory.used (MiB) while the command runs
  local f=/tmp/smi.$$; : > $f
  ( while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >> $f; sleep 0.05; done ) & local sp=$!
  "$@"; local rc=$?
  kill $sp; wait $sp 2>/dev/null
  echo "smi_peak_mib $(sort -n $f | tail -1)" >> /tmp/peak.txt
  return $rc
}
job() { # name file prec reps extra...
  local name=$1 file=$2 prec=$3 reps=$4; shift 4
  for rep in $(seq $reps); do for v in base new; do
    b=$N; [ $v = base ] && b=$O
    : > /tmp/peak.txt
    s=$(date +%s.%N); peak $b compress --input $file:/train --backend cuda --set precision=$prec --set max_iter=20 --set tol=0 --set min_changes=0 --set threads=16 --set progress_every=0 --set gpu_min_work=0 "$@" --metrics /tmp/m_$v.json --out /tmp/d_$v.h5 > /tmp/j_$v.log 2>&1; rc=$?; e=$(date +%s.%N)
    echo "$name $v rc $rc: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(python3 -c "import json;m=json.load(open('/tmp/m_$v.json'));g=m.get('gpu_memory_bytes');print('%.3f ms/iteration' % m['ms_per_iteration'] + (' | gpu loop %.0f MiB peak %.0f MiB' % (g['loop']['max']/2**20, g['peak']['max']/2**20) if g else ''))" 2>&1 | tail -1) | $(cat /tmp/peak.txt) | $(grep -o 'energy [0-9.]*' /tmp/j_$v.log | tail -1)" | tee -a $OUT/ab_call1.txt
    [ $rc = 0 ] || tail -5 /tmp/j_$v.log
  done; done
  echo "$name: $(build-gpu/h5tool close /tmp/d_new.h5 /tmp/d_base.h5 0 2>&1 | tr '\n' ' ')" | tee -a $OUT/ab_call1.txt
}
job fp16_1M /tmp/g1.h5 fp16 3 --anchors 1024 --set init=random
job bf16_1M /tmp/g1.h5 bf16 2 --anchors 1024 --set init=random
job tf32_1M /tmp/g1.h5 tf32 1 --anchors 1024 --set init=random
job fp16_4M /tmp/g4.h5 fp16 2 --anchors 1024 --set init=random
job fp16_cos /tmp/g1.h5 fp16 1 --anchors 1024 --set init=random --set metric=cosine
job fp16_far /tmp/g1.h5 fp16 1 --anchors 256 --set init=farthest
job fp16_kmpp /tmp/g1.h5 fp16 1 --anchors 1024
job fp16_trim /tmp/g1.h5 fp16 2 --anchors 1024 --set init=random --set robust=trim
job bf16_huber /tmp/g1.h5 bf16 1 --anchors 1024 --set init=random --set robust=huber
job fp16_maint /tmp/g1.h5 fp16 1 --anchors 1024 --set init=random --set maintenance_interval=5 --set k_min=512 --set k_max=2048 --set split_count_factor=1.5
job fp16_stream /tmp/g1.h5 fp16 1 --anchors 1024 --set init=random --set gpu_stream=on
job fp16_gemm /tmp/gw.h5 fp16 1 --anchors 256 --set init=random
job fp16_small /tmp/gs.h5 fp16 1 --anchors 256 --set init=random
echo "all $(( $(date +%s) - T0 )) s"
