#!/usr/bin/env bash
# token_ids.sh: end-to-end test of `vecanneal embed --token-ids-out` (docs/embed.md, "Token ids"). A sample
# of the committed corpus (every 50th of its 15,582 lines: WordNet glosses, fortunes in nine languages,
# over-long lines, adversarial lines, the code-point sweep) is tokenized with --token-ids-out alone (no
# --out: no encoder) on 1, 2 and 3 ranks; each file must hold exactly the Hugging Face reference ids of
# the tokenizer test, so the three are identical. Then on 2 ranks with --out too and --max-tokens 24
# (the ids encoded, after truncation) into a dataset in a group; a model directory with nothing but
# vocab.txt serves the tokenize-only run; and the agreed failures leave nothing behind: a missing
# directory (4), the token ids file naming an input or the vectors file, a dataset named 'lengths' (2).
# usage: token_ids.sh VECANNEAL IDCHECK MPIEXEC MODEL_DIR DATA_DIR WORK_DIR
set -uo pipefail
VA="$1" CHECK="$2" MPIEXEC="$3" MODEL="$4" DATA="$5" WORK="$6"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"
STEP=50

if [[ ! -f "$MODEL/model.safetensors" || ! -f "$MODEL/vocab.txt" ]]; then
  echo "FAIL: model files missing in $MODEL: run scripts/fetch-model first (it installs all-MiniLM-L6-v2 under models/)"
  exit 1
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
lines=$("$CHECK" lines "$DATA" "$STEP" sample.txt) || { echo "FAIL: cannot write the sample"; exit 1; }
echo "sample: $lines lines (every ${STEP}th line of embed_corpus.txt.gz)"

# 1. tokenize only (no --out) on 1, 2 and 3 ranks: the reference ids every time
for p in 1 2 3; do
  expect 0 ids_$p "$MPIEXEC" -n $p "$VA" embed --input sample.txt --token-ids-out ids$p.h5 --model "$MODEL" \
    --threads 1 --progress 0 --metrics m$p.json
  "$CHECK" check ids$p.h5 /ids "$DATA" "$STEP" 256 || fail "$p rank(s): token ids differ from the reference"
  grep -q 'tokenizing only' ids_$p.log || fail "$p rank(s): the log does not say it only tokenized"
done
grep -q '"output": null' m2.json && grep -q '"backend": "none"' m2.json && grep -q "\"lines\": $lines" m2.json ||
  fail "tokenize-only metrics do not say output null, backend none, $lines lines"
if command -v h5diff > /dev/null; then
  h5diff ids1.h5 ids2.h5 && h5diff ids1.h5 ids3.h5 || fail "the 1-, 2- and 3-rank token ids files differ"
fi

# 2. with the encoder: the ids encoded (truncated to --max-tokens 24, [SEP] kept), in a group
expect 0 ids_encoded "$MPIEXEC" -n 2 "$VA" embed --input sample.txt --out vectors.h5:/train \
  --token-ids-out enc.h5:/tok/ids --max-tokens 24 --batch 16 --model "$MODEL" --backend cpu --threads 1 --progress 0
"$CHECK" check enc.h5 /tok/ids "$DATA" "$STEP" 24 || fail "encoded token ids (max 24) differ from the reference"
[[ -s vectors.h5 ]] || fail "--out and --token-ids-out: no vectors.h5"
# the same truncation without the encoder, on 3 ranks
expect 0 ids_max24 "$MPIEXEC" -n 3 "$VA" embed --input sample.txt --token-ids-out t24.h5:/tok/ids --max-tokens 24 \
  --model "$MODEL" --threads 1 --progress 0
"$CHECK" check t24.h5 /tok/ids "$DATA" "$STEP" 24 || fail "tokenize-only ids at max 24 differ from the reference"

# 3. tokenizing reads the vocabulary alone: no weights, no config
mkdir -p vocab-only && cp "$MODEL/vocab.txt" vocab-only/
expect 0 vocab_only "$MPIEXEC" -n 2 "$VA" embed --input sample.txt --token-ids-out vo.h5 --model vocab-only --progress 0
"$CHECK" check vo.h5 /ids "$DATA" "$STEP" 256 || fail "ids with a vocabulary-only model directory differ"
expect 3 vocab_only_encode "$MPIEXEC" -n 2 "$VA" embed --input sample.txt --out vv.h5 --model vocab-only --progress 0

# 4. agreed failures, nothing left behind
before=$(ls -A | sort)
expect 4 bad_dir "$MPIEXEC" -n 2 "$VA" embed --input sample.txt --out x.h5 --token-ids-out no-such-dir/ids.h5 --model "$MODEL"
grep -q "token ids file 'no-such-dir/ids.h5'" bad_dir.log || fail "bad directory: the message does not name the token ids file"
expect 4 bad_dir_only "$MPIEXEC" -n 3 "$VA" embed --input sample.txt --token-ids-out no-such-dir/ids.h5 --model "$MODEL"
expect 2 ids_is_input "$MPIEXEC" -n 2 "$VA" embed --input sample.txt --token-ids-out sample.txt --model "$MODEL"
expect 2 ids_is_out "$MPIEXEC" -n 2 "$VA" embed --input sample.txt --out x.h5 --token-ids-out ./x.h5:/ids --model "$MODEL"
expect 2 ids_named_lengths "$MPIEXEC" -n 2 "$VA" embed --input sample.txt --token-ids-out x.h5:/lengths --model "$MODEL"
expect 2 usage_no_output "$MPIEXEC" -n 2 "$VA" embed --input sample.txt --model "$MODEL"
after=$(ls -A | grep -v '\.log$' | sort)
[[ "$after" == "$(echo "$before" | grep -v '\.log$')" ]] || fail "failed runs left files: $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"

finish "embed token ids"
