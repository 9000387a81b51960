#!/bin/bash
# session 16 call 3: cuBLASLt algorithm per bucket (HEAD) vs per octave (VA_ALGO_OCTAVE, traced copy).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
rm -rf /tmp/tp && mkdir /tmp/tp && tar -xf .gpu-src/base.tar -C /tmp/tp && python3 .gpu-src/embed_trace_patch.py /tmp/tp
(cmake -S /tmp/tp -B /tmp/tp/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/tp/bb -j16 vecanneal > /tmp/bb.log 2>&1) || { tail -20 /tmp/bb.log; exit 1; }
echo "build $(( $(date +%s) - T0 )) s"
M=$PWD/.gpu-model; W=/tmp/emb; mkdir -p $W
zcat tests/data/embed_corpus.txt.gz > $W/c1.txt
for r in 8 32; do for _ in $(seq $r); do cat $W/c1.txt; done > $W/c$r.txt; done
for rep in 1 2 3; do for r in 8 32; do for mode in bucket octave; do
  env=""; [ $mode = octave ] && env="VA_ALGO_OCTAVE=1"
  s=$(date +%s.%N)
  env VA_TRACE_BATCH=1 $env /tmp/tp/bb/vecanneal embed --backend cuda --input $W/c$r.txt --model $M --weights fp16 --out $W/e_${mode}_$r.h5:/train --metrics $W/m.json --progress 0 > $OUT/trace_${mode}_x$r.log 2>&1
  e=$(date +%s.%N)
  echo "x$r $mode wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') $(grep trace: $OUT/trace_${mode}_x$r.log | cut -c8-) | encode $(python3 -c "import json;m=json.load(open('$W/m.json'));print(m['phases_seconds']['encode']['max'], 'setup', m['gpu_setup_seconds_max'], 'fwd', m['gpu_forward_seconds']['max'])")"
  awk '/^batch/{n++; t+=$6; if (n>20) s+=$6} END{printf "   batches %d gpu_ms sum %.1f after the first 20: %.1f\n", n, t, s}' $OUT/trace_${mode}_x$r.log
done; done; done
python3 - <<'PY'
import h5py, numpy as np
for r in (8, 32):
    a = h5py.File(f"/tmp/emb/e_bucket_{r}.h5")["train"][:]; b = h5py.File(f"/tmp/emb/e_octave_{r}.h5")["train"][:]
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    print(f"x{r}: rows {len(a)}, identical rows {(a == b).all(1).sum()}, min cosine {cos.min():.7f}, max abs diff {np.abs(a - b).max():.2e}")
PY
