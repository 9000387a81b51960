#!/usr/bin/env bash
# assign_add.sh: `vecanneal assign` on the index's own training rows gives the index's /assignments;
# the assignment of new rows is the same on 1-4 ranks; `add` writes the old assignment followed by
# assign(new) with counts = bincount, and on an index with codes the old codes followed by the new rows'
# (the same on 1-4 ranks, searchable); `compress --train-sample N` is the same on 1 and 3 ranks, assigns
# every row in its final pass and, with N = n, is a plain compress; bad inputs end every rank with one message and one exit code,
# leaving no output.
source "$(dirname "$0")/lib.sh"
python3 -c 'import h5py, numpy' 2> /dev/null ||
  { echo "SKIP: h5py or numpy is missing (scripts/setup.sh installs them with VECANNEAL_TEST_DEPS=1)"; exit 77; }
data=$WORK/data.h5
run_np 2 gen --out "$data" --n 4000 --d 16 --clusters 10 --spread 0.4 --test 700 --seed 9 > /dev/null || fail "gen"
common=(--set threads=1 --set progress_every=0)
# py SCRIPT ARGS...: a check in Python (h5py, numpy); its message on failure.
py() { python3 -c "$@"; }

for metric in l2 cosine; do
  ix=$WORK/$metric.h5
  run_np 2 compress --input "$data:/train" --anchors 14 --set metric=$metric "${common[@]}" --out "$ix" > /dev/null ||
    fail "compress $metric"
  run_np 3 assign --index "$ix" --input "$data:/train" --out "$WORK/$metric.self.h5" "${common[@]}" > /dev/null ||
    fail "assign $metric on the training rows"
  py 'import h5py, numpy as np, sys
i, a = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
assert a["assign"].dtype == np.uint32 and a["distance"].dtype == np.float32
assert np.array_equal(i["assignments"][:], a["assign"][:]), "assign on the training rows differs from /assignments"
c = np.bincount(a["assign"][:], minlength=len(i["anchor_count"]))
mse = np.bincount(a["assign"][:], weights=a["distance"][:].astype(float), minlength=len(c)) / np.maximum(c, 1)
assert np.allclose(mse, i["anchor_mse"][:], rtol=1e-6), "distances differ from the final pass"' "$ix" "$WORK/$metric.self.h5" ||
    fail "$metric: assign of the training rows is not the index's assignment"
  echo "$metric: assign on the training rows == /assignments"
  for p in 1 2 3 4; do
    run_np $p assign --index "$ix" --input "$data:/test" --out "$WORK/$metric.new$p.h5:/ids" "${common[@]}" > /dev/null ||
      fail "assign $metric on $p ranks"
  done
  py 'import h5py, numpy as np, sys
f = [h5py.File(x) for x in sys.argv[1:]]
for g in f[1:]:
    assert np.array_equal(f[0]["ids"][:], g["ids"][:]) and np.array_equal(f[0]["distance"][:], g["distance"][:])' \
    "$WORK/$metric.new"{1,2,3,4}.h5 || fail "$metric: assign of new rows differs between 1, 2, 3 and 4 ranks"
  echo "$metric: assign of new rows identical on 1, 2, 3, 4 ranks"
  run_np 3 add --index "$ix" --input "$data:/test" --out "$WORK/$metric.added.h5" "${common[@]}" > /dev/null ||
    fail "add $metric"
  py 'import h5py, numpy as np, sys
