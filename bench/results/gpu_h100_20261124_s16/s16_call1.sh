#!/bin/bash
# session 16 call 1: prefault A/B (HEAD = .gpu-src/base.tar vs working tree) on a 1M fp16 job; embed phase study on 1 GPU.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar -xf .gpu-src/base.tar -C /tmp/base
(cmake -S /tmp/base -B /tmp/base/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmb.log 2>&1 && make -C /tmp/base/bb -j6 vecanneal > /tmp/bb.log 2>&1) &
BP=$!
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j12 vecanneal > /tmp/bn.log 2>&1) || { tail -30 /tmp/bn.log; exit 1; }
wait $BP || { tail -20 /tmp/bb.log; exit 1; }
echo "builds $(( $(date +%s) - T0 )) s"
N=build-gpu/vecanneal; O=/tmp/base/bb/vecanneal
mpirun -n 16 $N gen --out /tmp/g1.h5 --n 1000000 --d 128 --clusters 2000 --spread 0.5 > /dev/null
for th in 16 4; do for rep in 1 2 3 4; do for v in base new; do
  b=$N; [ $v = base ] && b=$O
  s=$(date +%s.%N); $b compress --input /tmp/g1.h5:/train --anchors 1024 --backend cuda --set precision=fp16 --set max_iter=20 --set tol=0 --set min_changes=0 --set init=random --set threads=$th --set progress_every=0 --out /tmp/j_$v.h5 > /tmp/j.log 2>&1; e=$(date +%s.%N)
  echo "1M fp16 $v threads $th: wall $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') s | $(grep -E '^read' /tmp/j.log | cut -c1-60) | $(grep -o 'energy [0-9.]*' /tmp/j.log | tail -1)" | tee -a $OUT/prefault_ab.txt
done; done; done
echo "compress A/B $(( $(date +%s) - T0 )) s"
M=$PWD/.gpu-model; W=/tmp/emb; mkdir -p $W $OUT/embed
zcat tests/data/embed_corpus.txt.gz > $W/c1.txt
for r in 8 16 32; do for _ in $(seq $r); do cat $W/c1.txt; done > $W/c$r.txt; done
run() { # name, launcher..., corpus
  local name=$1; shift
  s=$(date +%s.%N); "$@" --model $M --weights fp16 --out $W/e.h5:/train --metrics $OUT/embed/$name.json --progress 0 > $W/$name.log 2>&1; rc=$?; e=$(date +%s.%N)
  python3 - $OUT/embed/$name.json $name $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}') $rc <<'PY' | tee -a $OUT/embed_phases.txt
import json, sys
m = json.load(open(sys.argv[1])); p = m["phases_seconds"]
print(f"{sys.argv[2]:>16} rc {sys.argv[4]} wall {sys.argv[3]} s lines {m['lines']} thr {m['threads_per_rank']} | " +
      " ".join(f"{k} {v['max']:.3f}" for k, v in p.items()) +
      f" | gpu setup {m.get('gpu_setup_seconds_max', 0):.3f} fwd {m['gpu_forward_seconds']['max']:.3f} | encode {m['encode_lines_per_second']:.0f} l/s fwd {m['gpu_forward_lines_per_second']:.0f} l/s")
PY
}
for rep in 1 2; do
  run x32_single_$rep $N embed --backend cuda --input $W/c32.txt
  run x16_single_$rep $N embed --backend cuda --input $W/c16.txt
  run x8_single_$rep $N embed --backend cuda --input $W/c8.txt
done
run x32_mpirun_bound mpirun -n 1 $N embed --backend cuda --input $W/c32.txt
run x32_mpirun_nobind mpirun -n 1 --bind-to none $N embed --backend cuda --input $W/c32.txt
run x32_threads1 $N embed --backend cuda --threads 1 --input $W/c32.txt
run x32_threads4 $N embed --backend cuda --threads 4 --input $W/c32.txt
echo "all $(( $(date +%s) - T0 )) s"
