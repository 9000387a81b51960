#!/bin/bash
# session 21, call 5 (final code): the long-row kernel with its tiles' biases in shared-memory slots and
# at most 6 stages. `ctest -L gpu` (.gpu-model carried, model.safetensors linked to the fp16 file for
# compress --embed's default weights); compress end to end against c15d0df (.gpu-src/base.tar), 1M rows,
# k 1024, 20 iterations; gpu_kernels_bench (n 1M, k 1024) at d 192, 384, 768.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
ln -sf model-fp16.safetensors .gpu-model/model.safetensors
(mkdir -p /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base && cmake -S /tmp/base -B /tmp/base/b -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/b -j4 vecanneal > /tmp/bb.log 2>&1; echo "base build rc $?") &
BP=$!
(python3 -c "
import h5py,numpy as np
r=np.random.default_rng(1)
for d in (384, 192, 768):
    c=r.standard_normal((5000,d)).astype(np.float32)*2
    h5py.File('/tmp/e%d.h5'%d,'w').create_dataset('train', data=(c[r.integers(0,5000,1000000)]+r.standard_normal((1000000,d),dtype=np.float32)).astype(np.float32))
") &
GP=$!
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j12 > /tmp/bn.log 2>&1) || { grep -E "error" /tmp/bn.log | head; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
(cd build-gpu && timeout 240 ctest -L gpu --output-on-failure --timeout 200) > $OUT/ctest_final.log 2>&1
grep -E "tests passed|tests failed|Test +#" $OUT/ctest_final.log
echo "ctest $(( $(date +%s) - T0 )) s"
wait $BP; wait $GP
for dp in "384 tf32" "192 tf32" "768 fp16"; do set -- $dp; d=$1; p=$2; for b in base new; do
  B=$([ $b = base ] && echo /tmp/base/b/vecanneal || echo build-gpu/vecanneal)
  timeout 40 $B compress --input /tmp/e$d.h5:/train --anchors 1024 --backend cuda --set precision=$p --set max_iter=20 --set tol=0 --set min_changes=0 --set init=random --set progress_every=0 --set threads=16 --out /tmp/o_$b.h5 --metrics /tmp/m_$b.json > /tmp/l_$b.log 2>&1 || { echo "$b rc $?"; tail -3 /tmp/l_$b.log; }
  echo "d $d $p $b: $(python3 -c "import json; m=json.load(open('/tmp/m_$b.json')); print('ms/iter %.3f energy %.6g' % (1e3*m['loop_seconds']/m['iterations'], m['final_energy']))" 2>&1)" | tee -a $OUT/e2e_final.txt
done
echo "d $d $p new vs base: $(build-gpu/h5tool close /tmp/o_new.h5 /tmp/o_base.h5 1e-3 1e-3 2>&1 | tr '\n' ' ')" | tee -a $OUT/e2e_final.txt
done
echo "e2e $(( $(date +%s) - T0 )) s"
for d in 192 384 768; do
  timeout 60 build-gpu/gpu_kernels_bench 1000000 $d 1024 10 > $OUT/kernels5_d$d.txt 2>&1; echo "d $d rc $? $(( $(date +%s) - T0 )) s"
  grep -E "^assign (tf32|fp16) (gemm|fused wgmma)|argmin kernel alone (tf32|fp16) wgmma" $OUT/kernels5_d$d.txt | grep -v cosine | head -6
done
echo "all $(( $(date +%s) - T0 )) s"
