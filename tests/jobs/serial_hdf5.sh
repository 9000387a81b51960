#!/usr/bin/env bash
# serial_hdf5.sh: builds vecanneal against serial HDF5 (as on machines without parallel HDF5) and checks
# that its fallback path (independent reads; rank 0 makes each output file, then every rank writes its rows
# at once into the storage rank 0 allocated) runs the job on 1-4 ranks with the
# same results, and writes an index bitwise identical to the parallel-HDF5 build's (compress, with codes
# too, and add on an index with codes) and the same embed vectors.
source "$(dirname "$0")/lib.sh"
SRC=${VECANNEAL_SOURCE:?}
SB=$WORK/build-serial
if ! dpkg -s libhdf5-dev > /dev/null 2>&1 && [ ! -x /usr/bin/h5cc ]; then echo "SKIP: serial HDF5 (libhdf5-dev) not installed"; exit 77; fi
cmake -S "$SRC" -B "$SB" -DCMAKE_BUILD_TYPE=Release -DVECANNEAL_HDF5=SERIAL -DVECANNEAL_CUDA=OFF > "$WORK/cmake.log" 2>&1 || { cat "$WORK/cmake.log"; fail "configure"; }
grep -q "parallel HDF5 FALSE" "$WORK/cmake.log" || fail "the serial build did not pick serial HDF5"
cmake --build "$SB" -j 2 --target vecanneal > "$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log"; fail "build"; }
PAR_BIN=$BIN
BIN=$SB/vecanneal
"$BIN" compress --help | head -1 > /dev/null
run_np 3 gen --out "$WORK/s.h5" --n 5000 --d 16 --clusters 10 > /dev/null || fail "gen (serial HDF5, 3 ranks)"
# gen: the rows each rank generates and writes, all ranks at once, are the rows one rank writes, float16 too.
for dt in float32 float16; do
  run_np 3 gen --out "$WORK/g3.$dt.h5" --n 7001 --d 24 --clusters 9 --test 50 --dtype $dt > /dev/null ||
    fail "gen --dtype $dt (serial HDF5, 3 ranks)"
  BIN=$PAR_BIN run_np 1 gen --out "$WORK/g1.$dt.h5" --n 7001 --d 24 --clusters 9 --test 50 --dtype $dt > /dev/null ||
    fail "gen --dtype $dt (parallel build, 1 rank)"
  for ds in /train /test /neighbors /distances; do
    cmp -s <("$TOOL" raw "$WORK/g3.$dt.h5" $ds) <("$TOOL" raw "$WORK/g1.$dt.h5" $ds) ||
      fail "gen --dtype $dt: $ds of 3 serial-HDF5 ranks differs from 1 rank's"
  done
done
for p in 1 2 3 4; do
  run_np $p compress --input "$WORK/s.h5:/train" --anchors 10 --out "$WORK/s.p$p.h5" --set threads=1 --set progress_every=0 > /dev/null || fail "compress $p ranks (serial HDF5)"
  [ $p -gt 1 ] && { "$TOOL" close "$WORK/s.p$p.h5" "$WORK/s.p1.h5" 1e-5 || fail "$p ranks differ"; }
done
BIN=$PAR_BIN run_np 3 compress --input "$WORK/s.h5:/train" --anchors 10 --out "$WORK/s.par.h5" --set threads=1 --set progress_every=0 > /dev/null || fail "parallel build"
"$TOOL" same "$WORK/s.p3.h5" "$WORK/s.par.h5" || fail "serial and parallel HDF5 builds write different indexes"
# compress --codes pq: /pq/codes written rank after rank, as the parallel build writes them collectively.
pq=(compress --input "$WORK/s.h5:/train" --anchors 10 --codes pq --pq-m 4 --set threads=1 --set progress_every=0)
run_np 3 "${pq[@]}" --out "$WORK/s.pq.serial.h5" > /dev/null || fail "compress --codes pq (serial HDF5)"
BIN=$PAR_BIN run_np 3 "${pq[@]}" --out "$WORK/s.pq.par.h5" > /dev/null || fail "compress --codes pq (parallel build)"
"$TOOL" same "$WORK/s.pq.serial.h5" "$WORK/s.pq.par.h5" || fail "serial and parallel HDF5 builds write different codes"
# add on it: the old and the new rows' codes written rank after rank, as the parallel build writes them.
add=(add --index "$WORK/s.pq.par.h5" --input "$WORK/s.h5:/train" --set threads=1)
run_np 3 "${add[@]}" --out "$WORK/s.pqadd.serial.h5" > /dev/null || fail "add with codes (serial HDF5)"
BIN=$PAR_BIN run_np 3 "${add[@]}" --out "$WORK/s.pqadd.par.h5" > /dev/null || fail "add with codes (parallel build)"
"$TOOL" same "$WORK/s.pqadd.serial.h5" "$WORK/s.pqadd.par.h5" ||
  fail "serial and parallel HDF5 builds add different codes"
# embed: each rank writes its vectors a window at a time while encoding (--batch 1: windows of 64 lines),
# bit for bit the rows the parallel build writes collectively after the encoding.
MODEL=${VECANNEAL_MODEL:-$SRC/models/all-MiniLM-L6-v2}
[ -e "$MODEL/model.safetensors" ] || fail "model files missing under $MODEL: run scripts/fetch-model first"
sed -n '101,200p' "$SRC/tests/data/embed_ref.txt" > "$WORK/corpus.txt"
emb=(embed --input "$WORK/corpus.txt" --model "$MODEL" --backend cpu --threads 1 --batch 1 --progress 0)
run_np 2 "${emb[@]}" --out "$WORK/e.serial.h5" > /dev/null || fail "embed (serial HDF5)"
BIN=$PAR_BIN run_np 2 "${emb[@]}" --out "$WORK/e.par.h5" > /dev/null || fail "embed (parallel build)"
cmp -s <("$TOOL" raw "$WORK/e.serial.h5" /train) <("$TOOL" raw "$WORK/e.par.h5" /train) ||
  fail "embed: the serial HDF5 build's vectors differ from the parallel build's"
echo "PASS: serial HDF5 build"
