#!/usr/bin/env bash
# gpu_backend.sh (label gpu): the CUDA backend against the CPU backend on the same data and config,
# 1 GPU against 2 and 4 GPUs, and rows streamed from pinned host memory (out-of-core) against rows
# resident on the GPU. SKIP (77) without a CUDA build or device: never a silent pass.
# Tolerances: fp32 products: anchors 1e-4 relative, at most 0.1% of assignments differ (near-ties,
# where float32 rounding of the two backends' dot products differs; the parity case below takes the
# DIRECT kernel and must be identical); tf32/bf16: energy within 0.5%.
# Across GPU counts and streamed vs resident (fp32 and tf32): anchors 1e-5 relative, identical
# assignments (only the order of the statistics' double sums differs).
source "$(dirname "$0")/lib.sh"
export NCCL_NVLS_ENABLE=0
"$BIN" --version | grep -q "cuda yes" || { echo "SKIP: built without CUDA"; exit 77; }
ngpu=$(visible_gpus)
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
# Progress lines on the CUDA backend wait for the next iteration's queued pass (anneal.c): every
# iteration's line still comes, in order, after the header and before the checkpoint message of its own
# iteration.
run_np 1 "${common[@]}" --backend cuda --set precision=tf32 --set progress_every=1 --set checkpoint_every=5 \
  --out "$WORK/prog.h5" > "$WORK/prog.log" || { cat "$WORK/prog.log"; fail "cuda with progress lines"; }
awk 'BEGIN { want = 1; head = 0; bad = 0 }
     $1 == "iter" && $2 == "T" { head = 1; next }
     /^checkpoint after iteration/ { if ($4 != want - 1) bad = 1; next }
     head && $1 ~ /^[0-9]+$/ && NF >= 7 { if ($1 != want) bad = 1; want++ }
     END { exit !(head && !bad && want == 21) }' "$WORK/prog.log" || { cat "$WORK/prog.log"; fail "progress lines missing or out of order"; }
"$TOOL" close "$WORK/prog.h5" "$WORK/gpu_tf32.h5" 0 || fail "progress lines changed the index"
# fp16 products and the default kmeans|| init with the host's anchor storage poisoned before the
# initialisation writes it (VECANNEAL_FAULT_POISON_ANCHORS: 1e30 everywhere, as uninitialised memory
# may be): nothing reads it early, so the job runs and gives the unpoisoned index. (The side passes of
# the initialisation once restored those anchors on the device, and their fp16 conversion flagged an
# overflow that stopped the job.)
run_np 1 "${common[@]}" --backend cuda --set precision=fp16 --out "$WORK/fp16.h5" > /dev/null || fail "cuda fp16"
VECANNEAL_FAULT_POISON_ANCHORS=1 timeout 120 mpirun -n 1 -x VECANNEAL_FAULT_POISON_ANCHORS "$BIN" "${common[@]}" --backend cuda \
  --set precision=fp16 --out "$WORK/fp16_poison.h5" > "$WORK/fp16_poison.log" 2>&1 || { cat "$WORK/fp16_poison.log"; fail "cuda fp16 with poisoned anchor storage"; }
"$TOOL" close "$WORK/fp16_poison.h5" "$WORK/fp16.h5" 0 || fail "poisoned anchor storage changed the fp16 index"
# Several ranks on one GPU (gpu_collectives = mpi: NCCL refuses two ranks on one device): the same
# multi-rank code paths as several GPUs, apart from NCCL; against 1 rank as for the GPU counts below.
for p in 2 3 4; do
  run_np $p "${common[@]}" --backend cuda --set precision=tf32 --set gpu_collectives=mpi --out "$WORK/shared${p}.h5" > "$WORK/shared$p.log" \
    || { cat "$WORK/shared$p.log"; fail "$p ranks on one GPU"; }
  grep -q "not used: gpu_collectives = mpi" "$WORK/shared$p.log" || fail "$p ranks on one GPU: NCCL not reported unused"
  "$TOOL" close "$WORK/shared$p.h5" "$WORK/gpu_tf32.h5" 1e-5 || fail "$p ranks on one GPU differ from 1 rank"
