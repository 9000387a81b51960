#!/bin/bash
# session 14 call 7: parity case wall time, base (HEAD~3 argmin kernel) and new alternating, 10 runs each; where the time goes (log)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
B=build-gpu; T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar --exclude=./build-gpu --exclude=./.gpu-model -cf - . | tar -xf - -C /tmp/base
for f in .gpu-src/base/*; do cp $f /tmp/base/src/kernels/$(basename $f); done
( cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j8 vecanneal > /tmp/bb.log 2>&1 ) &
BP=$!
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmake.log 2>&1 && make -C $B -j8 vecanneal > /tmp/build.log 2>&1 ) || { tail -30 /tmp/build.log; exit 1; }
wait $BP || tail -20 /tmp/bb.log
echo "builds $(( $(date +%s) - T0 )) s"
$B/vecanneal gen --kind vlc-demo --n 10000 --d 128 --out /tmp/demo.h5 > /dev/null
for be in cuda cpu; do
  to=""; tn=""
  for rep in 1 2 3 4 5 6 7 8 9 10; do
    s=$(date +%s.%N); /tmp/base/bb/vecanneal compress --config configs/vlc-demo-large.ini --input /tmp/demo.h5:/train --out /tmp/o.h5 --backend $be --set progress_every=0 --set threads=16 --metrics /tmp/mo_$be.json > /tmp/o_$be.log 2>&1; e=$(date +%s.%N)
    to="$to $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}')"
    s=$(date +%s.%N); $B/vecanneal compress --config configs/vlc-demo-large.ini --input /tmp/demo.h5:/train --out /tmp/n.h5 --backend $be --set progress_every=0 --set threads=16 --metrics /tmp/mn_$be.json > /tmp/n_$be.log 2>&1; e=$(date +%s.%N)
    tn="$tn $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}')"
  done
  echo "parity case $be old:$to" | tee -a $OUT/parity_ab.txt
  echo "parity case $be new:$tn" | tee -a $OUT/parity_ab.txt
done
cp /tmp/mn_cuda.json /tmp/n_cuda.log $OUT/
python3 -c "
import json; m=json.load(open('/tmp/mn_cuda.json'))
print({k: v for k, v in m.items() if not isinstance(v, (dict, list))})
for k, v in m.items():
    if isinstance(v, dict): print(k, v)
" | head -30
echo "all $(( $(date +%s) - T0 )) s"
