#!/bin/bash
# session 16 call 2: where the embed encode phase's fixed cost goes (a traced copy of HEAD: per-batch GPU time,
# cuBLASLt heuristic queries, first launches per bucket).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
rm -rf /tmp/tp && mkdir /tmp/tp && tar -xf .gpu-src/base.tar -C /tmp/tp && python3 .gpu-src/embed_trace_patch.py /tmp/tp
(cmake -S /tmp/tp -B /tmp/tp/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/tp/bb -j16 vecanneal > /tmp/bb.log 2>&1) || { tail -20 /tmp/bb.log; exit 1; }
echo "build $(( $(date +%s) - T0 )) s"
M=$PWD/.gpu-model; W=/tmp/emb; mkdir -p $W
zcat tests/data/embed_corpus.txt.gz > $W/c1.txt
for r in 8 32; do for _ in $(seq $r); do cat $W/c1.txt; done > $W/c$r.txt; done
for r in 8 32 8 32; do
  s=$(date +%s.%N)
  VA_TRACE_BATCH=1 /tmp/tp/bb/vecanneal embed --backend cuda --input $W/c$r.txt --model $M --weights fp16 --out $W/e.h5:/train --metrics $W/m.json --progress 0 > $OUT/trace_x$r.log 2>&1
  e=$(date +%s.%N)
  echo "x$r wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') $(grep trace: $OUT/trace_x$r.log) | $(python3 -c "import json;m=json.load(open('$W/m.json'));print(m['phases_seconds']['encode']['max'], m['gpu_setup_seconds_max'], m['gpu_forward_seconds']['max'])")"
  awk '/^batch/{n++; t+=$6; if (n<=1) f1+=$6; if (n<=10) f10+=$6} END{printf "  batches %d gpu_ms sum %.1f first %.1f first10 %.1f\n", n, t, f1, f10}' $OUT/trace_x$r.log
done
