#!/bin/bash
# session 19 call 4: raw reads with 1 MiB pieces and the NaN/Inf check on the rank's threads (h5io.c;
# working tree) vs HEAD 02d1719 (.gpu-src/base.tar): test_read on 1 and 3 ranks; compress jobs A/B
# (read phase, wall, the same index to the bit): 16M x 128 fp16 resident (read into pinned staging),
# 16M x 128 fp16 streamed (read into the pinned copy), 4M x 128 on the CPU backend (read into the
# host shard). The files were just written: reads from the page cache.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base
(cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j6 vecanneal > /tmp/bb.log 2>&1) &
BP=$!
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmn.log 2>&1 && make -C build-gpu -j12 vecanneal test_read h5tool > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; tail -30 /tmp/bn.log; exit 1; }
wait $BP || { tail -20 /tmp/bb.log; exit 1; }
echo "builds $(( $(date +%s) - T0 )) s"
N=build-gpu/vecanneal; O=/tmp/base/bb/vecanneal
(python3 -c "import h5py,numpy as np; r=np.random.default_rng(1); [h5py.File(f,'w').create_dataset('train', data=r.standard_normal((n,128),dtype=np.float32)) for f,n in (('/tmp/g4.h5',4000000),('/tmp/g16.h5',16000000))]" || { mpirun -n 8 $N gen --out /tmp/g4.h5 --n 4000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
 mpirun -n 16 $N gen --out /tmp/g16.h5 --n 16000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null; }) &
GP=$!
for p in 1 3; do mpirun -n $p build-gpu/test_read 2>&1 | tail -6; done | tee $OUT/test_read_call4.txt
wait $GP
echo "gen done $(( $(date +%s) - T0 )) s"
job() { # name file reps extra...
  local name=$1 file=$2 reps=$3; shift 3
  for rep in $(seq $reps); do for v in base new; do
    b=$N; [ $v = base ] && b=$O
    s=$(date +%s.%N); $b compress --input $file:/train --anchors 1024 --set max_iter=10 --set tol=0 --set min_changes=0 --set threads=16 --set progress_every=0 --set init=random "$@" --metrics /tmp/m_$v.json --out /tmp/d_$v.h5 > /tmp/j_$v.log 2>&1; rc=$?; e=$(date +%s.%N)
    echo "$name $v rc $rc: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(grep -o 'read [0-9.]* s, init [0-9.]* s' /tmp/j_$v.log) | $(python3 -c "import json;m=json.load(open('/tmp/m_$v.json'));print('peak RSS %.0f MiB' % (m['peak_rss_bytes']['max']/2**20))") | $(grep -o 'energy [0-9.]*' /tmp/j_$v.log | tail -1)" | tee -a $OUT/read_ab_call4.txt
    [ $rc = 0 ] || tail -5 /tmp/j_$v.log
  done; done
  echo "$name: $(build-gpu/h5tool close /tmp/d_new.h5 /tmp/d_base.h5 0 2>&1 | tr '\n' ' ')" | tee -a $OUT/read_ab_call4.txt
}
job fp16_16M_resident /tmp/g16.h5 3 --backend cuda --set precision=fp16
job fp16_16M_streamed /tmp/g16.h5 2 --backend cuda --set precision=fp16 --set gpu_stream=on
job cpu_4M /tmp/g4.h5 2 --backend cpu --set max_iter=3
echo "all $(( $(date +%s) - T0 )) s"
