#!/bin/bash
# session 18 call 4: streamed rows, the deferred assign pass run chunk by chunk inside the statistics
# pass (rules none/huber) vs HEAD 70ec152 (.gpu-src/base.tar): ctest cuda_kernels + gpu_backend;
# gpu_stream_bench 8M x 128 x 1024 (new: with the iteration); gpu_stream=on jobs A/B (ms/iteration,
# wall, same index): 4M x 128 fp16 none, 16M x 128 fp16 none, 1M x 128 tf32 huber, 1M x 128 fp16 trim.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base
(cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j6 vecanneal > /tmp/bb.log 2>&1) &
BP=$!
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmn.log 2>&1 && make -C build-gpu -j12 > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; tail -30 /tmp/bn.log; exit 1; }
wait $BP || { tail -20 /tmp/bb.log; exit 1; }
echo "builds $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -R "cuda_kernels|gpu_backend" --output-on-failure --timeout 600) > $OUT/ctest_gpu.log 2>&1
grep -E "Test +#|tests passed|tests failed|FAIL" $OUT/ctest_gpu.log | head -24
build-gpu/test_cuda_kernels 2>&1 | grep -E "owed|FAIL" | head -12 | tee $OUT/owed.txt
echo "ctest $(( $(date +%s) - T0 )) s"
build-gpu/gpu_stream_bench 8000000 128 1024 256 5 2>&1 | grep -v "^csv:" | tee $OUT/gpu_stream_bench.txt
N=build-gpu/vecanneal; O=/tmp/base/bb/vecanneal
mpirun -n 16 $N gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
mpirun -n 16 $N gen --out /tmp/g4.h5 --n 4000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
mpirun -n 16 $N gen --out /tmp/g16.h5 --n 16000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
echo "build-gpu/gen done $(( $(date +%s) - T0 )) s"
for case in "l2big /tmp/g4.h5 fp16 none 3" "l2huge /tmp/g16.h5 fp16 none 2" "huber /tmp/g1.h5 tf32 huber 3" "trim /tmp/g1.h5 fp16 trim 2"; do
  set -- $case
  for rep in $(seq $5); do for v in base new; do
    b=$N; [ $v = base ] && b=$O
    s=$(date +%s.%N); $b compress --input $2:/train --anchors 1024 --backend cuda --set precision=$3 --set robust=$4 --set gpu_stream=on --set max_iter=20 --set tol=0 --set min_changes=0 --set init=random --set threads=16 --set progress_every=0 --metrics /tmp/m_$v.json --out /tmp/d_$v.h5 > /tmp/j_$v.log 2>&1; rc=$?; e=$(date +%s.%N)
    echo "$1 $v rc $rc: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(python3 -c "import json;m=json.load(open('/tmp/m_$v.json'));print('%.3f ms/iteration, copied %.1f GB/rank' % (m['ms_per_iteration'], m.get('gpu_stream',{}).get('copied_bytes_per_rank',0)/1e9))" 2>&1 | tail -1) | $(grep -o 'energy [0-9.]*' /tmp/j_$v.log | tail -1)" | tee -a $OUT/owed_ab.txt
  done; done
  echo "$1: $(build-gpu/h5tool close /tmp/d_new.h5 /tmp/d_base.h5 0 2>&1 | tr '\n' ' ')" | tee -a $OUT/owed_ab.txt
done
echo "all $(( $(date +%s) - T0 )) s"