done
# The parity preset on the GPU: the farthest-point initialisation runs on the device (cuda_init.cu),
# and its fp32 passes are small enough for the DIRECT kernel, which computes the CPU fused kernel's
# values: the prototype's large case gives the CPU backend's index bit for bit, on 1 rank (the whole
# init on the device) and on 3 ranks sharing the GPU (the steps' keys reduced over the ranks) against
# 3 CPU ranks (the same sums in the same order).
run_np 1 gen --kind vlc-demo --n 10000 --d 128 --out "$WORK/demo.h5" > /dev/null || fail gen
parity=(compress --config "$VECANNEAL_SOURCE/configs/vlc-demo-large.ini" --input "$WORK/demo.h5:/train" --set progress_every=0 --set threads=2)
for p in 1 3; do
  run_np $p "${parity[@]}" --backend cpu --out "$WORK/par_cpu$p.h5" > /dev/null || fail "parity case on the CPU, $p rank(s)"
  run_np $p "${parity[@]}" --backend cuda --set gpu_collectives=mpi --out "$WORK/par_gpu$p.h5" > "$WORK/par_gpu$p.log" \
    || { cat "$WORK/par_gpu$p.log"; fail "parity case on the GPU, $p rank(s)"; }
  "$TOOL" close "$WORK/par_gpu$p.h5" "$WORK/par_cpu$p.h5" 0 || fail "parity case, $p rank(s): the GPU's index differs from the CPU's"
  [ "$("$TOOL" attr "$WORK/par_gpu$p.h5" final_energy)" = "$("$TOOL" attr "$WORK/par_cpu$p.h5" final_energy)" ] \
    || fail "parity case, $p rank(s): the GPU's energy differs from the CPU's"
done
for p in 2 4; do
  [ "$ngpu" -ge $p ] || { echo "only $ngpu GPU(s): $p-GPU comparison not run"; continue; }
  for prec in fp32 tf32; do
    run_np $p "${common[@]}" --backend cuda --set precision=$prec --out "$WORK/gpu${p}_$prec.h5" > /dev/null || fail "$p GPUs"
    "$TOOL" close "$WORK/gpu${p}_$prec.h5" "$WORK/gpu_$prec.h5" 1e-5 || fail "$p GPUs ($prec) differ from 1 GPU"
  done
done
# Each rank narrows the devices it sees to its own GPU before the driver starts (backend/visible.h): on two
# GPUs both ranks name device 0, at distinct bus ids; VECANNEAL_ALL_GPUS=1 leaves both visible (rank 1 on
# device 1) and gives the same GPUs and the same index bit for bit.
if [ "$ngpu" -ge 2 ]; then
  run_np 2 "${common[@]}" --backend cuda --set precision=fp32 --metrics "$WORK/narrow.json" --out "$WORK/narrow.h5" \
    > /dev/null || fail "2 GPUs, devices narrowed"
  (export VECANNEAL_ALL_GPUS=1; run_np 2 "${common[@]}" --backend cuda --set precision=fp32 --metrics "$WORK/all.json" \
    --out "$WORK/all.h5" > /dev/null) || fail "2 GPUs, VECANNEAL_ALL_GPUS=1"
  python3 - "$WORK/narrow.json" "$WORK/all.json" << 'PY' || fail "the ranks' devices are not narrowed to their own GPUs"
import json, sys
narrow, every = ([e["device"] for e in json.load(open(f))["layout"]] for f in sys.argv[1:3])
print("narrowed:", narrow, "| VECANNEAL_ALL_GPUS=1:", every)
bus = lambda d: d.split(" bus ")[-1]
ok = all(d.startswith("cuda device 0,") for d in narrow) and bus(narrow[0]) != bus(narrow[1])
ok = ok and every[1].startswith("cuda device 1,") and [bus(d) for d in every] == [bus(d) for d in narrow]
sys.exit(0 if ok else 1)
PY
  "$TOOL" close "$WORK/narrow.h5" "$WORK/all.h5" 0 || fail "VECANNEAL_ALL_GPUS=1 gives another index"
fi
# Out-of-core: 1 MB chunks (15 of them); the start line, the progress lines and the metrics say so.
# fp16's pinned copy holds the 16-bit rows: half tf32's bytes copied over the same passes.
cp "$WORK/fp16.h5" "$WORK/gpu_fp16.h5"
for prec in fp32 tf32 fp16; do
  run_np 1 "${common[@]}" --backend cuda --set precision=$prec --set gpu_stream=on --set gpu_stream_chunk_mb=1 --set progress_every=5 \
    --metrics "$WORK/s_$prec.json" --out "$WORK/s_$prec.h5" > "$WORK/s_$prec.log" || { cat "$WORK/s_$prec.log"; fail "streamed $prec"; }
  grep -q "rows streamed from pinned host memory" "$WORK/s_$prec.log" || fail "streaming not reported"
  grep -q "stream GB/s" "$WORK/s_$prec.log" || fail "no streaming column in the progress lines"
  grep -q '"gpu_stream"' "$WORK/s_$prec.json" || fail "no streaming in the metrics"
  "$TOOL" close "$WORK/s_$prec.h5" "$WORK/gpu_$prec.h5" 1e-5 || fail "streamed ($prec) differs from resident"
