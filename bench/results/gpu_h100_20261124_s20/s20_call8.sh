#!/bin/bash
# session 20, call 8: call 7's kernel with the odd tile count handled (a last group of one unit):
# ctest cuda_kernels and gpu_backend; then compress end to end at d 384 and 96 (1M rows, k 1024, fp16 and
# bf16, 20 iterations from the same random rows), base (7555089, .gpu-src/base.tar) against new, alternated:
# ms per iteration, and the indexes against each other (near-ties may differ).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T0=$(date +%s)
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep -E "error" /tmp/bn.log | head; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
(mkdir -p /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base && cmake -S /tmp/base -B /tmp/base/b -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/b -j6 vecanneal > /tmp/bb.log 2>&1; echo "base build rc $?") &
BP=$!
(python3 -c "
import h5py,numpy as np
r=np.random.default_rng(1)
for d in (384, 96):
    c=r.standard_normal((5000,d)).astype(np.float32)*2
    h5py.File('/tmp/e%d.h5'%d,'w').create_dataset('train', data=(c[r.integers(0,5000,1000000)]+r.standard_normal((1000000,d),dtype=np.float32)).astype(np.float32))
") &
GP=$!
(cd build-gpu && ctest -R "cuda_kernels|gpu_backend" --output-on-failure --timeout 600) > $OUT/ctest_call8.log 2>&1
grep -E "Test +#|tests passed|tests failed|FAIL" $OUT/ctest_call8.log | head
wait $BP; wait $GP
echo "ready $(( $(date +%s) - T0 )) s"
for d in 384 96; do for p in fp16 bf16; do for rep in 1 2; do for b in base new; do
  B=$([ $b = base ] && echo /tmp/base/b/vecanneal || echo build-gpu/vecanneal)
  $B compress --input /tmp/e$d.h5:/train --anchors 1024 --backend cuda --set precision=$p --set max_iter=20 --set tol=0 --set min_changes=0 --set init=random --set progress_every=0 --set threads=16 --out /tmp/o_$b.h5 --metrics /tmp/m_$b.json > /tmp/l_$b.log 2>&1 || { echo "$b rc $?"; tail -3 /tmp/l_$b.log; }
  echo "d $d $p rep $rep $b: $(python3 -c "import json; m=json.load(open('/tmp/m_$b.json')); print('ms/iter %.3f energy %.6g' % (1e3*m['loop_seconds']/m['iterations'], m['final_energy']))" 2>&1)" | tee -a $OUT/e2e_call8.txt
done; done
echo "d $d $p new vs base: $(build-gpu/h5tool close /tmp/o_new.h5 /tmp/o_base.h5 1e-3 1e-3 2>&1 | tr '\n' ' ')" | tee -a $OUT/e2e_call8.txt
done; done
echo "all $(( $(date +%s) - T0 )) s"
