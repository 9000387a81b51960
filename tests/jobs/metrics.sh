#!/usr/bin/env bash
# metrics.sh: the --metrics file is valid JSON whatever the paths hold (tab, quote, backslash,
# non-ASCII, a byte that is not UTF-8), with the run header (schema, version, commit, command line,
# host, start time, one layout entry per rank) and typed values (numbers as numbers) on 1 and 3 ranks.
source "$(dirname "$0")/lib.sh"
run_np 1 gen --out "$WORK/g.h5" --n 3000 --d 8 > /dev/null || fail "gen"
dir="$WORK/a	tab \"quote\" back\\slash é $(printf '\xff')"
mkdir -p "$dir" || fail "mkdir"
for P in 1 3; do
  run_np $P compress --input "$WORK/g.h5:/train" --anchors 8 --out "$dir/o$P.h5" --metrics "$dir/m$P.json" \
    --set max_iter=3 --set threads=1 --set progress_every=0 > /dev/null || fail "compress on $P rank(s)"
  python3 - "$dir/m$P.json" "$dir" "$P" <<'PY' || fail "metrics of $P rank(s) not as documented (docs/metrics.md)"
import json, sys
path, d, P = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, "rb") as f:
    m = json.loads(f.read().decode("utf-8"))  # strict UTF-8: the writer keeps the file valid
assert m["schema"] == "vecanneal-metrics/2" and m["command"] == "compress", m.get("schema")
for key in ("version", "git_commit", "host", "start_time"):
    assert isinstance(m[key], str) and m[key], key
assert m["start_time"].endswith("Z") and "T" in m["start_time"]
out = [a for a in m["command_line"] if a.endswith("o%d.h5" % P)][0]
# the path's bytes come back, the byte that is not UTF-8 as U+FFFD
expect = (d.encode("utf-8", "surrogateescape").decode("utf-8", "replace")) + "/o%d.h5" % P
assert out == expect, (out, expect)
assert m["ranks"] == P and len(m["layout"]) == P and [e["rank"] for e in m["layout"]] == list(range(P))
assert all(e["device"] == "cpu" and e["host"] for e in m["layout"])
c = m["config"]
assert c["k"] == 8 and type(c["k"]) is int and type(c["lr"]) in (int, float) and c["max_iter"] == 3
assert type(c["tol"]) is float and c["backend"] == "auto" and "_" not in c
assert type(m["final_energy"]) is float and m["iterations"] == 3 and len(m["peak_rss_bytes"]["per_rank"]) == P
la, ph = m["loop_allreduce_seconds"], m["phases_seconds"]["allreduce"]
assert 0 <= la["min"] <= la["mean"] <= la["max"] and all(la[x] <= ph[x] + 1e-9 for x in ("min", "max")), (la, ph)
assert P > 1 or la["max"] == 0, la  # one rank: no collective is timed
print("metrics %d rank(s): valid, %d config keys typed, layout %s" % (P, len(c), [e["host"] for e in m["layout"]]))
PY
done
# embed writes its metrics through the same writer (tokenize only: the vocabulary is all it needs).
printf 'first line\nsecond "quoted" line\n\ttabbed é line\n' > "$dir/corpus.txt"
run_np 2 embed --input "$dir/corpus.txt" --token-ids-out "$dir/ids.h5" --metrics "$dir/e.json" > /dev/null \
  || fail "embed with its metrics on 2 ranks"
python3 - "$dir/e.json" <<'PY' || fail "embed metrics not as documented (docs/metrics.md)"
import json, sys
with open(sys.argv[1], "rb") as f:
    m = json.loads(f.read().decode("utf-8"))
assert m["schema"] == "vecanneal-metrics/2" and m["command"] == "embed" and m["ranks"] == 2 and len(m["layout"]) == 2
assert m["lines"] == 3 and type(m["tokens"]) is int and m["input"].endswith("corpus.txt") and m["output"] is None
print("embed metrics: valid, %d lines, %d tokens" % (m["lines"], m["tokens"]))
PY
