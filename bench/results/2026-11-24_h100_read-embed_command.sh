#!/bin/bash
# run 4: ctest -L gpu on the working tree (octave algorithms, set-up thread, prefault); embed A/B
# HEAD (.gpu-src/base.tar) vs working tree at x8 / x32 / x128 of the test corpus, 1 GPU.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base
(cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j6 vecanneal > /tmp/bb.log 2>&1) &
BP=$!
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j12 > /tmp/bn.log 2>&1) || { grep -E "error" /tmp/bn.log | head; tail -30 /tmp/bn.log; exit 1; }
wait $BP || { tail -20 /tmp/bb.log; exit 1; }
echo "builds $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 600; ctest -R cuda_blas_load --output-on-failure) > $OUT/ctest_gpu.log 2>&1
grep -E "Test +#|tests passed|tests failed|grown|FAIL" $OUT/ctest_gpu.log | head -24
echo "ctest $(( $(date +%s) - T0 )) s"
N=build-gpu/vecanneal; O=/tmp/base/bb/vecanneal
M=$PWD/.gpu-model; W=/tmp/emb; mkdir -p $W $OUT/embed
zcat tests/data/embed_corpus.txt.gz > $W/c1.txt
for r in 8 32 128; do for _ in $(seq $r); do cat $W/c1.txt; done > $W/c$r.txt; done
for rep in 1 2 3; do for r in 8 32 128; do for v in base new; do
  b=$N; [ $v = base ] && b=$O
  [ $r = 128 ] && [ $rep = 3 ] && continue
  s=$(date +%s.%N); $b embed --backend cuda --input $W/c$r.txt --model $M --weights fp16 --out $W/e_$v.h5:/train --metrics $W/m.json --progress 0 > $W/l.log 2>&1; rc=$?; e=$(date +%s.%N)
  python3 - $W/m.json "x$r $v" $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') $rc <<'PY' | tee -a $OUT/embed_ab.txt
import json, sys
m = json.load(open(sys.argv[1])); p = m["phases_seconds"]
print(f"{sys.argv[2]:>10} rc {sys.argv[4]} wall {sys.argv[3]} | " + " ".join(f"{k} {v['max']:.3f}" for k, v in p.items()) +
      f" | setup {m['gpu_setup_seconds_max']:.3f} wait {m.get('gpu_setup_wait_seconds_max', -1):.3f} fwd {m['gpu_forward_seconds']['max']:.3f} | encode {m['encode_lines_per_second']:.0f} l/s")
PY
done; [ $rep = 1 ] && python3 -c "
import h5py, numpy as np
a = h5py.File('$W/e_base.h5')['train'][:]; b = h5py.File('$W/e_new.h5')['train'][:]
print('x$r: rows', len(a), 'identical rows', int((a == b).all(1).sum()), 'max abs diff %.2e' % np.abs(a - b).max())" | tee -a $OUT/embed_ab.txt
done; done
echo "all $(( $(date +%s) - T0 )) s"
