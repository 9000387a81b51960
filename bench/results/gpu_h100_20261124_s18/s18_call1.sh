#!/bin/bash
# session 18 call 1 (one GPU): (1) the working tree's cuda_nccl_allreduce_1.._4 (1 rank runs, 2-4 skip);
# the nccl-chain branch's test_nccl on 1 rank (its chained case). (2) What the statistics' NCCL sum
# costs the loop on one GPU, apart from the link: main (.gpu-src/main.tar) and nccl-chain
# (.gpu-src/chain.tar), both patched by force_nccl1.sh so that VA_NCCL1=1 makes a one-rank job take
# the NCCL paths; 2M x 128 x 1024 fp16, 20 iterations, REPS repeats, alternating.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s); REPS=${REPS:-3}
nvidia-smi --query-gpu=name --format=csv,noheader
for t in m c; do
  rm -rf /tmp/$t && mkdir /tmp/$t && tar -xf .gpu-src/$([ $t = m ] && echo main || echo chain).tar -C /tmp/$t && bash .gpu-src/force_nccl1.sh /tmp/$t
  (cmake -S /tmp/$t -B /tmp/$t/bb -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cm_$t.log 2>&1 && make -C /tmp/$t/bb -j5 vecanneal h5tool test_nccl > /tmp/b_$t.log 2>&1) &
done
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmw.log 2>&1 && make -C build-gpu -j6 test_nccl > /tmp/bw.log 2>&1) || { tail -20 /tmp/bw.log; exit 1; }
wait
for t in m c; do [ -x /tmp/$t/bb/vecanneal ] || { echo "build $t failed"; grep -B2 -A5 error /tmp/b_$t.log | head -30; exit 1; }; done
echo "builds $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -R cuda_nccl --output-on-failure) > $OUT/ctest_nccl.log 2>&1; grep -E "Test +#|tests passed|tests failed" $OUT/ctest_nccl.log
mpirun -n 1 /tmp/c/bb/test_nccl 2>&1 | tee $OUT/chain_test_nccl_1.log | tail -3
mpirun -n 16 /tmp/m/bb/vecanneal gen --out /tmp/d2.h5 --n 2000000 --d 128 --clusters 2000 --spread 0.5 --dtype float16 > /dev/null
echo "tree,VA_NCCL1,rep,ms_per_iteration,first_iter_ms,median_iter_ms,max_iter_ms,allreduce_s,energy" > $OUT/loop1.csv
for rep in $(seq $REPS); do for t in m c; do for f in 0 1; do
  if [ $f = 1 ]; then export VA_NCCL1=1; else unset VA_NCCL1; fi
  /tmp/$t/bb/vecanneal compress --input /tmp/d2.h5:/train --anchors 1024 --out /tmp/i_${t}$f.h5 --backend cuda --set precision=fp16 \
    --set max_iter=20 --set tol=0 --set min_changes=0 --set threads=4 --set progress_every=1 --metrics /tmp/m.json > /tmp/r_${t}$f.log 2>&1 || { tail -5 /tmp/r_${t}$f.log; continue; }
  python3 - /tmp/r_${t}$f.log /tmp/m.json "$t,$f,$rep" >> $OUT/loop1.csv <<'PY'
import json, re, statistics, sys
ms = [float(l.split()[-1]) for l in open(sys.argv[1]) if re.match(r"^\s+\d+\s", l)]
m = json.load(open(sys.argv[2]))
print(f"{sys.argv[3]},{m['ms_per_iteration']:.3f},{ms[0]:.3f},{statistics.median(ms):.3f},{max(ms):.3f},{m['phases_seconds']['allreduce']['max']:.4f},{m.get('energy', m.get('final_energy',''))}")
PY
done; done; done
unset VA_NCCL1
grep -h "backend cuda" /tmp/r_m0.log /tmp/r_m1.log /tmp/r_c1.log
for x in m1 c0 c1; do echo "m0 vs $x: $(/tmp/m/bb/h5tool close /tmp/i_m0.h5 /tmp/i_$x.h5 0 2>&1 | tr '\n' ' ')"; done | tee $OUT/close.txt
cp /tmp/r_m1.log /tmp/r_c1.log $OUT/
column -s, -t $OUT/loop1.csv
echo "all $(( $(date +%s) - T0 )) s"
