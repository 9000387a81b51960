#!/usr/bin/env bash
# check.sh: classify_crash.py on stored sanitizer reports; each file's name starts with the verdict it
# must get (hdf5-... or ours-...). Exit 0 only when every report gets its verdict.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bad=0 n=0
for f in "$HERE"/*.report; do
  want=$(basename "$f"); want=${want%%-*}
  got=$(grep -v '^#' "$f" | python3 "$HERE/../classify_crash.py" | cut -d' ' -f1)
  n=$((n + 1))
  if [ "$got" != "$want" ]; then echo "FAIL: $(basename "$f"): classified '$got', want '$want'"; bad=$((bad + 1)); fi
done
[ $n -gt 0 ] || { echo "FAIL: no reports in $HERE"; exit 1; }
echo "classify_crash: $((n - bad)) of $n reports classified as their names say"
[ $bad -eq 0 ]
