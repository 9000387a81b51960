#!/bin/bash
# session 20, call 4: the final code's `ctest -L gpu`; bench/gpu_loop_scaling.sh on one GPU (GPUS=1: the
# script itself, before a multi-GPU machine runs it); the loop at larger k (1M x 128 fp16, k 1024, 4096,
# 16384, 10 iterations from random rows): ms per iteration and phases, against the distance product's
# FLOPs.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
(python3 -c "import h5py,numpy as np; r=np.random.default_rng(1); c=r.standard_normal((20000,128)).astype(np.float32)*3; h5py.File('/tmp/g1.h5','w').create_dataset('train', data=(c[r.integers(0,20000,1000000)]+r.standard_normal((1000000,128),dtype=np.float32)).astype(np.float32))") &
GP=$!
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 600) > $OUT/ctest_call4.log 2>&1
grep -E "Test +#|tests passed|tests failed" $OUT/ctest_call4.log
(cd build-gpu && ctest -R gpu_backend -V --timeout 600 2>&1 | grep -E "GPU memory") | tee -a $OUT/ctest_call4.log
echo "ctest done $(( $(date +%s) - T0 )) s"
OUT=$OUT/loop_scaling GPUS=1 ROWS_PER_GPU=1000000 STRONG_N=1000000 REPS=1 timeout 200 bash bench/gpu_loop_scaling.sh > /tmp/ls.log 2>&1; echo "loop_scaling rc $?"; tail -8 /tmp/ls.log
wait $GP
N=build-gpu/vecanneal
for k in 1024 4096 16384; do
  $N compress --input /tmp/g1.h5:/train --anchors $k --backend cuda --set precision=fp16 --set max_iter=10 --set tol=0 --set min_changes=0 --set progress_every=1 --set init=random --set threads=16 --out /tmp/k$k.h5 --metrics /tmp/k$k.json > /tmp/k$k.log 2>&1 || { echo "k $k rc $?"; tail -3 /tmp/k$k.log; }
  python3 - /tmp/k$k.json /tmp/k$k.log $k <<'PY' | tee -a $OUT/large_k.txt
import json, re, statistics, sys
m = json.load(open(sys.argv[1])); k = int(sys.argv[3])
ms = [float(l.split()[-1]) for l in open(sys.argv[2]) if re.match(r"^\s+\d+\s", l)]
ph = {p: round(1e3 * v["max"] / m["iterations"], 3) for p, v in m["phases_seconds"].items()}
tf = 2 * 1e6 * k * 128 / (statistics.median(ms) * 1e-3) / 1e12
print(f"k {k}: ms/iter {m['ms_per_iteration']:.3f}, median iteration {statistics.median(ms):.3f} ms (product {tf:.0f} TFLOP/s), iterations {ms}, phases ms/iter {ph}")
PY
done
grep -n "iter\b\|^ *[0-9]" /tmp/k16384.log | head -14 > $OUT/k16384_progress.txt
echo "all $(( $(date +%s) - T0 )) s"