i, a, j = h5py.File(sys.argv[1]), h5py.File(sys.argv[2]), h5py.File(sys.argv[3])
ids = j["assignments"][:]
assert np.array_equal(ids, np.concatenate([i["assignments"][:], a["ids"][:]])), "old ++ assign(new)"
assert np.array_equal(j["anchor_count"][:], np.bincount(ids, minlength=len(i["anchor_count"]))), "counts"
assert np.array_equal(j["anchors"][:], i["anchors"][:]) and j.attrs["n"] == len(ids)
s = j["sources"]
assert [s[m].attrs["how"] for m in ("0", "1")] == ["compress", "add"] and s["1"].attrs["row0"] == i.attrs["n"]
assert dict(i["config"].attrs).keys() == dict(j["config"].attrs).keys()
assert abs(j.attrs["final_energy"] - (j["anchor_count"][:] * j["anchor_mse"][:]).sum() / len(ids)) < 1e-9 * j.attrs["final_energy"]' \
    "$ix" "$WORK/$metric.new1.h5" "$WORK/$metric.added.h5" || fail "$metric: the added index is not old ++ assign(new)"
  "$BIN" info "$WORK/$metric.added.h5" | grep -q "add .*rows 4000 + 700" || fail "info does not list the added rows"
  echo "$metric: add = old ++ assign(new), counts = bincount, info lists /sources"
done

# add on an index with codes (compress --codes pq, docs/codes.md): the old codes and the codebooks kept
# bitwise, the new rows encoded against their anchors (the training rows added again get compress's codes;
# test_pq --index encodes every row again with the library's encoder; numpy checks that each new code is
# the nearest centroid, up to rounding), the /pq
# errors over every row, the same index on 1-4 ranks and with io = independent, search on the codes
# returning the nearest decoded rows of all 4700 (for l2, every added row as its own nearest).
PQ=${VECANNEAL_TEST_PQ:?set VECANNEAL_TEST_PQ (the test_pq program)}
py 'import h5py, numpy as np, sys
with h5py.File(sys.argv[1]) as f, h5py.File(sys.argv[2], "w") as g:
    g["rows"] = np.concatenate([f["train"][:], f["test"][:]])' "$data" "$WORK/both.h5" || fail "train ++ test"
for metric in l2 cosine; do
  pq=$WORK/$metric.pq.h5
  run_np 2 compress --input "$data:/train" --anchors 14 --codes pq --pq-m 5 --set metric=$metric "${common[@]}" \
    --out "$pq" > /dev/null || fail "compress --codes pq $metric"
  for p in 1 2 3 4; do
    run_np $p add --index "$pq" --input "$data:/test" --out "$WORK/$metric.pqadd$p.h5" "${common[@]}" \
      > "$WORK/$metric.pqadd$p.log" || { cat "$WORK/$metric.pqadd$p.log"; fail "add $metric with codes, $p ranks"; }
    [ $p -eq 1 ] || "$TOOL" same "$WORK/$metric.pqadd$p.h5" "$WORK/$metric.pqadd1.h5" ||
      fail "$metric: add with codes on $p ranks differs from 1 rank"
  done
  grep -q "^codes pq: 700 new rows encoded (5 codes each)" "$WORK/$metric.pqadd1.log" || fail "$metric: no codes line"
  # The training rows added again: compress's own codes for them, bitwise.
  run_np 3 add --index "$pq" --input "$data:/train" --out "$WORK/$metric.pqself.h5" "${common[@]}" > /dev/null ||
    fail "add $metric: the training rows again"
  py 'import h5py, numpy as np, sys
c = h5py.File(sys.argv[1])["pq/codes"][:]
assert len(c) == 8000 and np.array_equal(c[:4000], c[4000:]), "codes of the rows added differ from compress"' \
    "$WORK/$metric.pqself.h5" || fail "$metric: add encodes the training rows otherwise than compress"
  run_np 3 add --index "$pq" --input "$data:/test" --out "$WORK/$metric.pqaddi.h5" "${common[@]}" --set io=independent \
    > /dev/null || fail "add $metric with codes, io = independent"
  "$TOOL" same "$WORK/$metric.pqaddi.h5" "$WORK/$metric.pqadd3.h5" ||
    fail "$metric: io = independent writes other codes"
  timeout 120 mpirun -n 2 --oversubscribe "$PQ" --index "$WORK/$metric.pqadd3.h5" --input "$WORK/both.h5:/rows" ||
    fail "$metric: the added index's codes are not every row encoded again"
  py 'import h5py, numpy as np, sys
