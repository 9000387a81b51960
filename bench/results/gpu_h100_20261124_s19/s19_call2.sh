#!/bin/bash
# session 19 call 2: streamed fp16/bf16 rows kept as 16-bit rows in the pinned copy (working tree) vs
# HEAD c196764 (.gpu-src/base.tar): ctest cuda_kernels + gpu_backend; gpu_stream_bench 8M x 128 x 1024;
# gpu_stream=on jobs A/B (ms/iteration, wall, start-up, bytes copied, the same index to the bit).
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
 mpirun -n 16 $N gen --out /tmp/g16.h5 --n 16000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null) &
GP=$!
(cd build-gpu && ctest -R "cuda_kernels|gpu_backend" --output-on-failure --timeout 600) > $OUT/ctest_call2.log 2>&1
grep -E "Test +#|tests passed|tests failed|FAIL" $OUT/ctest_call2.log | head -24
build-gpu/test_cuda_kernels 2>&1 | grep -E "streamed.*copied|FAIL" | head -12 | tee $OUT/stream_bytes_call2.txt
echo "ctest $(( $(date +%s) - T0 )) s"
build-gpu/gpu_stream_bench 8000000 128 1024 256 5 2>&1 | grep -v "^csv:" | tee $OUT/gpu_stream_bench_call2.txt
wait $GP
echo "gen done $(( $(date +%s) - T0 )) s"
job() { # name file prec reps extra...
  local name=$1 file=$2 prec=$3 reps=$4; shift 4
  for rep in $(seq $reps); do for v in base new; do
    b=$N; [ $v = base ] && b=$O
    s=$(date +%s.%N); $b compress --input $file:/train --backend cuda --set precision=$prec --set gpu_stream=on --set max_iter=20 --set tol=0 --set min_changes=0 --set threads=16 --set progress_every=0 --set init=random "$@" --metrics /tmp/m_$v.json --out /tmp/d_$v.h5 > /tmp/j_$v.log 2>&1; rc=$?; e=$(date +%s.%N)
    echo "$name $v rc $rc: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(python3 -c "import json;m=json.load(open('/tmp/m_$v.json'));print('%.3f ms/iteration, copied %.1f GB/rank' % (m['ms_per_iteration'], m['gpu_stream']['copied_bytes_per_rank']/1e9))" 2>&1 | tail -1) | $(grep -o 'read [0-9.]* s, init [0-9.]* s (backend [0-9.]* s' /tmp/j_$v.log) | $(grep -o 'energy [0-9.]*' /tmp/j_$v.log | tail -1)" | tee -a $OUT/stream_ab_call2.txt
    [ $rc = 0 ] || tail -5 /tmp/j_$v.log
  done; done
  echo "$name: $(build-gpu/h5tool close /tmp/d_new.h5 /tmp/d_base.h5 0 2>&1 | tr '\n' ' ')" | tee -a $OUT/stream_ab_call2.txt
}
job fp16_4M /tmp/g4.h5 fp16 2 --anchors 1024
job bf16_4M /tmp/g4.h5 bf16 1 --anchors 1024
job fp16_16M /tmp/g16.h5 fp16 2 --anchors 1024
job fp16_4M_cos /tmp/g4.h5 fp16 1 --anchors 1024 --set metric=cosine
job fp16_1M_trim /tmp/g1.h5 fp16 1 --anchors 1024 --set robust=trim --set gpu_stream_chunk_mb=64
job tf32_4M /tmp/g4.h5 tf32 1 --anchors 1024
echo "all $(( $(date +%s) - T0 )) s"
