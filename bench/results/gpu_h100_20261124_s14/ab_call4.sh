#!/bin/bash
# session 14 call 4: three warpgroups (VA_WG3=1; groups of 4 units at d 64) vs two at d 64, and at 8M x 128
B=build-gpu; T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > $OUT/cmake.log 2>&1 && make -C $B -j16 gpu_kernels_bench > $OUT/build.log 2>&1 ) || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - T0 )) s"
for rep in a b; do for v in 0 1; do
  VA_WG3=$v $B/gpu_kernels_bench 1000000 64 1024 20 > /tmp/k$v.log 2>&1
  echo "d 64 WG3=$v ($rep):"; grep -E "^loop iteration (fp16|bf16)|argmin kernel alone (fp16|bf16) wgmma" /tmp/k$v.log | head -4
done; done
for v in 0 1; do
  VA_WG3=$v $B/gpu_kernels_bench 8000000 128 1024 10 > /tmp/k8$v.log 2>&1
  echo "8M WG3=$v:"; grep -E "^loop iteration (fp16|bf16)|argmin kernel alone (fp16|bf16) wgmma" /tmp/k8$v.log | head -4
done
echo "all $(( $(date +%s) - T0 )) s"