done
python3 - "$WORK/s_tf32.json" "$WORK/s_fp16.json" <<'PY' || fail "streamed fp16 did not copy half the bytes"
import json, sys
tf32, fp16 = (json.load(open(p))["gpu_stream"]["copied_bytes_per_rank"] for p in sys.argv[1:])
print("streamed bytes copied: tf32 %.1f MB, fp16 %.1f MB" % (tf32 / 1e6, fp16 / 1e6))
assert 0.45 <= fp16 / tf32 <= 0.55
PY
if [ "$ngpu" -ge 2 ]; then
  run_np 2 "${common[@]}" --backend cuda --set gpu_stream=on --set gpu_stream_chunk_mb=1 --out "$WORK/s2.h5" > /dev/null || fail "streamed, 2 GPUs"
  "$TOOL" close "$WORK/s2.h5" "$WORK/gpu_tf32.h5" 1e-5 || fail "streamed on 2 GPUs differs from 1 GPU resident"
fi
# gpu_stream = auto streams only rows that do not fit: 600000 x 64 rows need about 369 MB resident
# and 215 MB streamed in 8 MB chunks (va_cuda_bytes_needed); under a 300 MB limit they stream. At
# 600000 rows a near-tie may flip: at most 0.01% of the assignments may differ.
run_np 2 gen --out "$WORK/big.h5" --n 600000 --d 64 --clusters 40 --spread 0.6 > /dev/null || fail gen
big=(compress --input "$WORK/big.h5:/train" --anchors 48 --set max_iter=5 --set tol=0 --set min_changes=0 --set gpu_min_work=0 --backend cuda)
run_np 1 "${big[@]}" --metrics "$WORK/big_r.json" --out "$WORK/big_r.h5" > "$WORK/big_r.log" || { cat "$WORK/big_r.log"; fail "big resident"; }
run_np 1 "${big[@]}" --set gpu_mem_limit_mb=300 --set gpu_stream_chunk_mb=8 --out "$WORK/big_s.h5" > "$WORK/big_s.log" || { cat "$WORK/big_s.log"; fail "big auto"; }
! grep -q "streamed from pinned" "$WORK/big_r.log" || fail "auto streamed rows that fit"
grep -q "do not fit the GPU" "$WORK/big_s.log" && grep -q "streamed from pinned" "$WORK/big_s.log" || fail "auto did not stream"
"$TOOL" close "$WORK/big_s.h5" "$WORK/big_r.h5" 1e-5 1e-4 || fail "auto-streamed differs from resident"
# fp16 rows are resident in 16 bits alone: at 600000 x 64 about 320 MB (va_cuda_bytes_needed). While
# they are preprocessed on the GPU they are float32 in place of the 16-bit rows: 77 MB more, plus 7 MB
# (va_cuda_prep_bytes); kept side by side, the two would take 154 MB more. Under a 440 MB limit (418
# MB usable) they are preprocessed on the GPU all the same; under 360 MB (342 usable) they stay resident
# and are preprocessed on the host instead. The three give the same index bit for bit. The metrics' GPU
# memory (the drop in the device's free memory): during the loop the fp16 job holds at least 90% of the
# 77 MB that its 16-bit rows save against tf32's float32 rows; preprocessing on the GPU held between a
# quarter and 60% of the 154 MB of float32 rows on top (half: the float32 rows in the 16-bit rows'
# place); each limited job stayed within its limit.
run_np 1 "${big[@]}" --set precision=fp16 --metrics "$WORK/big_h.json" --out "$WORK/big_h.h5" > "$WORK/big_h.log" \
  || { cat "$WORK/big_h.log"; fail "big fp16"; }
run_np 1 "${big[@]}" --set precision=fp16 --set gpu_mem_limit_mb=440 --metrics "$WORK/big_hg.json" --out "$WORK/big_hg.h5" > "$WORK/big_hg.log" \
  || { cat "$WORK/big_hg.log"; fail "big fp16 under a 440 MB limit"; }
