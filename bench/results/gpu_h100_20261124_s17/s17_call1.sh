#!/bin/bash
# session 17 call 1: working tree (cosine column sums in blocks on host and device, compress --embed's
# hand-over through the direct path, va_comm_ready) vs HEAD 0d1797e (.gpu-src/base.tar): ctest -L gpu +
# cuda_blas_load; 1M x 128 x 1024 fp16 jobs A/B (l2, cosine read straight to the GPU), compress --embed
# x32 corpus on the CUDA backend (vectors kept on the GPU) A/B; indexes compared (tolerance 0).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base
(cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j6 vecanneal > /tmp/bb.log 2>&1) &
BP=$!
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j12 > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; tail -30 /tmp/bn.log; exit 1; }
wait $BP || { tail -20 /tmp/bb.log; exit 1; }
echo "builds $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 600; ctest -R cuda_blas_load --output-on-failure) > $OUT/ctest_gpu.log 2>&1
grep -E "Test +#|tests passed|tests failed|FAIL|differ" $OUT/ctest_gpu.log | head -24
build-gpu/test_cuda_kernels 2>&1 | grep -E "straight|cosine rows|PASS|FAIL" | tee $OUT/cuda_kernels_pre.txt
echo "ctest $(( $(date +%s) - T0 )) s"
N=build-gpu/vecanneal; O=/tmp/base/bb/vecanneal
mpirun -n 16 $N gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
mpirun -n 16 $N gen --out /tmp/g1c.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 --distance angular > /dev/null
W=/tmp/emb; mkdir -p $W; zcat tests/data/embed_corpus.txt.gz > $W/c1.txt
for _ in $(seq 32); do cat $W/c1.txt; done > $W/c32.txt
for case in "l2 --input=/tmp/g1.h5:/train" "cos --input=/tmp/g1c.h5:/train" "embed --embed=$W/c32.txt"; do
  set -- $case
  extra="--anchors 1024"; [ $1 = embed ] && extra="--anchors 256 --embed-model $PWD/.gpu-model"
  for rep in 1 2 3; do for v in base new; do
    b=$N; [ $v = base ] && b=$O
    s=$(date +%s.%N); $b compress ${2%%=*} ${2#*=} $extra --backend cuda --set precision=fp16 --set max_iter=20 --set tol=0 --set min_changes=0 --set init=random --set threads=16 --set progress_every=0 --metrics /tmp/m_$v.json --out /tmp/d_$v.h5 > /tmp/j_$v.log 2>&1; rc=$?; e=$(date +%s.%N)
    echo "$1 $v rc $rc: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(grep -E '^read' /tmp/j_$v.log | cut -c1-100) | $(grep -o 'energy [0-9.]*' /tmp/j_$v.log | tail -1) | $(grep -c 'stayed on the GPU' /tmp/j_$v.log) kept" | tee -a $OUT/ab.txt
  done; done
  echo "$1: $(build-gpu/h5tool close /tmp/d_new.h5 /tmp/d_base.h5 0 2>&1 | tr '\n' ' ') | total_variance base $(build-gpu/h5tool attr /tmp/d_base.h5 total_variance) new $(build-gpu/h5tool attr /tmp/d_new.h5 total_variance)" | tee -a $OUT/ab.txt
done
echo "all $(( $(date +%s) - T0 )) s"
