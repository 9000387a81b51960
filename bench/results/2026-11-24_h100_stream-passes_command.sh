#!/bin/bash
# run 2: streamed (out-of-core) rows read straight into the pinned host copy when d is a
# multiple of 32 (no staging copy; padded rows through one pageable buffer) vs HEAD 39a38a6 (.gpu-src/base.tar): ctest -L gpu + cuda_blas_load;
# gpu_stream=on jobs A/B: 1M x 128 x 1024 fp16 (l2 float32, l2 float16 input, cosine), 300k x 100 x 256
# (padded d) tf32, 4M x 128 x 1024 fp16 l2; resident l2 once; wall, read/init, peak RSS; indexes compared (tolerance 0).
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
grep -E "Test +#|tests passed|tests failed|FAIL|differ|pinned host copy" $OUT/ctest_gpu.log | head -24
echo "ctest $(( $(date +%s) - T0 )) s"
N=build-gpu/vecanneal; O=/tmp/base/bb/vecanneal
mpirun -n 16 $N gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
mpirun -n 16 $N gen --out /tmp/g1h.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 --dtype float16 > /dev/null
mpirun -n 16 $N gen --out /tmp/g1c.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 --distance angular > /dev/null
mpirun -n 16 $N gen --out /tmp/g3.h5 --n 300000 --d 100 --clusters 500 --spread 0.5 > /dev/null
mpirun -n 16 $N gen --out /tmp/g4.h5 --n 4000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
for case in "l2 /tmp/g1.h5 1024 fp16" "l2f16 /tmp/g1h.h5 1024 fp16" "cos /tmp/g1c.h5 1024 fp16" "d100 /tmp/g3.h5 256 tf32" "l2big /tmp/g4.h5 1024 fp16" "res /tmp/g1.h5 1024 fp16"; do
  set -- $case
  for rep in 1 2 3; do for v in base new; do
    b=$N; [ $v = base ] && b=$O
    s=$(date +%s.%N); $b compress --input $2:/train --anchors $3 --backend cuda --set precision=$4 --set gpu_stream=$([ $1 = res ] && echo auto || echo on) --set max_iter=20 --set tol=0 --set min_changes=0 --set init=random --set threads=16 --set progress_every=0 --metrics /tmp/m_$v.json --out /tmp/d_$v.h5 > /tmp/j_$v.log 2>&1; rc=$?; e=$(date +%s.%N)
    echo "$1 $v rc $rc: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(grep -E '^read' /tmp/j_$v.log | cut -c1-100) | $(grep -o 'energy [0-9.]*' /tmp/j_$v.log | tail -1) | rss $(python3 -c "import json;print(round(json.load(open('/tmp/m_$v.json'))['peak_rss_bytes']['max']/2**20))" 2>/dev/null) MiB | $(grep -c 'streamed from pinned' /tmp/j_$v.log) streamed" | tee -a $OUT/stream_ab.txt
  done; done
  echo "$1: $(build-gpu/h5tool close /tmp/d_new.h5 /tmp/d_base.h5 0 2>&1 | tr '\n' ' ') | total_variance base $(build-gpu/h5tool attr /tmp/d_base.h5 total_variance) new $(build-gpu/h5tool attr /tmp/d_new.h5 total_variance)" | tee -a $OUT/stream_ab.txt
done
echo "all $(( $(date +%s) - T0 )) s"