i = h5py.File(sys.argv[1])
added = [h5py.File(x) for x in sys.argv[3:]]
j = added[2]
n, m = i.attrs["n"], i["pq"].attrs["m"]
assert j["pq/codes"].shape == (n + 700, m) and j["pq/codes"].dtype == np.uint8
assert np.array_equal(j["pq/codes"][:n], i["pq/codes"][:]), "the old rows codes changed"
for name in ("codebooks", "subspace_dims", "iterations"):
    assert np.array_equal(j["pq"][name][:], i["pq"][name][:]), name
for k, v in i["pq"].attrs.items():
    if k not in ("anchor_error", "error"):
        assert np.array_equal(j["pq"].attrs[k], v), k
for g in added[:2] + added[3:]:  # the errors on 1-4 ranks: sums over ranks, equal to rounding
    for k in ("anchor_error", "error"):
        assert abs(g["pq"].attrs[k] - j["pq"].attrs[k]) <= 1e-12 * j["pq"].attrs[k], k
# Reference: every row in the frame (as compress put its own), less its anchor, against the codebooks.
x = np.concatenate([h5py.File(sys.argv[2])["train"][:], h5py.File(sys.argv[2])["test"][:]]).astype(np.float64)
cosine = j.attrs["metric"] == "cosine"
if cosine:
    frame, anchors = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), j["anchors"][:]
else:
    frame, anchors = (x - j["center"][:]).astype(np.float32), j["anchors_centered"][:]
r = (frame - anchors[j["assignments"][:]]).astype(np.float64)
books, dims, codes = j["pq/codebooks"][:].astype(np.float64), j["pq/subspace_dims"][:], j["pq/codes"][:]
dec, c0 = np.zeros_like(r), 0
for s, w in enumerate(dims):
    part = r[:, c0:c0 + w]
    dist = ((part[:, None, :] - books[s][None, :, :w]) ** 2).sum(2)
    mine = dist[np.arange(len(r)), codes[:, s]]
    slack = 1e-5 * ((part ** 2).sum(1) + (books[s][codes[:, s], :w] ** 2).sum(1))
    assert (mine[n:] <= dist[n:].min(1) + slack[n:]).all(), "a new code is not its nearest centroid (subspace %d)" % s
    dec[:, c0:c0 + w] = books[s][codes[:, s], :w]
    c0 += w
var = j["pq"].attrs["variance"]
aerr, err = (r ** 2).sum() / len(r) / var, ((r - dec) ** 2).sum() / len(r) / var
assert abs(aerr - j["pq"].attrs["anchor_error"]) <= 1e-6 * aerr, (aerr, j["pq"].attrs["anchor_error"])
assert abs(err - j["pq"].attrs["error"]) <= 1e-6 * err, (err, j["pq"].attrs["error"])
if not cosine:  # the anchors alone: the distortion over every row, as compress has it
    assert abs(j["pq"].attrs["anchor_error"] - j.attrs["distortion"]) <= 1e-5 * j.attrs["distortion"]
print("%s: codes of %d + 700 rows, error %.4g of the variance (old rows %.4g)" % (j.attrs["metric"], n, err,
      i["pq"].attrs["error"]))' "$pq" "$data" "$WORK/$metric.pqadd"{1,2,3,4}.h5 ||
    fail "$metric: the added index's codes are not the old ones followed by the new rows' encoding"
  "$BIN" info "$WORK/$metric.pqadd3.h5" | grep -q "^  codes              pq: 5 subspaces" ||
    fail "$metric: info on codes"
  run_np 3 search --index "$WORK/$metric.pqadd3.h5" --queries "$data:/test" --k 10 --nprobe 14 --threads 1 \
    --out "$WORK/$metric.pqsearch.h5" > /dev/null || fail "$metric: search on the added codes"
  py 'import h5py, numpy as np, sys
