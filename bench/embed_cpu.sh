#!/usr/bin/env bash
# embed_cpu.sh: CPU throughput of `vecanneal embed` against sentence-transformers on the same corpus
# (docs/embed.md quotes its output). Corpus: every 4th line of the first 9700 lines of the committed
# tokenizer corpus (WordNet glosses, English fortunes, fortunes in 8 other languages), LINES at most.
# Runs vecanneal embed as 1 rank x 1 thread, 1 rank x 2 threads and 2 ranks x 1 thread, then
# sentence-transformers with torch at 1 and 2 threads (when .venv/embed-fixture exists: made by
# tests/embed/make_fixture.sh), each REPEAT times keeping the fastest, and compares the embeddings.
# Wall-clock numbers depend on what else the machine runs: CPU seconds are printed beside them.
# usage: bench/embed_cpu.sh [LINES] [REPEAT]   (after building and scripts/fetch-model)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LINES="${1:-2425}" REPEAT="${2:-2}"
VA="${VECANNEAL:-$ROOT/build/vecanneal}"
MODEL="${VECANNEAL_MODEL:-$ROOT/models/all-MiniLM-L6-v2}"
PY="$ROOT/.venv/embed-fixture/bin/python"
OUT="${BENCH_OUT:-$ROOT/build/bench-embed}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
[[ -x "$VA" ]] || { echo "build first: $VA missing"; exit 1; }
[[ -f "$MODEL/model.safetensors" ]] || { echo "run scripts/fetch-model first"; exit 1; }
mkdir -p "$OUT"
zcat "$ROOT/tests/data/embed_corpus.txt.gz" | awk -v max="$LINES" 'NR <= 9700 && NR % 4 == 1 && ++k <= max' > "$OUT/corpus.txt"
n=$(wc -l < "$OUT/corpus.txt")
echo "corpus: $n lines, $(wc -c < "$OUT/corpus.txt") bytes; machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load: $(cut -d' ' -f1-3 /proc/loadavg)"

run_va() { # name ranks threads
  local best="" i
  for ((i = 0; i < REPEAT; i++)); do
    /usr/bin/time -f "%e %U %S" -o "$OUT/$1.time" mpiexec -n "$2" "$VA" embed --input "$OUT/corpus.txt" --out "$OUT/$1.h5" \
      --model "$MODEL" --threads "$3" --batch 64 --progress 0 --metrics "$OUT/$1.json" > "$OUT/$1.log" 2>&1
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
  # agreement of the two implementations on the whole bench corpus
  "$PY" - "$OUT/r1t1.h5" "$OUT/st_t1.f32" <<'PYEOF'
import sys, numpy as np
try:
    import h5py
except ImportError:
    h5py = None
ref = np.fromfile(sys.argv[2], dtype="<f4").reshape(-1, 384).astype(np.float64)
if h5py is None:
    print("(install h5py in the venv to compare embeddings)"); sys.exit(0)
x = h5py.File(sys.argv[1], "r")["/train"][:].astype(np.float64)
cos = (x * ref).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(ref, axis=1)
print("\nvecanneal vs sentence-transformers on the bench corpus: min cosine %.12f (1 - cos = %.1e), mean 1 - cos %.1e over %d lines"
      % (cos.min(), 1 - cos.min(), (1 - cos).mean(), len(cos)))
PYEOF
else
  echo "(sentence-transformers not run: create .venv/embed-fixture with tests/embed/make_fixture.sh)"
fi