run_np 1 "${big[@]}" --set precision=fp16 --set gpu_mem_limit_mb=360 --metrics "$WORK/big_hp.json" --out "$WORK/big_hp.h5" > "$WORK/big_hp.log" \
  || { cat "$WORK/big_hp.log"; fail "big fp16 under a 360 MB limit"; }
python3 - "$WORK/big_r.json" "$WORK/big_h.json" "$WORK/big_hg.json" "$WORK/big_hp.json" <<'PY' || fail "GPU memory of the fp16 jobs"
import json, sys
tf32, fp16, gpu440, host = (json.load(open(p))["gpu_memory_bytes"] for p in sys.argv[1:])
rows16, rows32 = 600064 * 64 * 2, 600064 * 64 * 4
mb = lambda b: "%.1f MB" % (b / 1e6)
print("GPU memory: tf32 loop", mb(tf32["loop"]["max"]), "| fp16 loop", mb(fp16["loop"]["max"]), "peak", mb(fp16["peak"]["max"]),
      "| fp16 under 440 MiB: peak", mb(gpu440["peak"]["max"]), "| fp16 preprocessed on the host: loop", mb(host["loop"]["max"]), "peak", mb(host["peak"]["max"]))
assert tf32["loop"]["max"] - fp16["loop"]["max"] >= 0.9 * rows16, "fp16 rows do not save their 16 bits"
prep = fp16["peak"]["max"] - fp16["loop"]["max"]
assert prep >= 0.25 * rows32, "no float32 rows seen while preprocessing on the GPU"
assert prep <= 0.6 * rows32, "float32 rows beside the 16-bit ones while preprocessing on the GPU"
assert gpu440["peak"]["max"] <= 440 * 1048576, "over the 440 MB limit"
assert host["peak"]["max"] <= 360 * 1048576, "over the 360 MB limit"
PY
! grep -q "preprocessing them on the host" "$WORK/big_h.log" || fail "fp16 rows preprocessed on the host without a limit"
! grep -q "preprocessing them on the host" "$WORK/big_hg.log" || { cat "$WORK/big_hg.log"; fail "fp16 under a 440 MB limit: want the rows preprocessed on the GPU"; }
grep -q "preprocessing them on the host" "$WORK/big_hp.log" && ! grep -q "streamed from pinned" "$WORK/big_hp.log" \
  || { cat "$WORK/big_hp.log"; fail "fp16 under a 360 MB limit: want resident rows preprocessed on the host"; }