res, j = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
nb, ds, own = res["neighbors"][:], res["distances"][:], 4000 + np.arange(700)
q = h5py.File(sys.argv[3])["test"][:].astype(np.float64)
books, dims, codes = j["pq/codebooks"][:], j["pq/subspace_dims"][:], j["pq/codes"][:]
dec = np.concatenate([books[s][codes[:, s], :w] for s, w in enumerate(dims)], axis=1).astype(np.float64)
if j.attrs["metric"] == "cosine":  # 1 - q.(a + e) on the unit query (docs/search.md, "Search on codes")
    rows = j["anchors"][:][j["assignments"][:]] + dec
    dist = 1 - (q / np.linalg.norm(q, axis=1, keepdims=True)) @ rows.T
else:  # ||q - a - e||^2 in the frame of /center
    rows = j["anchors_centered"][:][j["assignments"][:]] + dec
    qf = (q - j["center"][:]).astype(np.float32).astype(np.float64)
    dist = (qf ** 2).sum(1)[:, None] - 2 * qf @ rows.T + (rows ** 2).sum(1)[None, :]
    assert (nb[:, 0] == own).all(), "an added row is not its own nearest on the codes"
assert np.allclose(np.take_along_axis(dist, nb, 1), ds, rtol=1e-4, atol=1e-5), "reported distances"
assert np.allclose(np.sort(dist, 1)[:, :10], ds, rtol=1e-4, atol=1e-5), "not the 10 nearest decoded rows"
print("search on the codes: the 10 nearest of 4700 decoded rows; %.4f of the added rows their own nearest" %
      (nb[:, 0] == own).mean())' "$WORK/$metric.pqsearch.h5" "$WORK/$metric.pqadd3.h5" "$data" ||
    fail "$metric: search on the added codes does not find the nearest decoded rows"
  echo "$metric: add with codes = old codes ++ the new rows encoded, 1-4 ranks identical, searchable"
done

# compress --train-sample: 1 vs 3 ranks; N = n is a plain compress.
ts=(compress --input "$data:/train" --anchors 14 "${common[@]}")
run_np 1 "${ts[@]}" --train-sample 1500 --out "$WORK/ts1.h5" > /dev/null || fail "train-sample, 1 rank"
run_np 3 "${ts[@]}" --train-sample 1500 --out "$WORK/ts3.h5" > /dev/null || fail "train-sample, 3 ranks"
"$TOOL" close "$WORK/ts3.h5" "$WORK/ts1.h5" 1e-5 || fail "train-sample: 3 ranks differ from 1 rank"
[ "$("$TOOL" attr "$WORK/ts1.h5" train_rows)" = 1500 ] && [ "$("$TOOL" attr "$WORK/ts1.h5" n)" = 4000 ] ||
  fail "train-sample: the index does not record 1500 training rows of 4000"
run_np 2 "${ts[@]}" --out "$WORK/plain.h5" > /dev/null || fail "plain compress"
run_np 2 "${ts[@]}" --train-sample 4000 --out "$WORK/tsall.h5" > /dev/null || fail "train-sample = n"
"$TOOL" same "$WORK/plain.h5" "$WORK/tsall.h5" || fail "train-sample = n differs from a plain compress"
run_np 1 "${ts[@]}" --train-sample 900 --set metric=cosine --out "$WORK/tsc1.h5" > /dev/null || fail "cosine sample, 1 rank"
run_np 3 "${ts[@]}" --train-sample 900 --set metric=cosine --out "$WORK/tsc3.h5" > /dev/null || fail "cosine sample, 3 ranks"
"$TOOL" close "$WORK/tsc3.h5" "$WORK/tsc1.h5" 1e-5 || fail "train-sample, cosine: 3 ranks differ from 1 rank"
run_np 2 assign --index "$WORK/ts3.h5" --input "$data:/train" --out "$WORK/ts3.self.h5" "${common[@]}" > /dev/null ||
  fail "assign on a sampled index"
