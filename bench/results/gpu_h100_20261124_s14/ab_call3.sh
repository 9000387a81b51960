#!/bin/bash
# session 14 call 3: argmin kernel with three warpgroups and the rows in shared memory (VA_WG3=1) vs two (VA_WG3=0) vs HEAD
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
B=build-gpu; T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar --exclude=./build-gpu --exclude=./.gpu-model -cf - . | tar -xf - -C /tmp/base
for f in .gpu-src/base/*; do cp $f /tmp/base/src/kernels/$(basename $f); done
( cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j8 vecanneal gpu_kernels_bench > /tmp/bb.log 2>&1 ) &
BP=$!
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > $OUT/cmake.log 2>&1 && make -C $B -j10 > $OUT/build.log 2>&1 ) || { tail -30 $OUT/build.log; exit 1; }
wait $BP || tail -20 /tmp/bb.log
echo "builds $(( $(date +%s) - T0 )) s"
for v in 1 0; do ( cd $B && VA_WG3=$v timeout 200 ctest -R "^cuda_kernels$" --output-on-failure > /tmp/ct$v.log 2>&1; echo "WG3=$v $(grep -E 'tests passed|tests failed' /tmp/ct$v.log)"; grep -E "FAIL|mismatch|differ" /tmp/ct$v.log | head -5 ); done
cp /tmp/ct1.log $OUT/ctest_wg3.log
echo "ctest $(( $(date +%s) - T0 )) s"
for rep in a b; do
  /tmp/base/bb/gpu_kernels_bench 1000000 128 1024 20 > /tmp/ko.log 2>&1
  for v in 0 1; do VA_WG3=$v $B/gpu_kernels_bench 1000000 128 1024 20 > /tmp/k$v.log 2>&1; done
  for f in ko k0 k1; do echo "$f ($rep):"; grep -E "^loop iteration|argmin kernel alone (fp16|bf16|tf32) wgmma" /tmp/$f.log | head -6; done
done
cp /tmp/k1.log $OUT/gpu_kernels_wg3.log
echo "bench $(( $(date +%s) - T0 )) s"
mpirun -n 16 $B/vecanneal gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
for prec in fp16 bf16; do
  /tmp/base/bb/vecanneal compress --input /tmp/g1.h5:/train --out /tmp/old.h5 --backend cuda --set k=1024 --set precision=$prec --set max_iter=20 --set tol=0 --set min_changes=0 --set progress_every=0 --metrics /tmp/mo.json > /tmp/o.log 2>&1 || tail -3 /tmp/o.log
  VA_WG3=1 $B/vecanneal compress --input /tmp/g1.h5:/train --out /tmp/new.h5 --backend cuda --set k=1024 --set precision=$prec --set max_iter=20 --set tol=0 --set min_changes=0 --set progress_every=0 --metrics /tmp/mn.json > /tmp/n.log 2>&1 || tail -3 /tmp/n.log
  $B/h5tool close /tmp/new.h5 /tmp/old.h5 0 > /tmp/close.txt 2>&1; rc=$?
  echo "$prec: identical rc $rc ($(head -c 100 /tmp/close.txt | tr '\n' ' ')); ms/it old $(python3 -c "import json; print(json.load(open('/tmp/mo.json'))['ms_per_iteration'])") new $(python3 -c "import json; print(json.load(open('/tmp/mn.json'))['ms_per_iteration'])")"
done
echo "all $(( $(date +%s) - T0 )) s"
