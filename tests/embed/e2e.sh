#!/usr/bin/env bash
# e2e.sh: end-to-end test of `vecanneal embed` (CPU encoder) on 2 MPI ranks: 100 corpus lines (German, Russian,
# Czech, Polish, Spanish, Esperanto, Bulgarian and Chinese fortunes, ANSI escapes, adversarial and
# over-long lines, an empty last line) -> HDF5 checked against sentence-transformers' embeddings row by
# row (so rows are in input order), the same on 3 ranks and written while encoding, the same via JSONL,
# then `vecanneal compress` on the result (which must pick cosine from distance = angular), and the agreed
# failures: usage (2, including --backend cuda with no device visible), missing model, empty corpus and
# bad JSONL (3, also past the first window on one rank or both), each on every rank.
# usage: e2e.sh VECANNEAL H5CHECK MPIEXEC MODEL_DIR DATA_DIR WORK_DIR
set -uo pipefail
VA="$1" CHECK="$2" MPIEXEC="$3" MODEL="$4" DATA="$5" WORK="$6"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"
MPI=("$MPIEXEC" -n 2)

if [[ ! -f "$MODEL/model.safetensors" || ! -f "$MODEL/vocab.txt" ]]; then
  echo "FAIL: model files missing in $MODEL: run scripts/fetch-model first (it installs all-MiniLM-L6-v2 under models/)"
  exit 1
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
sed -n '101,200p' "$DATA/embed_ref.txt" > corpus.txt

# 1. text corpus, 2 ranks
expect 0 embed_text "${MPI[@]}" "$VA" embed --input corpus.txt --out vectors.h5:/train --model "$MODEL" --backend cpu --batch 16 --threads 1 --metrics m.json
grep '^embed:' embed_text.log
"$CHECK" vectors.h5 /train "$DATA/embed_ref.f32" 100 100 || fail "text output differs from the reference"
grep -q '"lines": 100' m.json || fail "metrics JSON lacks \"lines\": 100"
grep -q '"empty_lines": 1' m.json || fail "metrics JSON does not count the empty line"
grep -q '"truncated_lines": [1-9]' m.json || fail "metrics JSON counts no truncated line"
grep -q '"invalid_utf8": [1-9]' m.json || fail "metrics JSON counts no ill-formed UTF-8"
grep -q '"backend": "cpu"' m.json || fail "metrics JSON does not say backend cpu"

# 1b. 3 ranks and a small odd batch: same rows, same order
expect 0 embed_3ranks "$MPIEXEC" -n 3 "$VA" embed --input corpus.txt --out vectors3.h5 --model "$MODEL" --backend cpu --batch 7 --threads 1 --progress 0
"$CHECK" vectors3.h5 /train "$DATA/embed_ref.f32" 100 100 || fail "3-rank output differs from the reference"

# 1c. the vectors written while the lines are encoded (--io independent: no MPI-IO), a window of 64
# lines at a time with --batch 1: the rows written after the encoding (1.), on 1 and 3 ranks
for np in 1 3; do
  expect 0 embed_during_$np "$MPIEXEC" -n $np "$VA" embed --input corpus.txt --out during$np.h5 --model "$MODEL" \
    --backend cpu --batch 1 --threads 1 --progress 0 --io independent
  "$CHECK" during$np.h5 /train vectors.h5:/train 100 0 0.99999999 ||
    fail "$np rank(s): the vectors written during the encoding differ from those written after it"
done

# 2. JSONL input (escapes, nested fields, other key orders) gives the same rows
expect 0 embed_jsonl "${MPI[@]}" "$VA" embed --input "$DATA/embed_small.jsonl" --out small.h5 --model "$MODEL" --backend cpu --threads 1 --progress 0
"$CHECK" small.h5 /train "$DATA/embed_ref.f32" 20 100 || fail "JSONL output differs from the reference"

