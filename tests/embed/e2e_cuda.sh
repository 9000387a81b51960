#!/usr/bin/env bash
# e2e_cuda.sh: end-to-end test of `vecanneal embed --backend cuda` on 2 MPI ranks (sharing the GPUs
# there are): the 100 lines of e2e.sh embedded by the CPU encoder and by the GPU encoder in fp16, bf16
# and fp32 on the same weights (model-fp16.safetensors), compared row by row (cosine >= 0.999 in
# fp16/bf16, >= 0.999999 in fp32, against the CPU output; >= 0.999 / 0.9999 against sentence-
# transformers' reference), metrics saying backend cuda; the defaults (auto backend and precision, batch
# 256) picking the GPU; `vecanneal compress` on the GPU output (must pick cosine) and `compress --embed`
# (the GPU encoder inside compress), and with the CUDA backend too the vectors staying on the GPU (the
# same index, bit for bit, as compressing the encoder's file); 25,000 lines written from GPU memory in
# several blocks per rank, equal row by row to the same vectors brought to the host batch by batch, and
# written a window at a time while encoding (smaller batches: cosine >= 0.9999); a 13 MB input taking
# cuBLASLt for the dense layers, the smaller ones the encoder's own kernel, rows agreeing (>= 0.9999); with
# no device visible, --backend cuda exits 2 on every rank and auto falls back to the CPU. Exits 77 (SKIP)
# without a CUDA device.
# usage: e2e_cuda.sh VECANNEAL H5CHECK ENCODER_TEST MPIEXEC MODEL_DIR DATA_DIR WORK_DIR H5TOOL
set -uo pipefail
VA="$1" CHECK="$2" PROBE="$3" MPIEXEC="$4" MODEL="$5" DATA="$6" WORK="$7" H5TOOL="$8"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"
MPI=("$MPIEXEC" -n 2)

"$PROBE" --probe > /dev/null 2>&1
probe=$?
if [[ $probe -eq 77 ]]; then echo "SKIP: no CUDA device"; exit 77; fi
[[ $probe -eq 0 ]] || { echo "FAIL: device probe exited $probe"; exit 1; }
if [[ ! -f "$MODEL/model-fp16.safetensors" || ! -f "$MODEL/vocab.txt" ]]; then
  echo "FAIL: model files missing in $MODEL: run scripts/fetch-model first (it installs all-MiniLM-L6-v2 under models/)"
  exit 1
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
sed -n '101,200p' "$DATA/embed_ref.txt" > corpus.txt
COMMON=(--input corpus.txt --model "$MODEL" --weights fp16 --progress 0)

expect 0 embed_cpu "${MPI[@]}" "$VA" embed "${COMMON[@]}" --out cpu.h5 --backend cpu --batch 16
for prec in fp16 bf16 fp32; do
  vs_cpu=0.999 vs_ref=0.999
  [[ $prec == fp32 ]] && vs_cpu=0.999999 vs_ref=0.9999
  expect 0 "embed_$prec" "${MPI[@]}" "$VA" embed "${COMMON[@]}" --out "gpu_$prec.h5" --backend cuda --precision $prec --batch 16 --metrics "m_$prec.json"
  "$CHECK" "gpu_$prec.h5" /train cpu.h5:/train 100 0 $vs_cpu || fail "$prec: GPU rows differ from the CPU encoder's"
  "$CHECK" "gpu_$prec.h5" /train "$DATA/embed_ref.f32" 100 100 $vs_ref || fail "$prec: GPU rows differ from the reference"
  grep -q '"backend": "cuda"' "m_$prec.json" || fail "$prec: metrics JSON does not say backend cuda"
  grep -q "\"precision\": \"$prec\"" "m_$prec.json" || fail "$prec: metrics JSON does not say precision $prec"
  grep -q '"gpu_forward_seconds"' "m_$prec.json" || fail "$prec: metrics JSON has no GPU forward time"
done

# defaults: auto picks the GPU, fp16, batch 256; rank 0 says so
expect 0 embed_auto "${MPI[@]}" "$VA" embed "${COMMON[@]}" --out auto.h5 --metrics m_auto.json
grep '^embed: backend' embed_auto.log
grep -q '^embed: backend cuda' embed_auto.log || fail "auto did not announce backend cuda"
grep -q '"precision": "fp16"' m_auto.json && grep -q '"batch": 256' m_auto.json || fail "auto: not fp16 with batch 256"
"$CHECK" auto.h5 /train cpu.h5:/train 100 0 0.999 || fail "auto: rows differ from the CPU encoder's"

# the GPU output feeds compress, which must choose cosine
expect 0 compress "${MPI[@]}" "$VA" compress --input gpu_fp16.h5:/train --anchors 8 --out index.h5
grep -qi 'cosine' compress.log || fail "compress did not pick cosine from distance = angular"
# compress --embed runs the GPU encoder inside compress; its --embed-out must match the CPU rows
expect 0 compress_embed "${MPI[@]}" "$VA" compress --embed corpus.txt --embed-model "$MODEL" --embed-out ce.h5:/train --anchors 8 --out index2.h5
grep -q '^embed: backend cuda' compress_embed.log || fail "compress --embed did not use the GPU encoder"
"$CHECK" ce.h5 /train cpu.h5:/train 100 0 0.999 || fail "compress --embed: rows differ from the CPU encoder's"

