#!/usr/bin/env bash
# embed_compress.sh: `compress --embed CORPUS` (embed and compress in one job, vectors kept in memory)
# gives the same index as `embed` to a file followed by `compress` of that file, on 1 and 3 ranks;
# --embed-out also writes the vectors. Needs the model (scripts/fetch-model).
source "$(dirname "$0")/lib.sh"
SRC=${VECANNEAL_SOURCE:?}
MODEL=${VECANNEAL_MODEL:-$SRC/models/all-MiniLM-L6-v2}
[ -f "$MODEL/model.safetensors" ] || fail "model files missing under $MODEL: run scripts/fetch-model first"
corpus=$SRC/tests/data/embed_small.jsonl
common=(--anchors 3 --set max_iter=8 --set progress_every=0 --set threads=1)
run_np 2 embed --input "$corpus" --out "$WORK/vec.h5:/train" --model "$MODEL" > /dev/null || fail "embed"
run_np 2 compress --input "$WORK/vec.h5:/train" --out "$WORK/two_step.h5" "${common[@]}" > /dev/null || fail "compress of the vectors"
for p in 1 3; do
  run_np $p compress --embed "$corpus" --embed-model "$MODEL" --embed-out "$WORK/vec$p.h5:/train" --out "$WORK/one_job$p.h5" "${common[@]}" \
    > "$WORK/one_job$p.log" || { cat "$WORK/one_job$p.log"; fail "compress --embed on $p ranks"; }
  "$TOOL" close "$WORK/one_job$p.h5" "$WORK/two_step.h5" 1e-5 || fail "compress --embed ($p ranks) differs from embed + compress"
  [ "$("$TOOL" attr "$WORK/one_job$p.h5" metric)" = cosine ] || fail "metric is not cosine"
  [ -f "$WORK/vec$p.h5" ] || fail "--embed-out wrote nothing"
done
run_np 2 compress --embed "$corpus" --embed-model "$MODEL" --out "$WORK/nowrite.h5" "${common[@]}" > /dev/null || fail "compress --embed without --embed-out"
{ [ -f "$WORK/unwritten.h5" ] || [ -f unwritten.h5 ]; } && fail "vectors written without --embed-out"
echo "PASS: compress --embed"
