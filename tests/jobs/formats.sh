#!/usr/bin/env bash
# formats.sh: the vector files read besides HDF5 (io/vecfile.h). The rows of an HDF5 dataset copied to
# .npy (written by numpy.save) and to .fvecs (a small writer of the TEXMEX layout, tests/tools/vecfiles.py)
# give the index the HDF5 file gives, bitwise, on 1, 2, 3 and 4 ranks (and close to the 1-rank HDF5 index,
# as ranks.sh asks of rank counts); so do float16, float64, uint8 and int8 .npy, .bvecs and .ivecs copies
# of HDF5 inputs of those types, input_format over the extension, and a resume from a checkpoint made
# from another format of the same rows. Bad files (truncated, rows of several d, Fortran order,
# big-endian, unsupported dtype or shape, unknown extension, a DATASET part) each end every rank with one
# message and the same exit code, leaving no index.
source "$(dirname "$0")/lib.sh"
SRC=${VECANNEAL_SOURCE:?}
VF="python3 $SRC/tests/tools/vecfiles.py"
python3 -c 'import numpy' 2> /dev/null ||
  { echo "SKIP: numpy is missing (scripts/setup.sh installs python3-numpy with VECANNEAL_TEST_DEPS=1)"; exit 77; }
command -v h5dump > /dev/null || { echo "SKIP: h5dump is missing (hdf5-tools)"; exit 77; }
cd "$WORK" || fail "cd $WORK"
rm -f ./*.idx.h5 ./*.idx.h5.*
common=(compress --anchors 8 --set threads=1 --set progress_every=0 --set max_iter=15)
# run P INPUT OUT [ARGS...]: compress on P ranks; the log in OUT.log.
run() {
  local p=$1 input=$2 out=$3; shift 3
  run_np "$p" "${common[@]}" --input "$input" --out "$out" "$@" > "$out.log" 2>&1 || { cat "$out.log"; fail "compress $input on $p ranks"; }
}

run_np 2 gen --out data.h5 --n 3000 --d 16 --clusters 10 --spread 0.4 --seed 7 > /dev/null || fail "gen"
$VF npy data.h5 '<f4' data.npy :: texmex data.h5 '<f4' data.fvecs || fail "write data.npy and data.fvecs"
run 1 data.h5 h5.p1.idx.h5
for p in 1 2 3 4; do
  [ $p -gt 1 ] && run $p data.h5 h5.p$p.idx.h5
  for f in npy fvecs; do
    run $p data.$f $f.p$p.idx.h5
    "$TOOL" same h5.p$p.idx.h5 $f.p$p.idx.h5 > /dev/null || fail ".$f on $p ranks: another index than the HDF5 file's"
    "$TOOL" close $f.p$p.idx.h5 h5.p1.idx.h5 1e-5 > /dev/null || fail ".$f on $p ranks: far from the 1-rank HDF5 index"
  done
  echo "$p rank(s): .npy and .fvecs give the HDF5 file's index"
done
src_file=$("$TOOL" attr npy.p2.idx.h5 source_file)
[ -z "$("$TOOL" attr npy.p2.idx.h5 source_dataset)" ] && [ "${src_file##*/}" = data.npy ] ||
  fail "the index records '$src_file' as its source, not data.npy (and no dataset)"
# Several read chunks and threads: TEXMEX rows packed chunk by chunk, pread on two threads.
run_np 1 gen --out big.h5 --n 10000 --d 64 --clusters 8 --seed 3 > /dev/null || fail "gen big"
$VF texmex big.h5 '<f4' big.fvecs || fail "write big.fvecs"
run 2 big.h5 big.h5.idx.h5 --set read_chunk_mb=1 --set threads=2
run 2 big.fvecs big.fvecs.idx.h5 --set read_chunk_mb=1 --set threads=2
"$TOOL" same big.h5.idx.h5 big.fvecs.idx.h5 > /dev/null || fail ".fvecs read in 1 MiB chunks on 2 threads: another index"
echo "chunks of 1 MiB on 2 threads: .fvecs gives the HDF5 file's index"

# Other element types: an HDF5 input of the type against its copies.
run_np 1 gen --out half.h5 --n 1500 --d 12 --clusters 6 --dtype float16 > /dev/null || fail "gen float16"
for kind in u8 i8 f64; do "$TOOL" make-bad $kind.h5 $kind || fail "make $kind"; done
$VF npy half.h5 '<f2' half.npy :: npy u8.h5 '|u1' u8.npy :: npy i8.h5 '|i1' i8.npy :: npy f64.h5 '<f8' f64.npy \
  :: texmex u8.h5 '|u1' u8.bvecs :: texmex u8.h5 '<i4' u8.ivecs || fail "write the typed copies"
