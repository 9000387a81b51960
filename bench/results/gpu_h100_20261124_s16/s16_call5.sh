#!/bin/bash
# session 16 call 5: kmeans|| (the default init) on a 1M x 128 x 1024 fp16 GPU job: HEAD (.gpu-src/base.tar) vs the
# working tree (weighted k-means++ trials on the rank's threads); the same index expected.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base
(cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j6 vecanneal > /tmp/bb.log 2>&1) &
BP=$!
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j12 vecanneal h5tool > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; tail -30 /tmp/bn.log; exit 1; }
wait $BP || { tail -20 /tmp/bb.log; exit 1; }
echo "builds $(( $(date +%s) - T0 )) s"
N=build-gpu/vecanneal; O=/tmp/base/bb/vecanneal
mpirun -n 16 $N gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
for th in 16 4; do for rep in 1 2 3; do for v in base new; do
  b=$N; [ $v = base ] && b=$O
  s=$(date +%s.%N); $b compress --input /tmp/g1.h5:/train --anchors 1024 --backend cuda --set precision=fp16 --set max_iter=20 --set tol=0 --set min_changes=0 --set threads=$th --set progress_every=0 --out /tmp/k_$v.h5 > /tmp/j.log 2>&1; e=$(date +%s.%N)
  echo "1M fp16 kmeans|| $v threads $th: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(grep -E '^read' /tmp/j.log | cut -c1-95) | $(grep -o 'energy [0-9.]*' /tmp/j.log | tail -1)" | tee -a $OUT/kmeanspp_ab.txt
done; done; done
build-gpu/h5tool close /tmp/k_new.h5 /tmp/k_base.h5 0 | tee -a $OUT/kmeanspp_ab.txt
echo "all $(( $(date +%s) - T0 )) s"
