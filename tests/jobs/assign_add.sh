#!/usr/bin/env bash
# assign_add.sh: `vecanneal assign` on the index's own training rows gives the index's /assignments;
# the assignment of new rows is the same on 1-4 ranks; `add` writes the old assignment followed by
# assign(new) with counts = bincount; `compress --train-sample N` is the same on 1 and 3 ranks, assigns
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
cp "$WORK/l2.h5" "$WORK/keep.h5"
expect 2 "index" "$o" add --index "$WORK/l2.h5" --input "$data:/test" --out "$WORK/l2.h5"
cmp -s "$WORK/l2.h5" "$WORK/keep.h5" || fail "add --out = --index changed the index"
expect 2 "train_sample" "$o" compress --input "$data:/train" --anchors 14 --train-sample 10 --out "$o"
echo "PASS: assign_add"
