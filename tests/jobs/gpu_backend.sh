#!/usr/bin/env bash
# gpu_backend.sh (label gpu): the CUDA backend against the CPU backend on the same data and config,
# and 1 GPU against 2 and 4 GPUs. SKIP (77) without a CUDA build or device: never a silent pass.
# Tolerances: fp32 products: anchors 1e-4 relative, at most 0.1% of assignments differ (near-ties,
# where float32 rounding of the two backends' dot products differs); tf32/bf16: energy within 0.5%.
# Across GPU counts (fp32 and tf32): anchors 1e-5 relative, identical assignments.
source "$(dirname "$0")/lib.sh"
export NCCL_NVLS_ENABLE=0
"$BIN" --version | grep -q "cuda yes" || { echo "SKIP: built without CUDA"; exit 77; }
ngpu=$(nvidia-smi -L 2> /dev/null | grep -c "^GPU")
[ "${ngpu:-0}" -ge 1 ] || { echo "SKIP: no CUDA device"; exit 77; }
data=$WORK/g.h5
run_np 2 gen --out "$data" --n 60000 --d 64 --clusters 40 --spread 0.6 > /dev/null || fail gen
common=(compress --input "$data:/train" --anchors 48 --set max_iter=20 --set tol=0 --set min_changes=0 --set progress_every=0
        --set gpu_min_work=0 --set robust=trim --set maintenance_interval=5 --set k_min=32 --set k_max=64 --set split_count_factor=1.5)
run_np 1 "${common[@]}" --backend cpu --out "$WORK/cpu.h5" > /dev/null || fail "cpu"
for prec in fp32 tf32 bf16; do
  run_np 1 "${common[@]}" --backend cuda --set precision=$prec --out "$WORK/gpu_$prec.h5" > "$WORK/gpu_$prec.log" || { cat "$WORK/gpu_$prec.log"; fail "cuda $prec"; }
  grep -q "backend cuda" "$WORK/gpu_$prec.log" || fail "cuda backend not used"
  Ec=$("$TOOL" attr "$WORK/cpu.h5" final_energy); Eg=$("$TOOL" attr "$WORK/gpu_$prec.h5" final_energy)
  echo "precision $prec: energy gpu $Eg cpu $Ec"
  if [ $prec = fp32 ]; then
    "$TOOL" close "$WORK/gpu_fp32.h5" "$WORK/cpu.h5" 1e-4 0.001 || fail "cuda fp32 differs from cpu"
  else
    awk -v a="$Eg" -v b="$Ec" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(d < 0.005) }' || fail "cuda $prec energy off"
  fi
done
for p in 2 4; do
  [ "$ngpu" -ge $p ] || { echo "only $ngpu GPU(s): $p-GPU comparison not run"; continue; }
  for prec in fp32 tf32; do
    run_np $p "${common[@]}" --backend cuda --set precision=$prec --out "$WORK/gpu${p}_$prec.h5" > /dev/null || fail "$p GPUs"
    "$TOOL" close "$WORK/gpu${p}_$prec.h5" "$WORK/gpu_$prec.h5" 1e-5 || fail "$p GPUs ($prec) differ from 1 GPU"
  done
done
# Resume on the GPU is bitwise identical too.
VECANNEAL_FAULT_STOP_AFTER=7 timeout 120 mpirun -n 1 -x VECANNEAL_FAULT_STOP_AFTER -x NCCL_NVLS_ENABLE "$BIN" "${common[@]}" --backend cuda --out "$WORK/r.h5" > /dev/null 2>&1
[ $? -eq 75 ] || fail "gpu stop"
run_np 1 "${common[@]}" --backend cuda --out "$WORK/r.h5" --resume "$WORK/r.h5.ckpt.h5" > /dev/null || fail "gpu resume"
"$TOOL" same "$WORK/r.h5" "$WORK/gpu_tf32.h5" || fail "gpu resume differs"
echo "PASS: gpu backend"
