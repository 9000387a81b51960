#!/usr/bin/env bash
# embed_gpu.sh: on one GPU, from the repository root: builds the CUDA tree, runs the GPU embed tests
# (embed_encoder_cuda, embed_e2e_cuda), then measures sentences/s of vecanneal against
# sentence-transformers (PyTorch, fp16, model.half(), the same batch size) on the same texts, in one run:
#   corpora: the test corpus (tests/data/embed_corpus.txt.gz, 15,582 lines), the same 8 times over, and
#            synthetic lines of exactly 32, 128 and 256 tokens (bench/embed_gpu.py synth: one-token words);
#   the encoder alone: bench/embed_gpu_bench (CUDA events around each batch's forward, two batches in
#            flight) vs the PyTorch model's forward on pre-tokenized GPU batches (CUDA events), both
#            sorted longest first by tokens and cut into batches of BATCH;
#   the whole command: `vecanneal embed --backend cuda` wall time (process start, CUDA start-up, model
#            load, read, tokenize, encode, HDF5 write; best of 2) and its tokenize + encode phases, vs
#            SentenceTransformer.encode() (tokenize, forward, copy back; model already loaded and warm).
# The model directory needs vocab.txt, config.json, model-fp16.safetensors, the sentence-transformers
# configs and model.safetensors (the fp16 file or a link to it: sentence-transformers loads that name).
# Check (bench/verify.py; the last line says passed or FAILED, exit 1 on a failure): on every corpus the
# rows of `vecanneal embed` (fp16) against sentence-transformers' fp16 rows of the same lines: cosine >=
# 0.999 on every row (EMBED_FP16, the fp16 tolerance of the embed tests), min and mean printed; a run
# that fails, or a peer that writes no rows, fails the check. The tests are reported, not counted.
# Writes OUT (default ./out-embed-gpu): log.txt, summary.md, results.csv, ctest.log, details.tar.gz.
# usage: bench/embed_gpu.sh [MODEL_DIR] [BATCH] [REPS]     (SKIP_TESTS=1 to skip the tests)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
MODEL=$(realpath "${1:-.gpu-model}") BATCH=${2:-256} REPS=${3:-10}
OUT=${OUT:-$PWD/out-embed-gpu}
W=${WORK:-/tmp/embed-gpu}
B=${BUILD_DIR:-build-gpu}
mkdir -p "$OUT" "$W"
exec > >(tee "$OUT/log.txt") 2>&1
export VERIFY_LOG=$OUT/verification.log; : > "$VERIFY_LOG"
V="python3 bench/verify.py"
rm -f "$W"/st_*.f32 "$W"/va_*.h5 # rows of an earlier run must not stand in for this one's
echo "== $(date -u +%FT%TZ) $(hostname): $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader), $(nproc) cores"
echo "command: bench/embed_gpu.sh $* (model $MODEL, batch $BATCH, reps $REPS)"
T0=$(date +%s)

cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DVECANNEAL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR="$MODEL" > "$W/cmake.log" 2>&1 &&
  make -C "$B" -j"$(nproc)" vecanneal test_embed_encoder_cuda test_embed_h5check embed_gpu_bench > "$W/build.log" 2>&1 ||
  { tail -40 "$W/cmake.log" "$W/build.log"; $V fail "the build failed"; exec $V verdict; }
echo "== built in $(($(date +%s) - T0)) s"

if [[ "${SKIP_TESTS:-0}" != 1 ]]; then
  (cd "$B" && ctest -V -R 'embed_(encoder|e2e)_cuda') > "$OUT/ctest.log" 2>&1
  grep -E ": (fp32|fp16|bf16)|:   (vs|alone)|CPU encoder|h5check|: ok:|FAIL|SKIP|embed e2e|tests passed|tests failed|Test +#" "$OUT/ctest.log" | cut -c1-400
  echo "== tests done at $(($(date +%s) - T0)) s"
fi

