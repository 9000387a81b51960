#!/usr/bin/env bash
# embed_cpu.sh: CPU throughput of `vecanneal embed` against sentence-transformers on the same corpus
# (docs/embed.md quotes its output). Corpus: every 4th line of the first 9700 lines of the committed
# tokenizer corpus (WordNet glosses, English fortunes, fortunes in 8 other languages), LINES at most.
# Runs vecanneal embed as 1 rank x 1 thread, 1 rank x 2 threads and 2 ranks x 1 thread (mpiexec --bind-to
# none: Open MPI binds one or two ranks to a core each by default, which would leave a rank one core), then
# sentence-transformers with torch at 1 and 2 threads (when .venv/embed-fixture exists: made by
# tests/embed/make_fixture.sh), each REPEAT times keeping the fastest.
# Wall-clock numbers depend on what else the machine runs: CPU seconds are printed beside them.
# Check (bench/verify.py; the last line says passed or FAILED, exit 1 on a failure): the rows of each
# vecanneal run (1r x 1t, 1r x 2t, 2r x 1t) against sentence-transformers' rows of the same corpus:
# cosine >= 0.9999 on every row (EMBED_FP32, the tolerance of the embed_encoder test), min and mean
# printed. Without sentence-transformers the reference is its committed output instead: vecanneal embeds
# tests/data/embed_ref.txt (200 lines) and its rows are held to tests/data/embed_ref.f32 alike.
# usage: bench/embed_cpu.sh [LINES] [REPEAT]   (after building and scripts/fetch-model)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
V="python3 $ROOT/bench/verify.py"
LINES="${1:-2425}" REPEAT="${2:-2}"
VA="${VECANNEAL:-$ROOT/build/vecanneal}"
MODEL="${VECANNEAL_MODEL:-$ROOT/models/all-MiniLM-L6-v2}"
PY="$ROOT/.venv/embed-fixture/bin/python"
OUT="${BENCH_OUT:-$ROOT/build/bench-embed}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mkdir -p "$OUT"
export VERIFY_LOG=$OUT/verification.log; : > "$VERIFY_LOG"
trap 'rc=$?; [ $rc -eq 0 ] || { $V fail "bench/embed_cpu.sh stopped at a failed step (exit $rc)"; $V verdict; }' EXIT
[[ -x "$VA" ]] || { echo "build first: $VA missing"; false; }
[[ -f "$MODEL/model.safetensors" ]] || { echo "run scripts/fetch-model first"; false; }
zcat "$ROOT/tests/data/embed_corpus.txt.gz" | awk -v max="$LINES" 'NR <= 9700 && NR % 4 == 1 && ++k <= max' > "$OUT/corpus.txt"
n=$(wc -l < "$OUT/corpus.txt")
echo "corpus: $n lines, $(wc -c < "$OUT/corpus.txt") bytes; machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load: $(cut -d' ' -f1-3 /proc/loadavg)"

run_va() { # name ranks threads
  local best="" i
  for ((i = 0; i < REPEAT; i++)); do
    /usr/bin/time -f "%e %U %S" -o "$OUT/$1.time" mpiexec -n "$2" --bind-to none "$VA" embed \
      --input "$OUT/corpus.txt" --out "$OUT/$1.h5" --model "$MODEL" --threads "$3" --batch 64 --progress 0 \
      --metrics "$OUT/$1.json" > "$OUT/$1.log" 2>&1
    local cpu wall u s
    read -r wall u s < "$OUT/$1.time"
    local tok_enc
    tok_enc=$(python3 -c "import json;m=json.load(open('$OUT/$1.json'));p=m['phases_seconds'];print(round(p['tokenize']['max']+p['encode']['max'],3))")
    cpu=$(python3 -c "import json;print(json.load(open('$OUT/$1.json'))['tokenize_encode_cpu_seconds'])")
    if [[ -z "$best" ]] || (( $(echo "$tok_enc < ${best%% *}" | bc) )); then best="$tok_enc $wall $cpu"; fi
  done
  read -r te wall cpu <<< "$best"
  printf "| vecanneal embed | %d rank(s) x %d thread(s) | %s | %.1f | %.2f | %.1f |\n" "$2" "$3" "$te" "$(echo "$n / $te" | bc -l)" "$cpu" "$(echo "$n / $cpu" | bc -l)"
}

echo
echo "| implementation | parallelism | tokenize+encode s | sentences/s | CPU s (tokenize+encode, all threads/ranks) | sentences per CPU s |"
echo "|---|---|---|---|---|---|"
run_va r1t1 1 1
run_va r1t2 1 2
run_va r2t1 2 1
if [[ -x "$PY" ]]; then
  for t in 1 2; do
    HF_HUB_OFFLINE=1 "$PY" "$ROOT/bench/embed_cpu.py" "$MODEL" "$OUT/corpus.txt" --threads $t --batch 64 --repeat "$REPEAT" \
      --save "$OUT/st_t$t.f32" 2>/dev/null | tail -1 > "$OUT/st_t$t.json"
    python3 -c "import json;m=json.load(open('$OUT/st_t$t.json'));print('| sentence-transformers (torch %s) | 1 process x %d thread(s) | %.3f | %.1f | %.2f | %.1f |'%(m['torch'],m['threads'],m['wall_s'],m['lines_per_s'],m['cpu_s'],m['lines_per_cpu_s']))"
  done
  for run in r1t1 r1t2 r2t1; do
    $V cosine "$OUT/$run.h5:/train" "$OUT/st_t1.f32" fp32 --label "vecanneal $run against sentence-transformers" || true
  done
else
  echo "(sentence-transformers not run: create .venv/embed-fixture with tests/embed/make_fixture.sh; checking against"
  echo " its committed rows of tests/data/embed_ref.txt instead)"
  mpiexec -n 1 "$VA" embed --input "$ROOT/tests/data/embed_ref.txt" --out "$OUT/ref.h5" --model "$MODEL" --threads 2 --progress 0 > "$OUT/ref.log" 2>&1
  $V cosine "$OUT/ref.h5:/train" "$ROOT/tests/data/embed_ref.f32" fp32 --label "vecanneal against tests/data/embed_ref.f32" || true
fi
trap - EXIT
exec $V verdict