# compress --embed on the CUDA backend: the vectors go from the encoder to the compressor on the GPU
# (unit rows made there with the host's arithmetic). With --embed-out they come to the host for the
# write and are preprocessed there: the two indexes must be equal bit for bit (anchors, assignments,
# energy, total variance); both match compressing the encoder's file (auto.h5: the same defaults) to
# 1e-5 (that job shards the rows by file blocks). Two ranks may share one GPU: MPI sums.
CC=(--anchors 8 --backend cuda --set gpu_min_work=0 --set gpu_collectives=mpi --set max_iter=10 --set progress_every=0)
expect 0 compress_handover "${MPI[@]}" "$VA" compress --embed corpus.txt --embed-model "$MODEL" "${CC[@]}" --out idx_dev.h5
grep -q 'stayed on the GPU' compress_handover.log || fail "compress --embed on the CUDA backend did not keep the vectors on the GPU"
expect 0 compress_host "${MPI[@]}" "$VA" compress --embed corpus.txt --embed-model "$MODEL" --embed-out ce2.h5:/train "${CC[@]}" --out idx_host.h5
! grep -q 'stayed on the GPU' compress_host.log || fail "compress --embed --embed-out claims the vectors stayed on the GPU"
"$H5TOOL" close idx_dev.h5 idx_host.h5 0 || fail "compress --embed: vectors kept on the GPU give another index than via the host"
for a in final_energy total_variance; do
  [[ "$("$H5TOOL" attr idx_dev.h5 $a)" == "$("$H5TOOL" attr idx_host.h5 $a)" ]] || fail "compress --embed on the GPU: $a differs from the host path"
done
expect 0 compress_file "${MPI[@]}" "$VA" compress --input auto.h5:/train "${CC[@]}" --out idx_file.h5
"$H5TOOL" close idx_dev.h5 idx_file.h5 1e-5 || fail "compress --embed on the GPU differs from compressing the encoder's file"

# 25,000 lines (the 100 repeated): embed keeps each rank's vectors in GPU memory and writes them from
# there in several 16 MiB blocks; they must equal, row by row, those that came back to the host batch by
# batch (compress --embed --embed-out), the same batches of the same encoder
for _ in $(seq 250); do cat corpus.txt; done > big.txt
expect 0 embed_big "${MPI[@]}" "$VA" embed --input big.txt --model "$MODEL" --progress 0 --out big.h5 \
  --metrics m_big.json
grep -q '"ranks_with_vectors_in_gpu_memory": 2' m_big.json || fail "embed did not keep the vectors in GPU memory"
expect 0 embed_big_host "${MPI[@]}" "$VA" compress --embed big.txt --embed-model "$MODEL" \
  --embed-out big_host.h5:/train --anchors 8 --out big_idx.h5 --set max_iter=2
"$CHECK" big.h5 /train big_host.h5:/train 25000 0 0.9999999 ||
  fail "vectors written from GPU memory differ from the host path's"
# written while the lines are encoded (no MPI-IO): --batch 32 makes windows of 2,048 lines, several a
# rank, each copied from GPU memory and written by the writing thread while the next ones are encoded
expect 0 embed_big_windows "${MPI[@]}" "$VA" embed --input big.txt --model "$MODEL" --progress 0 --out big_w.h5 \
  --batch 32 --io independent
"$CHECK" big_w.h5 /train big_host.h5:/train 25000 0 0.9999 ||
  fail "vectors written a window at a time while encoding differ from the host path's"

# an input of more than 2^21 tokens at 4 bytes a token (the 100 lines 600 times, 13 MB): the dense layers by
# cuBLASLt, where the jobs above take the encoder's own kernel; the same lines' rows agree
grep -q '"gpu_dense_layers": "mma"' m_big.json || fail "a 25,000-line job did not take the encoder's dense kernel"
for _ in $(seq 600); do cat corpus.txt; done > long.txt
expect 0 embed_long "${MPI[@]}" "$VA" embed --input long.txt --model "$MODEL" --progress 0 --out long.h5 \
  --metrics m_long.json
grep -q '"gpu_dense_layers": "cublaslt"' m_long.json || fail "a 13 MB input did not take cuBLASLt"
grep -q 'dense layers by cublaslt' embed_long.log || fail "rank 0 did not say the dense layers are cuBLASLt's"
"$CHECK" big.h5 /train long.h5:/train 25000 0 0.9999 || fail "rows by the encoder's dense kernel differ from cuBLASLt's"

# no device visible: --backend cuda refused on every rank, auto on the CPU
expect 2 no_device_cuda env CUDA_VISIBLE_DEVICES= "${MPI[@]}" "$VA" embed "${COMMON[@]}" --out x.h5 --backend cuda
grep -q 'sees no CUDA device' no_device_cuda.log || fail "no message naming the missing device"
expect 0 no_device_auto env CUDA_VISIBLE_DEVICES= "${MPI[@]}" "$VA" embed "${COMMON[@]}" --out nodev.h5 --metrics m_nodev.json
grep -q '"backend": "cpu"' m_nodev.json || fail "auto without a device did not fall back to the CPU"
[[ ! -e x.h5 ]] || fail "a refused run left x.h5 behind"

finish "embed e2e cuda"
