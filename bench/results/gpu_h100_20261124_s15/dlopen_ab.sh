#!/bin/bash
# session 15 call 2: cuBLAS opened at first use. Both trees traced (trace_patch.py): HEAD (base.tar) and
# the working tree; ctest -L gpu + cuda_blas_load on the new build; parity case alternating base/new.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base /tmp/new && mkdir /tmp/base /tmp/new && tar -xf .gpu-src/base.tar -C /tmp/base
tar --exclude=./build-gpu --exclude=./.whl -cf - . | tar -xf - -C /tmp/new
(cd /tmp/base && python3 /tmp/new/bench/results/gpu_h100_20261124_s15/trace_patch.py && cmake -S . -B bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C bb -j6 vecanneal > /tmp/bb.log 2>&1) &
BP=$!
(cd /tmp/new && python3 bench/results/gpu_h100_20261124_s15/trace_patch.py && cmake -S . -B bn -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=/tmp/new/.gpu-model > /tmp/cmn.log 2>&1 && make -C bn -j12 > /tmp/bn.log 2>&1) || { tail -30 /tmp/bn.log; exit 1; }
wait $BP || { tail -20 /tmp/bb.log; exit 1; }
echo "builds $(( $(date +%s) - T0 )) s"
for b in /tmp/base/bb /tmp/new/bn; do echo "$b needs: $(readelf -d $b/vecanneal | grep -o 'lib[a-zA-Z]*\.so[.0-9]*' | tr '\n' ' ')"; done
(cd /tmp/new/bn && ctest -L gpu -R . --output-on-failure --timeout 600; ctest -R cuda_blas_load --output-on-failure -V | grep -E "ok|FAIL") > $OUT/ctest_gpu.log 2>&1
grep -E "Test +#|tests passed|tests failed|ok  |FAIL" $OUT/ctest_gpu.log | head -20
echo "ctest $(( $(date +%s) - T0 )) s"
/tmp/new/bn/vecanneal gen --kind vlc-demo --n 10000 --d 128 --out /tmp/demo.h5 > /dev/null
run() { # tree backend -> one line
  local s=$(date +%s.%N)
  VA_TRACE=$s $1/vecanneal compress --config configs/vlc-demo-large.ini --input /tmp/demo.h5:/train --out /tmp/o_$3.h5 --backend $2 --set progress_every=0 --set threads=16 > /tmp/o.log 2> /tmp/tr.log
  local e=$(date +%s.%N)
  echo "$3 $2 shell $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') | $(awk '{printf "%s=%s ", $2, $NF}' /tmp/tr.log)" | tee -a $OUT/parity.txt
}
for i in 1 2 3 4 5 6 7 8; do run /tmp/base/bb cuda base; run /tmp/new/bn cuda new; done
for i in 1 2 3; do run /tmp/base/bb cpu base; run /tmp/new/bn cpu new; done
/tmp/new/bn/h5tool close /tmp/o_new.h5 /tmp/o_base.h5 0 | tail -2
python3 - $OUT/parity.txt <<'PY'
import sys, statistics as S
rows = {}
for l in open(sys.argv[1]):
    w = l.split(); rows.setdefault((w[0], w[1]), []).append((float(w[3]), dict(x.split('=') for x in w[5:] if '=' in x)))
for (tree, be), v in sorted(rows.items()):
    sh = [x[0] for x in v]; main = [float(x[1]['main']) for x in v]; last = [float(x[1]['atexit-last']) for x in v]
    print(f"{tree} {be}: shell median {S.median(sh):.3f} (min {min(sh):.3f}, max {max(sh):.3f}); main at {S.median(main):.3f}; atexit {S.median(last):.3f}; after atexit {S.median([a-b for a,b in zip(sh,last)]):.3f}")
PY
echo "all $(( $(date +%s) - T0 )) s"