for pair in half.h5:half.npy u8.h5:u8.npy u8.h5:u8.bvecs u8.h5:u8.ivecs i8.h5:i8.npy f64.h5:f64.npy; do
  h=${pair%%:*} v=${pair#*:}
  [ -f $h.idx.h5 ] || run 2 $h $h.idx.h5 --anchors 4
  run 2 $v $v.idx.h5 --anchors 4
  "$TOOL" same $h.idx.h5 $v.idx.h5 > /dev/null || fail "$v: another index than $h"
  echo "$v ($("$TOOL" attr $v.idx.h5 source_dtype)) gives the index of $h"
done
grep -q "ground-truth neighbour ids" u8.ivecs.idx.h5.log || fail ".ivecs read without the note on what it usually holds"

# input_format over the extension, and HDF5 under a name of no known extension (its signature).
cp data.fvecs data.vec && cp data.npy data.raw && cp data.h5 data.bin
run 2 data.vec vec.idx.h5 --input-format fvecs
run 2 data.raw raw.idx.h5 --set input_format=npy
run 2 data.bin bin.idx.h5
run 2 data.bin:/train bin2.idx.h5 --input-format hdf5
for x in vec raw bin bin2; do "$TOOL" same h5.p2.idx.h5 $x.idx.h5 > /dev/null || fail "$x: another index"; done
echo "input_format fvecs/npy/hdf5 and an HDF5 file named .bin give the same index"

# Resume: a checkpoint made from the .fvecs copy resumes from the .npy copy, as the uninterrupted HDF5 run.
rargs=(--set tol=0 --set min_changes=0)
run 2 data.h5 full.idx.h5 "${rargs[@]}"
VECANNEAL_FAULT_STOP_AFTER=5 timeout 120 mpirun -n 2 --oversubscribe -x VECANNEAL_FAULT_STOP_AFTER "$BIN" \
  "${common[@]}" "${rargs[@]}" --input data.fvecs --out part.idx.h5 > stop.log 2>&1
[ $? -eq 75 ] && [ -f part.idx.h5.ckpt.h5 ] || { cat stop.log; fail "the stopped .fvecs run left no checkpoint"; }
run 2 data.npy part.idx.h5 "${rargs[@]}" --resume part.idx.h5.ckpt.h5
"$TOOL" same full.idx.h5 part.idx.h5 > /dev/null || fail "resumed from .npy: another index than the uninterrupted run"
echo "a checkpoint of the .fvecs copy resumes from the .npy copy: the uninterrupted run's index"

# Bad files: one message, every rank's exit code, no index left.
P=3
$VF bad truncated data.h5 trunc.fvecs :: bad dims data.h5 dims.fvecs :: bad zero_d data.h5 zero.fvecs \
  :: npy data.h5 '<f4' fortran.npy fortran :: npy data.h5 '<f4' big_endian.npy bigendian :: bad int64 data.h5 int64.npy \
  :: bad 1d data.h5 1d.npy :: bad 3d data.h5 3d.npy :: bad empty data.h5 empty.npy :: bad nan data.h5 nan.npy \
  :: bad short_npy data.h5 short.npy :: bad not_npy data.h5 text.npy || fail "write the bad files"
cp data.npy data.csv && cp data.npy npy_named.h5
# expect CODE PATTERN ARGS...: compress on P ranks exits CODE on every rank, one message matching PATTERN.
expect() {
  local code=$1 pattern=$2; shift 2
  rm -f bad.idx.h5*
  VECANNEAL_TRACE_EXIT=1 timeout 60 mpirun -n $P --oversubscribe -x VECANNEAL_TRACE_EXIT "$BIN" "${common[@]}" \
    --out bad.idx.h5 "$@" > case.stdout 2> case.stderr
  local rc=$? msg
  msg=$(grep "vecanneal: error:" case.stderr | head -1)
  printf '%-28s rc %s %s\n' "$*" "$rc" "${msg:0:150}"
  [ $rc -eq 124 ] && fail "hang: $*"
  [ $rc -eq "$code" ] || { cat case.stderr; fail "expected exit $code, got $rc: $*"; }
  [ "$(grep -c 'vecanneal: error:' case.stderr)" -eq 1 ] || { cat case.stderr; fail "expected one message: $*"; }
  [ "$(grep -c "exits with code $code" case.stderr)" -eq $P ] || { cat case.stderr; fail "not every rank exits $code: $*"; }
  echo "$msg" | grep -qi -- "$pattern" || fail "message does not mention '$pattern': $msg"
  ls bad.idx.h5* > /dev/null 2>&1 && fail "output left behind: $(ls bad.idx.h5*)"
  return 0
}
expect 3 "truncated"              --input trunc.fvecs
expect 3 "row 2250 has dimension" --input dims.fvecs
expect 3 "starts with dimension 0" --input zero.fvecs
expect 3 "ascontiguousarray"      --input fortran.npy
expect 3 "big-endian.*astype"     --input big_endian.npy
expect 3 "'<i8'.*dtype=np.float32" --input int64.npy
expect 3 "shape (3000,)"          --input 1d.npy
expect 3 "shape (1500, 2, 16)"    --input 3d.npy
expect 3 "empty"                  --input empty.npy
expect 3 "row 2997 holds NaN"     --input nan.npy
expect 3 "truncated"              --input short.npy
expect 3 "not a NumPy .npy file"  --input text.npy
expect 3 "unknown format.*'.csv'.*\.fvecs" --input data.csv
expect 3 "its content is a NumPy" --input npy_named.h5
expect 3 "no such file"           --input missing.fvecs
expect 2 "without ':/train'"      --input data.fvecs:/train
expect 2 "without ':/x'"          --input data.npy:/x
expect 2 "not one of"             --input data.npy --input-format csv
echo "PASS: formats"