# corpora
zcat tests/data/embed_corpus.txt.gz > "$W/corpus.txt"
for i in 1 2 3 4 5 6 7 8; do cat "$W/corpus.txt"; done > "$W/corpus_x8.txt"
python3 bench/embed_gpu.py synth "$MODEL/vocab.txt" $((BATCH * 40)) 30 1 > "$W/synthetic_32tok.txt"
python3 bench/embed_gpu.py synth "$MODEL/vocab.txt" $((BATCH * 16)) 126 2 > "$W/synthetic_128tok.txt"
python3 bench/embed_gpu.py synth "$MODEL/vocab.txt" $((BATCH * 8)) 254 3 > "$W/synthetic_256tok.txt"
CORPORA=("$W/synthetic_32tok.txt" "$W/synthetic_128tok.txt" "$W/synthetic_256tok.txt" "$W/corpus.txt"
  "$W/corpus_x8.txt")

# the encoder alone: vecanneal (fp16, bf16), then PyTorch
: > "$W/va_forward.jsonl"
for c in "${CORPORA[@]}"; do
  "$B/embed_gpu_bench" "$MODEL" model-fp16.safetensors "$c" "$BATCH" "$REPS" fp16,bf16 | tee -a "$W/va_forward.jsonl"
done
echo "== vecanneal encoder timed at $(($(date +%s) - T0)) s"
python3 bench/embed_gpu.py st "$MODEL" "$BATCH" "$REPS" "$W" "${CORPORA[@]}" 2> "$W/st.err" | tee "$W/st.jsonl"
grep -v -i warn "$W/st.err" | tail -5
echo "== sentence-transformers timed at $(($(date +%s) - T0)) s"

# the whole command, best of 2, one rank on one GPU, fp16
: > "$W/cmd.jsonl"
for c in "${CORPORA[@]}"; do
  name=$(basename "$c" .txt) best=""
  for rep in 1 2; do
    s=$(date +%s.%N)
    "$B/vecanneal" embed --input "$c" --out "$W/va_$name.h5" --model "$MODEL" --weights fp16 --backend cuda --precision fp16 --batch "$BATCH" \
      --progress 0 --metrics "$W/va_$name.json" > "$W/va_$name.log" 2>&1 || { cat "$W/va_$name.log"; $V fail "$name: vecanneal embed failed"; break; }
    e=$(date +%s.%N)
    wall=$(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.3f", b - a }')
    if [[ -z "$best" ]] || awk -v w="$wall" -v b="$best" 'BEGIN { exit !(w < b) }'; then best=$wall; cp "$W/va_$name.json" "$W/va_${name}_best.json"; fi
  done
  python3 - "$c" "$best" "$W/va_${name}_best.json" <<'PYEOF' | tee -a "$W/cmd.jsonl"
import json, sys
m = json.load(open(sys.argv[3]))
p = m["phases_seconds"]
print(json.dumps({"impl": "vecanneal embed", "corpus": sys.argv[1], "precision": m["precision"], "device": m["device"], "lines": m["lines"],
                  "tokens": m["tokens"], "batch": m["batch"], "wall_s": float(sys.argv[2]), "total_s": p["total"]["max"],
                  "load_model_s": p["load_model"]["max"], "read_s": p["read"]["max"], "tokenize_s": p["tokenize"]["max"],
                  "encode_s": p["encode"]["max"], "write_s": p["write"]["max"], "gpu_setup_s": m["gpu_setup_seconds_max"],
                  "gpu_forward_s": m["gpu_forward_seconds"]["max"]}))
PYEOF
  $V cosine "$W/va_$name.h5:/train" "$W/st_$name.f32" fp16 --label "$name, vecanneal fp16 against sentence-transformers fp16"
done
echo "== whole commands timed at $(($(date +%s) - T0)) s"

python3 bench/embed_gpu.py report "$W" > "$OUT/summary.md"
cp "$W/results.csv" "$OUT/results.csv"
(cd "$W" && tar czf "$OUT/details.tar.gz" ./*.jsonl ./*.json ./*.log ./st.err 2> /dev/null)
cat "$OUT/summary.md"
echo "== done in $(($(date +%s) - T0)) s"
$V verdict