"$TOOL" close "$WORK/big_hg.h5" "$WORK/big_h.h5" 0 || fail "fp16 under a 440 MB limit differs"
"$TOOL" close "$WORK/big_hp.h5" "$WORK/big_h.h5" 0 || fail "fp16 rows preprocessed on the host differ from on the GPU"
# Not even streamed: backend cuda stops (exit 5), auto stays on the CPU.
run_np 1 "${common[@]}" --backend cuda --set gpu_mem_limit_mb=50 --out "$WORK/x.h5" > "$WORK/x.log" 2>&1
[ $? -eq 5 ] || { cat "$WORK/x.log"; fail "backend cuda under a 50 MB limit: want exit 5"; }
run_np 1 "${common[@]}" --backend auto --set gpu_mem_limit_mb=50 --out "$WORK/x.h5" > "$WORK/x.log" 2>&1 || fail "auto under a 50 MB limit"
grep -q "backend cpu" "$WORK/x.log" || fail "auto under a 50 MB limit did not stay on the CPU"
# Resume on the GPU is bitwise identical too, resident and streamed.
VECANNEAL_FAULT_STOP_AFTER=7 timeout 120 mpirun -n 1 -x VECANNEAL_FAULT_STOP_AFTER -x NCCL_NVLS_ENABLE "$BIN" "${common[@]}" --backend cuda --out "$WORK/r.h5" > /dev/null 2>&1
[ $? -eq 75 ] || fail "gpu stop"
run_np 1 "${common[@]}" --backend cuda --out "$WORK/r.h5" --resume "$WORK/r.h5.ckpt.h5" > /dev/null || fail "gpu resume"
"$TOOL" same "$WORK/r.h5" "$WORK/gpu_tf32.h5" || fail "gpu resume differs"
stream=(--set gpu_stream=on --set gpu_stream_chunk_mb=1)
VECANNEAL_FAULT_STOP_AFTER=7 timeout 120 mpirun -n 1 -x VECANNEAL_FAULT_STOP_AFTER -x NCCL_NVLS_ENABLE "$BIN" "${common[@]}" --backend cuda "${stream[@]}" --out "$WORK/rs.h5" > /dev/null 2>&1
[ $? -eq 75 ] || fail "gpu stop (streamed)"
run_np 1 "${common[@]}" --backend cuda "${stream[@]}" --out "$WORK/rs.h5" --resume "$WORK/rs.h5.ckpt.h5" > /dev/null || fail "gpu resume (streamed)"
"$TOOL" same "$WORK/rs.h5" "$WORK/s_tf32.h5" || fail "gpu resume (streamed) differs"
# Bad rows on the GPU read paths (straight to the device; streamed into the pinned copy), 2 ranks
# (sharing a GPU: MPI sums): NaN (rank 0's rows), Inf (rank 1's), a damaged chunk (rank 1's rows: the
# read fails half-way, the GPU context already made) and a truncated file (refused at open) stop every
# rank with exit 3 and one message from rank 0, and leave no index behind.
for f in nan inf damaged; do "$TOOL" make-bad "$WORK/$f.h5" $f || fail "make-bad $f"; done
cp "$data" "$WORK/trunc.h5" && truncate -s $(( $(stat -c %s "$data") / 2 )) "$WORK/trunc.h5"
for f in nan inf damaged trunc; do
  for s in off on; do
    rm -f "$WORK/bad.h5"*
    VECANNEAL_TRACE_EXIT=1 timeout 120 mpirun -n 2 --oversubscribe -x VECANNEAL_TRACE_EXIT -x NCCL_NVLS_ENABLE "$BIN" compress --input "$WORK/$f.h5:/train" \
      --anchors 4 --backend cuda --set gpu_min_work=0 --set gpu_collectives=mpi --set gpu_stream=$s --out "$WORK/bad.h5" > "$WORK/bad.log" 2>&1
    rc=$?
    echo "bad input $f, gpu_stream $s: rc $rc, $(grep 'vecanneal: error:' "$WORK/bad.log" | head -1)"
    [ $rc -eq 3 ] && [ "$(grep -c 'vecanneal: error:' "$WORK/bad.log")" -eq 1 ] && [ "$(grep -c 'exits with code 3' "$WORK/bad.log")" -eq 2 ] ||
      { cat "$WORK/bad.log"; fail "bad input $f (gpu_stream $s): want exit 3 on both ranks and one message"; }
    ! ls "$WORK/bad.h5"* > /dev/null 2>&1 || fail "bad input $f (gpu_stream $s) left $(ls "$WORK/bad.h5"*)"
  done
done
# Two ranks on one GPU with NCCL (device = 0 for both): one message from rank 0, exit 2 on both ranks,
# before anything is read or written.
rm -f "$WORK/bad.h5"*
VECANNEAL_TRACE_EXIT=1 timeout 120 mpirun -n 2 --oversubscribe -x VECANNEAL_TRACE_EXIT -x NCCL_NVLS_ENABLE "$BIN" "${common[@]}" --backend cuda \
  --set device=0 --out "$WORK/bad.h5" > "$WORK/bad.log" 2>&1
rc=$?
echo "two ranks on GPU 0 with NCCL: rc $rc, $(grep 'vecanneal: error:' "$WORK/bad.log" | head -1)"
[ $rc -eq 2 ] && [ "$(grep -c 'vecanneal: error:' "$WORK/bad.log")" -eq 1 ] && [ "$(grep -c 'exits with code 2' "$WORK/bad.log")" -eq 2 ] &&
  grep -q "one GPU per rank" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "two ranks on one GPU with NCCL: want exit 2 and one message"; }
! ls "$WORK/bad.h5"* > /dev/null 2>&1 || fail "two ranks on one GPU left $(ls "$WORK/bad.h5"*)"
# backend auto stays on the CPU then, and says why
run_np 2 "${common[@]}" --backend auto --set device=0 --out "$WORK/shared.h5" > "$WORK/shared.log" 2>&1 || { cat "$WORK/shared.log"; fail "auto, two ranks on GPU 0"; }
grep -q "ranks share a GPU" "$WORK/shared.log" && grep -q "^backend cpu" "$WORK/shared.log" || { cat "$WORK/shared.log"; fail "auto with a shared GPU did not stay on the CPU"; }
echo "PASS: gpu backend"
