#!/bin/bash
# session 13 call 8: final code: ctest -L gpu, kernels, iteration kernel list, progress lines on/off (3 reps)
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
B=build-gpu
T0=$(date +%s)
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > $OUT/cmake.log 2>&1 && make -C $B -j16 > $OUT/build.log 2>&1 ) || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - T0 )) s"
( cd $B && timeout 400 ctest -L gpu --output-on-failure > $OUT/ctest_gpu.log 2>&1; grep -E "tests passed|tests failed|Passed|Skipped|\*\*\*|Not Run" $OUT/ctest_gpu.log | head -12 )
echo "ctest done $(( $(date +%s) - T0 )) s"
$B/gpu_kernels_bench 1000000 128 1024 20 > $OUT/kernels.log 2>&1; grep -E "^loop iteration|argmin kernel alone (fp16|bf16|tf32) wgmma" $OUT/kernels.log | head -6
mpirun -n 16 $B/vecanneal gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
python3 - <<'PY'
import h5py, numpy as np
X = h5py.File("/tmp/g1.h5")["train"]
idx = np.sort(np.random.default_rng(7).choice(X.shape[0], 1024, replace=False))
with h5py.File("/tmp/init.h5", "w") as f: f["anchors"] = X[idx]
PY
L="--set lr=1 --set T0=1e9 --set cooling_rate=0 --set tol=0 --set min_changes=0 --set init=file:/tmp/init.h5:/anchors"
for rep in 1 2 3; do for prec in fp16; do for pe in 0 1; do for it in 100; do
  mpirun -n 1 $B/vecanneal compress --input /tmp/g1.h5:/train --out /tmp/x.h5 --backend cuda --set precision=$prec $L --set max_iter=$it --set progress_every=$pe --metrics /tmp/m.json > /tmp/c.log 2>&1
  echo "$prec lloyd progress_every=$pe max_iter=$it: $(python3 -c "import json; m=json.load(open('/tmp/m.json')); print(m['ms_per_iteration'])") ms/it"
done; done; done; done
cp /tmp/c.log $OUT/compress_fp16_progress.log
timeout 300 ncu --clock-control none --csv --page raw --metrics gpu__time_duration.sum $B/vecanneal compress --input /tmp/g1.h5:/train --out /tmp/x.h5 --backend cuda --set precision=fp16 $L --set max_iter=4 --set progress_every=0 > /tmp/ncu_it.csv 2> /tmp/ncu_it.err || tail -3 /tmp/ncu_it.err
python3 - /tmp/ncu_it.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], encoding='latin-1')))
hi = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
h = rows[hi]; data = rows[hi + 2:]
ki = h.index("Kernel Name"); ti = h.index("gpu__time_duration.sum")
seq = [(r[ki], float(r[ti].replace(',', ''))) for r in data if len(r) == len(h)]
starts = [i for i, (k, _) in enumerate(seq) if 'wgmma' in k]
for a, b in zip(starts[-2:-1], starts[-1:]):
    print(f"iteration: {b-a} kernels, sum {sum(t for _, t in seq[a:b])/1e3:.1f} us")
    for k, t in seq[a:b]: print(f"   {t/1e3:8.1f} us  {k[:90]}")
PY
echo "all done $(( $(date +%s) - T0 )) s"