# 3. the output feeds compress, which must choose cosine by itself
expect 0 compress "${MPI[@]}" "$VA" compress --input vectors.h5:/train --anchors 8 --out index.h5
grep -qi 'cosine' compress.log || fail "compress did not pick cosine from distance = angular"
grep -i 'cosine' compress.log | head -2

# 4. agreed failures
expect 2 usage_missing_out "${MPI[@]}" "$VA" embed --input corpus.txt
expect 2 usage_bad_batch "${MPI[@]}" "$VA" embed --input corpus.txt --out x.h5 --batch 0 --model "$MODEL"
expect 2 usage_bad_backend "${MPI[@]}" "$VA" embed --input corpus.txt --out x.h5 --backend gpu --model "$MODEL"
expect 2 usage_cpu_fp16 "${MPI[@]}" "$VA" embed --input corpus.txt --out x.h5 --backend cpu --precision fp16 --model "$MODEL"
# no device visible (or no CUDA in the build): --backend cuda is refused on every rank
expect 2 usage_no_device env CUDA_VISIBLE_DEVICES= "${MPI[@]}" "$VA" embed --input corpus.txt --out x.h5 --backend cuda --model "$MODEL"
grep -q -e 'sees no CUDA device' -e 'has no CUDA' usage_no_device.log || fail "--backend cuda without a device: no message saying so"
expect 3 missing_model "${MPI[@]}" "$VA" embed --input corpus.txt --out x.h5 --model "$WORK/no-such-model"
grep -q 'scripts/fetch-model' missing_model.log || fail "missing-model message does not point to scripts/fetch-model"
mkdir -p broken && cp "$MODEL/vocab.txt" "$MODEL/config.json" broken/ && head -c 1000000 "$MODEL/model.safetensors" > broken/model.safetensors
expect 3 corrupt_model "${MPI[@]}" "$VA" embed --input corpus.txt --out x.h5 --model broken
: > empty.txt
expect 3 empty_corpus "${MPI[@]}" "$VA" embed --input empty.txt --out x.h5 --model "$MODEL"
expect 3 missing_input "${MPI[@]}" "$VA" embed --input no-such-file.txt --out x.h5 --model "$MODEL"
printf '{"text": "fine"}\n{"text": "fine too"}\n{"txt": "no text field"}\n{"text": "x"}\n' > bad.jsonl
expect 3 bad_jsonl "${MPI[@]}" "$VA" embed --input bad.jsonl --out x.h5 --model "$MODEL"
grep -q 'line 3' bad_jsonl.log || fail "bad JSONL message does not name line 3"
# bad lines past the first window, found while the windows before them are encoded (the rest of the lines
# are tokenized meanwhile): 6000 lines over 2 ranks in windows of 64 x 8 lines, the vectors written
# during the encoding; a bad line on rank 1 alone, then one on each rank (the first in the file is named)
awk 'BEGIN { for (i = 1; i <= 6000; i++) printf "{\"text\": \"line %d\"}\n", i }' > late.jsonl
sed '5000s/.*/{"txt": 1}/' late.jsonl > late1.jsonl
sed -e '2500s/.*/not json/' -e '5000s/.*/{"txt": 1}/' late.jsonl > late2.jsonl
for c in 1 2; do
  expect 3 bad_late$c "${MPI[@]}" "$VA" embed --input late$c.jsonl --out x.h5 --model "$MODEL" --backend cpu --batch 8 \
    --threads 1 --progress 0 --io independent
done
grep -q 'late1.jsonl line 5000: no string field' bad_late1.log || fail "a bad line on rank 1 alone: not named"
grep -q 'late2.jsonl line 2500: not valid JSON' bad_late2.log || fail "bad lines on both ranks: the first is not named"
for f in x.h5 x.h5.partial; do [[ ! -e $f ]] || fail "a failed run left $f behind"; done
grep -h 'vecanneal: error' missing_model.log corrupt_model.log empty_corpus.log bad_jsonl.log bad_late[12].log

finish "embed e2e"
