#!/bin/bash
# session 21, call 3: call 1's long-row wgmma kernel (git e9872ea: cp.async pieces, no clusters; call 2's cluster form was 3x slower and is not kept)
# ctest -L gpu (.gpu-model carried); then compress end to end, 1M rows, k 1024, 20 iterations from
# the same random rows, base (c15d0df, .gpu-src/base.tar) against new, alternated: tf32 at d 384 and
# 192, fp16 at d 768.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
# call 2's cluster form (.gpu-src/cluster.patch on this code), built beside, for the ncu diagnosis at the end
(mkdir -p /tmp/clu && tar --exclude=./build-gpu --exclude=./.gpu-model --exclude=./.gpu-src -cf - . | tar -x -C /tmp/clu && (cd /tmp/clu && patch -p1 < $OLDPWD/.gpu-src/cluster.patch > /dev/null) && cmake -S /tmp/clu -B /tmp/clu/b -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmc.log 2>&1 && make -C /tmp/clu/b -j16 gpu_kernels_bench > /tmp/bc.log 2>&1; echo "cluster build rc $? $(( $(date +%s) - T0 )) s") &
CP=$!
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
(cd build-gpu && timeout 300 ctest -L gpu --output-on-failure --timeout 200) > $OUT/ctest_call3.log 2>&1
grep -E "tests passed|tests failed|Test +#" $OUT/ctest_call3.log
echo "ctest $(( $(date +%s) - T0 )) s"
wait $BP; wait $GP
echo "ready $(( $(date +%s) - T0 )) s"
for dp in "384 tf32" "192 tf32" "768 fp16"; do set -- $dp; d=$1; p=$2; for rep in 1 2; do for b in base new; do
  B=$([ $b = base ] && echo /tmp/base/b/vecanneal || echo build-gpu/vecanneal)
  timeout 60 $B compress --input /tmp/e$d.h5:/train --anchors 1024 --backend cuda --set precision=$p --set max_iter=20 --set tol=0 --set min_changes=0 --set init=random --set progress_every=0 --set threads=16 --out /tmp/o_$b.h5 --metrics /tmp/m_$b.json > /tmp/l_$b.log 2>&1 || { echo "$b rc $?"; tail -3 /tmp/l_$b.log; }
  echo "d $d $p rep $rep $b: $(python3 -c "import json; m=json.load(open('/tmp/m_$b.json')); print('ms/iter %.3f energy %.6g' % (1e3*m['loop_seconds']/m['iterations'], m['final_energy']))" 2>&1)" | tee -a $OUT/e2e_call3.txt
done; done
echo "d $d $p new vs base: $(build-gpu/h5tool close /tmp/o_new.h5 /tmp/o_base.h5 1e-3 1e-3 2>&1 | tr '\n' ' ')" | tee -a $OUT/e2e_call3.txt
done
echo "all $(( $(date +%s) - T0 )) s"
# diagnosis of call 2's cluster form (.gpu-src/cluster.patch on this code): ncu stall reasons, d 384 tf32
wait $CP
for kn in pieced; do
  timeout 120 ncu --kernel-name regex:$kn --launch-count 1 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy /tmp/clu/b/gpu_kernels_bench 1000000 384 1024 1 ncu > $OUT/ncu_cluster_d384.txt 2>&1; echo "ncu cluster rc $?"
  timeout 120 ncu --kernel-name regex:$kn --launch-count 1 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy build-gpu/gpu_kernels_bench 1000000 384 1024 1 ncu > $OUT/ncu_cpasync_d384.txt 2>&1; echo "ncu cp.async rc $?"
done
grep -E "Duration|Stall|Throughput|Cluster|Active|Waves" $OUT/ncu_cluster_d384.txt | head -40
echo "all $(( $(date +%s) - T0 )) s"
