#!/bin/bash
# session 14 final (H100): ctest -L gpu, indexes vs the three-warpgroup kernel without prefetch (base: git dec9a2f), peers at 1M, device share, tf32 kernel old vs new
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
R=$OUT; T0=$(date +%s); B=build-gpu
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar --exclude=./build-gpu --exclude=./.gpu-model -cf - . | tar -xf - -C /tmp/base
for f in .gpu-src/base/*; do cp $f /tmp/base/src/kernels/$(basename $f); done
( cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j6 vecanneal gpu_kernels_bench > /tmp/bb.log 2>&1 ) &
BP=$!
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmake.log 2>&1 && make -C $B -j10 > /tmp/build.log 2>&1 ) || { tail -30 /tmp/build.log; exit 1; }
wait $BP || tail -20 /tmp/bb.log
echo "builds $(( $(date +%s) - T0 )) s"
( cd $B && timeout 300 ctest -L gpu --output-on-failure > $R/ctest_gpu.log 2>&1; grep -E "tests passed|tests failed|Passed|Skipped|\*\*\*" $R/ctest_gpu.log | head -8 )
echo "ctest $(( $(date +%s) - T0 )) s"
mpirun -n 16 $B/vecanneal gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
for prec in fp16 bf16 tf32; do
  /tmp/base/bb/vecanneal compress --input /tmp/g1.h5:/train --out /tmp/old.h5 --backend cuda --set k=1024 --set precision=$prec --set max_iter=20 --set tol=0 --set min_changes=0 --set progress_every=0 --metrics /tmp/mo.json > /tmp/o.log 2>&1 || tail -3 /tmp/o.log
  $B/vecanneal compress --input /tmp/g1.h5:/train --out /tmp/new.h5 --backend cuda --set k=1024 --set precision=$prec --set max_iter=20 --set tol=0 --set min_changes=0 --set progress_every=0 --metrics /tmp/mn.json > /tmp/n.log 2>&1 || tail -3 /tmp/n.log
  $B/h5tool close /tmp/new.h5 /tmp/old.h5 0 > /tmp/close.txt 2>&1; rc=$?
  echo "$prec: identical rc $rc ($(head -c 100 /tmp/close.txt | tr '\n' ' ')); ms/it old $(python3 -c "import json; print(json.load(open('/tmp/mo.json'))['ms_per_iteration'])") new $(python3 -c "import json; print(json.load(open('/tmp/mn.json'))['ms_per_iteration'])")"
done | tee $R/identity.txt
mkdir -p /tmp/gb; OUT=/tmp/gb ONLY_PEERS=1 BIG=0 bash bench/gpu_bench.sh > $R/gpu_bench.log 2>&1; echo "bench rc $?"
grep -v "^\s*$" $R/gpu_bench.log | tail -14; cp /tmp/gb/gpu_peers_1M.csv $R/
$B/gpu_kernels_bench 1000000 128 1024 20 > /tmp/k.log 2>&1; grep -E "^loop iteration|argmin kernel alone (fp16|bf16|tf32) wgmma" /tmp/k.log | head -6 | tee $R/device_share.txt
echo "all $(( $(date +%s) - T0 )) s"
for rep in a b; do
  /tmp/base/bb/gpu_kernels_bench 1000000 128 1024 20 > /tmp/ko.log 2>&1; $B/gpu_kernels_bench 1000000 128 1024 20 > /tmp/kn.log 2>&1
  for f in ko kn; do echo "$f ($rep): $(grep -E "^loop iteration|argmin kernel alone (fp16|bf16|tf32) wgmma" /tmp/$f.log | head -6 | sed -E 's/ +median +([0-9.]+) ms.*/ \1/; s/loop iteration //; s/on the device \(none\)//; s/  argmin kernel alone //' | tr '\n' ';')"; done
done | tee $R/ab_base_new.txt
echo "end $(( $(date +%s) - T0 )) s"