py 'import h5py, numpy as np, sys
assert np.array_equal(h5py.File(sys.argv[1])["assignments"][:], h5py.File(sys.argv[2])["assign"][:])' \
  "$WORK/ts3.h5" "$WORK/ts3.self.h5" || fail "train-sample: the final pass is not assign over every row"
echo "train-sample: 1 vs 3 ranks identical (l2, cosine); N = n equals a plain compress; every row assigned"

# Bad inputs: one message, the same exit code on every rank, no output left.
P=3
run_np 1 gen --out "$WORK/d8.h5" --n 100 --d 8 > /dev/null || fail "gen d8"
cp "$data" "$WORK/nan.h5" && "$TOOL" poke "$WORK/nan.h5" /test $((123 * 16 + 5)) nan || fail "poke a NaN"
expect() {
  local code=$1 pattern=$2 out=$3
  shift 3
  expect_agreed_exit "$code" "$pattern" "$out" "$@" --set threads=1
}
o=$WORK/bad.h5
cp "$data" "$WORK/data.keep.h5"
for cmd in assign add; do
  expect 3 "dimensions" "$o" $cmd --index "$WORK/l2.h5" --input "$WORK/d8.h5:/train" --out "$o"
  expect 3 "NaN" "$o" $cmd --index "$WORK/l2.h5" --input "$WORK/nan.h5:/test" --out "$o"
  expect 3 "cannot open index" "$o" $cmd --index "$WORK/missing.h5" --input "$data:/train" --out "$o"
  expect 3 "not a vecanneal index" "$o" $cmd --index "$data" --input "$data:/train" --out "$o"
  expect 2 "input" "$o" $cmd --index "$WORK/l2.h5" --input "$data:/test" --out "$data"
  cmp -s "$data" "$WORK/data.keep.h5" && [ ! -e "$data.partial" ] || fail "$cmd: the input was touched"
  expect 2 "required" "$o" $cmd --index "$WORK/l2.h5" --out "$o"
done
# An index with codes: the same checks, and damaged codes (missing, short, without their errors).
for case in dims nan out codes short errors; do
  cp "$WORK/l2.pq.h5" "$WORK/pqbad.h5"
  case $case in
  dims) expect 3 "dimensions" "$o" add --index "$WORK/pqbad.h5" --input "$WORK/d8.h5:/train" --out "$o" ;;
  nan) expect 3 "NaN" "$o" add --index "$WORK/pqbad.h5" --input "$WORK/nan.h5:/test" --out "$o" ;;
  out) expect 2 "index" "$o" add --index "$WORK/pqbad.h5" --input "$data:/test" --out "$WORK/pqbad.h5"
    cmp -s "$WORK/pqbad.h5" "$WORK/l2.pq.h5" || fail "add --out = --index changed the index with codes" ;;
  codes) "$TOOL" delete "$WORK/pqbad.h5" /pq/codes || fail "delete /pq/codes"
    expect 3 "pq/codes" "$o" add --index "$WORK/pqbad.h5" --input "$data:/test" --out "$o" ;;
  short) py 'import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    c = f["pq/codes"][:-1]
    del f["pq/codes"]
    f["pq/codes"] = c' "$WORK/pqbad.h5" || fail "shorten /pq/codes"
    expect 3 "pq/codes" "$o" add --index "$WORK/pqbad.h5" --input "$data:/test" --out "$o" ;;
  errors) py 'import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    del f["pq"].attrs["error"]' "$WORK/pqbad.h5" || fail "delete /pq error"
    expect 3 "lack the attribute error" "$o" add --index "$WORK/pqbad.h5" --input "$data:/test" --out "$o" ;;
  esac
done
cp "$WORK/l2.h5" "$WORK/keep.h5"
expect 2 "index" "$o" add --index "$WORK/l2.h5" --input "$data:/test" --out "$WORK/l2.h5"
cmp -s "$WORK/l2.h5" "$WORK/keep.h5" || fail "add --out = --index changed the index"
expect 2 "train_sample" "$o" compress --input "$data:/train" --anchors 14 --train-sample 10 --out "$o"
echo "PASS: assign_add"
