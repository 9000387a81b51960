#!/bin/bash
# session 14 review mends: the argmin kernel's row offsets derived once, cp_async4 in cuda_async.cuh; ctest -L gpu, indexes vs HEAD, kernel alone
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
B=build-gpu; T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar --exclude=./build-gpu --exclude=./.gpu-model -cf - . | tar -xf - -C /tmp/base
for f in .gpu-src/base/*; do cp $f /tmp/base/src/kernels/$(basename $f); done
( cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j6 vecanneal gpu_kernels_bench > /tmp/bb.log 2>&1 ) &
BP=$!
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmake.log 2>&1 && make -C $B -j10 > /tmp/build.log 2>&1 ) || { tail -30 /tmp/build.log; exit 1; }
wait $BP || tail -20 /tmp/bb.log
echo "builds $(( $(date +%s) - T0 )) s"
( cd $B && timeout 300 ctest -L gpu --output-on-failure > $OUT/ctest_gpu.log 2>&1; grep -E "tests passed|tests failed|Passed|Skipped|\*\*\*" $OUT/ctest_gpu.log | head -8 )
mpirun -n 16 $B/vecanneal gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
for prec in fp16 tf32; do
  /tmp/base/bb/vecanneal compress --input /tmp/g1.h5:/train --out /tmp/old.h5 --backend cuda --set k=1024 --set precision=$prec --set max_iter=20 --set tol=0 --set min_changes=0 --set progress_every=0 > /tmp/o.log 2>&1 || tail -3 /tmp/o.log
  $B/vecanneal compress --input /tmp/g1.h5:/train --out /tmp/new.h5 --backend cuda --set k=1024 --set precision=$prec --set max_iter=20 --set tol=0 --set min_changes=0 --set progress_every=0 > /tmp/n.log 2>&1 || tail -3 /tmp/n.log
  $B/h5tool close /tmp/new.h5 /tmp/old.h5 0 > /tmp/close.txt 2>&1; echo "$prec: identical rc $? ($(head -c 90 /tmp/close.txt | tr '\n' ' '))"
done | tee $OUT/identity.txt
for f in /tmp/base/bb $B; do $f/gpu_kernels_bench 1000000 128 1024 20 > /tmp/k.log 2>&1; echo "$f: $(grep -E "^loop iteration|argmin kernel alone (fp16|bf16|tf32) wgmma" /tmp/k.log | head -6 | sed -E 's/ +median +([0-9.]+) ms.*/ \1/; s/loop iteration //; s/on the device \(none\)//; s/  argmin kernel alone //' | tr '\n' ';')"; done | tee $OUT/ab.txt
echo "all $(( $(date +%s) - T0 )) s"
