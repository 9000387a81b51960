#!/usr/bin/env bash
# reliability.sh CASE: the failure classes of a job, one case per CTest (label reliability). Each case
# fails on a build without the guard it tests. Every run is bounded by a timeout: a hang fails.
#   sparse_chunks   a chunked input whose last chunks were never written reads as zeros (its fill
#                   value) on 1 and 3 ranks, collective and independent: the same index as the same
#                   values all written
#   disk_full       index, checkpoint and gen on a full file system (a 4 MiB tmpfs; SKIP where mount
#                   is not permitted), 1 and 3 ranks, both transfer modes: exit 4 naming "No space left
#                   on device", no hang, nothing left behind: found by the free-space check before any
#                   compute; with it skipped, by the reservation of the file's blocks; with that skipped
#                   too, by the write itself (an HDF5 error, the read-back after the MPI-IO layer dropped
#                   a write without a word, or the stall guard when a rank fails inside HDF5's collective
#                   close); a metrics file that cannot even be created
#   write_fault     one rank's write fails inside the transfer (VECANNEAL_FAULT_WRITE_FAILS_ON, any file
#                   system): exit 4 naming the reason, no hang, nothing left; index, checkpoint and gen
#   outputs         outputs never touch inputs: --out, --metrics, the checkpoint, --embed-out against
#                   the input, the config and each other, also through ./, a symbolic and a hard link:
#                   exit 2 naming both, the inputs unchanged; an output that is a directory; a legal
#                   253-character output name works
#   one_job         a second job on the same --out stops at once (exit 4) naming the first, which
#                   finishes unharmed; a claim left by a dead job is taken over
#   config          --config on a directory (exit 2); lines longer than any buffer: a comment's text is
#                   never applied, an error names the real line; options without a value say so
#   stop            SIGUSR1 during the read, the preprocessing and the initialisation (and SIGTERM):
#                   every rank exits 75 with the message that no checkpoint was written, nothing left
#   resume          a checkpoint with NaN anchors, with flipped data or metadata bytes, of other data
#                   of the same size, of an input of another size: exit 3 naming the file; the input
#                   named another way (./, a copy) resumes bitwise identical
#   memory          a cgroup limit (v2 and v1, on a parent of the process's cgroup) is seen: exit 5;
#                   ulimit -v from 130 MB up over a small job: exit 0 or 5 (with the limit named), never
#                   a crash, exit 1 or a hang (the loader's or Open MPI's own start-up failing aside)
#   info            info on an index with a dataset deleted, a truncated one, a text file: exit 3
#   gpu             the CUDA backend on 2 GPUs with NCCL: stop requests before the loop (exit 75) and a
#                   rank's failed index or checkpoint write (exit 4); communicators finalized or aborted
source "$(dirname "$0")/lib.sh"
CASE=${1:?case}
P=3
cd "$WORK"
rm -rf "$WORK"/* 2> /dev/null

# expect_rc CODE PATTERN NP ARGS...: vecanneal on NP ranks; checks the exit code, one error line
# matching PATTERN (when PATTERN is not empty), and every rank's exit when the ranks agreed.
expect_rc() {
  local code=$1 pattern=$2 np=$3; shift 3
  local pass=(-x VECANNEAL_TRACE_EXIT) v
  for v in VECANNEAL_FAULT_SIGNAL_AT VECANNEAL_FAULT_SKIP_SPACE_CHECK VECANNEAL_FAULT_SKIP_RESERVE VECANNEAL_STALL_SECONDS \
    VECANNEAL_FAULT_WRITE_FAILS_ON; do
    [ -n "${!v:-}" ] && pass+=(-x "$v")
  done
  VECANNEAL_TRACE_EXIT=1 timeout 120 mpirun -n "$np" --oversubscribe "${pass[@]}" "$BIN" "$@" > "$WORK/out.log" 2> "$WORK/err.log"
  local rc=$?
  printf '  np %s rc %-3s %s\n' "$np" "$rc" "$(grep -h -m1 'vecanneal: error:\|stopped by' "$WORK/err.log" "$WORK/out.log" | cut -c1-150)"
  [ $rc -eq 124 ] && { tail -5 "$WORK/err.log"; fail "hang: $*"; }
  [ $rc -eq "$code" ] || { tail -20 "$WORK/err.log"; fail "expected exit $code, got $rc: $*"; }
  if [ -n "$pattern" ]; then
    grep -h "vecanneal: error:\|stopped by" "$WORK/err.log" "$WORK/out.log" | grep -qi -- "$pattern" ||
      { cat "$WORK/err.log"; fail "no message matching '$pattern': $*"; }
    grep -q "no progress for" "$WORK/err.log" || [ "$(grep -c 'vecanneal: error:' "$WORK/err.log")" -le 1 ] ||
      { cat "$WORK/err.log"; fail "more than one error message: $*"; }
  fi
  if ! grep -q "aborts the job\|no progress for" "$WORK/err.log"; then
    [ "$(grep -c "exits with code $code" "$WORK/err.log")" -eq "$np" ] || { cat "$WORK/err.log"; fail "not every rank exited with $code: $*"; }
  fi
  return 0
}
sum() { md5sum "$1" | cut -d' ' -f1; }
nothing_left() { # nothing_left DIR: no index, temporary file, checkpoint or claim in DIR
  local left
  left=$(cd "$1" && ls -A | grep '\.partial$\|\.ckpt\.h5$\|^idx\|^big\.h5$\|^\.vecanneal-' || true)
  [ -z "$left" ] || fail "left behind in $1: $left"
}
gen() { run_np 1 gen "$@" > /dev/null || fail "gen $*"; }
COMPRESS=(compress --set threads=1 --set progress_every=0)

case $CASE in
sparse_chunks)
  "$TOOL" make-bad sparse.h5 sparse || fail "make sparse"
  "$TOOL" make-bad dense.h5 dense || fail "make dense"
  for np in 1 3; do
    for io in collective independent; do
      expect_rc 0 "" $np "${COMPRESS[@]}" --input sparse.h5:/train --anchors 8 --out s_${np}_${io}.h5 --set io=$io --set max_iter=10
      expect_rc 0 "" $np "${COMPRESS[@]}" --input dense.h5:/train --anchors 8 --out d_${np}_${io}.h5 --set io=$io --set max_iter=10
      "$TOOL" same s_${np}_${io}.h5 d_${np}_${io}.h5 || fail "np $np io $io: unwritten chunks did not read as zeros"
    done
  done
  ;;

disk_full)
  mkdir -p small
  mount -t tmpfs -o size=4m tmpfs small 2> /dev/null || { echo "SKIP: cannot mount a tmpfs here (needs root)"; exit 77; }
  trap 'umount "$WORK/small"' EXIT
  export VECANNEAL_STALL_SECONDS=5                   # a rank stuck inside HDF5's collective close ends within seconds
  gen --out data.h5 --n 300000 --d 8 --clusters 8   # the index holds 1.2 MB of assignments
  gen --out data_small.h5 --n 40000 --d 8 --clusters 8
  head -c 3500000 /dev/zero > small/filler          # 0.5 MB left
  for np in 1 3; do
    for io in collective independent; do
      echo "index, np $np, io $io"
      expect_rc 4 "No space left on device" $np "${COMPRESS[@]}" --input data.h5:/train --anchors 8 --out small/idx.h5 --set io=$io
      grep -q "^ *1 " "$WORK/out.log" && fail "the free-space check came after the compute"
      [ "$(ls -A small)" = filler ] || fail "left behind: $(ls -A small)"
      # past the free-space check: the reservation finds it; past that too: the write itself
      VECANNEAL_FAULT_SKIP_SPACE_CHECK=1 expect_rc 4 "No space left on device.*reserving" $np "${COMPRESS[@]}" --input data.h5:/train \
        --anchors 8 --out small/idx.h5 --set io=$io --set max_iter=3
      [ "$(ls -A small)" = filler ] || fail "left behind: $(ls -A small)"
      VECANNEAL_FAULT_SKIP_SPACE_CHECK=1 VECANNEAL_FAULT_SKIP_RESERVE=1 expect_rc 4 "No space left on device" $np "${COMPRESS[@]}" \
        --input data.h5:/train --anchors 8 --out small/idx.h5 --set io=$io --set max_iter=3
      [ "$(ls -A small)" = filler ] || fail "left behind: $(ls -A small)"
      echo "checkpoint, np $np, io $io"
      VECANNEAL_FAULT_SKIP_SPACE_CHECK=1 VECANNEAL_FAULT_SKIP_RESERVE=1 expect_rc 4 "checkpoint.*No space left on device" $np "${COMPRESS[@]}" --input data.h5:/train \
        --anchors 8 --out small/idx.h5 --set io=$io --set max_iter=3 --set checkpoint_every=1
      [ "$(ls -A small)" = filler ] || fail "left behind: $(ls -A small)"
      echo "gen, np $np, io $io"
      expect_rc 4 "No space left on device" $np gen --out small/g.h5 --n 100000 --d 64 --io $io
      VECANNEAL_FAULT_SKIP_SPACE_CHECK=1 expect_rc 4 "No space left on device.*reserving" $np gen --out small/g.h5 --n 100000 --d 64 \
        --io $io
      VECANNEAL_FAULT_SKIP_SPACE_CHECK=1 VECANNEAL_FAULT_SKIP_RESERVE=1 expect_rc 4 "No space left on device" $np gen --out small/g.h5 \
        --n 100000 --d 64 --io $io
      [ "$(ls -A small)" = filler ] || fail "left behind: $(ls -A small)"
    done
  done
  # a file system full to the last byte: even the metrics file's claim fails, before any compute
  head -c 8000000 /dev/zero > small/filler2 2> /dev/null
  expect_rc 4 "metrics file.*No space left on device" $P "${COMPRESS[@]}" --input data_small.h5:/train --anchors 8 --out idx.h5 \
    --metrics small/m.json
  [ -e idx.h5 ] && fail "an index was written"
  ;;

write_fault)
  # one rank's write fails inside the transfer (as a full disk would), on any file system: the index,
  # a checkpoint, gen's output; the others may wait in a collective: the job ends with 4, nothing left
  gen --out data.h5 --n 30000 --d 8
  for io in collective independent; do
    for r in 0 2; do
      VECANNEAL_FAULT_WRITE_FAILS_ON=$r expect_rc 4 "index.*No space left on device" $P "${COMPRESS[@]}" --input data.h5:/train \
        --anchors 8 --out idx.h5 --set io=$io --set max_iter=3
      VECANNEAL_FAULT_WRITE_FAILS_ON=$r expect_rc 4 "checkpoint.*No space left on device" $P "${COMPRESS[@]}" --input data.h5:/train \
        --anchors 8 --out idx.h5 --set io=$io --set max_iter=3 --set checkpoint_every=1
      VECANNEAL_FAULT_WRITE_FAILS_ON=$r expect_rc 4 "output.*No space left on device" $P gen --out g.h5 --n 30000 --d 8 --io $io
      nothing_left "$WORK"
      [ -e g.h5 ] && fail "gen left its output"
    done
  done
  # embed's vectors, written after the encoding (collective) or a window at a time while encoding
  # (independent; --batch 1: windows of 64 lines, several a rank)
  MODEL=${VECANNEAL_MODEL:-$VECANNEAL_SOURCE/models/all-MiniLM-L6-v2}
  [ -e "$MODEL/model.safetensors" ] || fail "model files missing under $MODEL: run scripts/fetch-model first"
  for i in $(seq 1 400); do echo "line $i of a corpus about full disks"; done > corpus.txt
  for io in collective independent; do
    for r in 0 2; do
      VECANNEAL_FAULT_WRITE_FAILS_ON=$r expect_rc 4 "vectors file.*No space left on device" $P embed \
        --input corpus.txt --out vec.h5 --model "$MODEL" --backend cpu --threads 1 --batch 1 --io $io
      nothing_left "$WORK"
      [ -e vec.h5 ] && fail "embed left its output"
    done
  done
  ;;

outputs)
  gen --out data.h5 --n 2000 --d 8
  printf 'max_iter = 2\n' > conf.ini
  before=$(sum data.h5)
  for np in 1 3; do
    expect_rc 2 "input" $np "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out data.h5
    expect_rc 2 "input" $np "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out ./data.h5
    expect_rc 2 "input" $np "${COMPRESS[@]}" --input "$WORK/data.h5:/train" --anchors 4 --out "$WORK/./data.h5"
  done
  ln -sf data.h5 link.h5 && ln -f data.h5 hard.h5
  expect_rc 2 "input" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out link.h5
  expect_rc 2 "input" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out hard.h5
  expect_rc 2 "config file" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out idx.h5 --config conf.ini --metrics conf.ini
  expect_rc 2 "input" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out idx.h5 --metrics data.h5
  expect_rc 2 "metrics" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out idx.h5 --metrics idx.h5
  expect_rc 2 "checkpoint" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out idx.h5 --set checkpoint=data.h5
  expect_rc 2 "input" $P "${COMPRESS[@]}" --input data.h5.partial:/train --anchors 4 --out data.h5
  printf 'a line\nanother\n' > corpus.txt
  expect_rc 2 "vectors file" $P compress --embed corpus.txt --embed-out x.h5:/train --out x.h5
  expect_rc 2 "corpus" $P embed --input corpus.txt --out corpus.txt
  expect_rc 2 "corpus" $P compress --embed corpus.txt --out corpus.txt
  [ "$(sum data.h5)" = "$before" ] || fail "the input changed"
  [ "$(cat conf.ini)" = "max_iter = 2" ] || fail "the config changed"
  [ "$(cat corpus.txt)" = "$(printf 'a line\nanother')" ] || fail "the corpus changed"
  mkdir adir
  expect_rc 2 "directory" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out adir
  expect_rc 4 "No such file" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out nodir/idx.h5
  nothing_left "$WORK/adir"
  long=$(printf 'i%.0s' $(seq 1 250)).h5   # 253 characters: legal; its .partial and .ckpt.h5 are not
  expect_rc 0 "" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out "$long" --set max_iter=2 --set checkpoint_every=1
  [ -f "$long" ] || fail "the 253-character output was not written"
  [ -z "$(ls -A | grep '^\.vecanneal-')" ] || fail "temporary files left: $(ls -A | grep '^\.vecanneal-')"
  ;;

one_job)
  gen --out data.h5 --n 200000 --d 32 --clusters 20
  timeout 120 mpirun -n 2 --oversubscribe "$BIN" "${COMPRESS[@]}" --input data.h5:/train --anchors 64 --out idx.h5 --set max_iter=60 \
    --set tol=0 --set min_changes=0 --set progress_every=1 > first.log 2>&1 &
  first=$!
  for _ in $(seq 1 300); do grep -q "^ *2 " first.log 2> /dev/null && break; sleep 0.1; done
  grep -q "^ *2 " first.log || { cat first.log; fail "the first job did not start iterating"; }
  expect_rc 4 "being written by another job.*pid" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 8 --out idx.h5
  grep -q "^ *3 " "$WORK/out.log" && fail "the second job computed"
  wait $first || { cat first.log; fail "the first job failed after the second one started"; }
  [ -f idx.h5 ] || fail "the first job's index is missing"
  "$TOOL" attr idx.h5 iterations | grep -q 60 || fail "the first job's index is not its own"
  # a claim left by a job that died (same host, its pid gone) is taken over
  sleep 30 & dead=$!; kill $dead; wait $dead 2> /dev/null
  printf 'vecanneal-claim host=%s pid=%d slurm_job=- slurm_restart=0 started=0\n' "$(hostname)" "$dead" > idx2.h5.partial
  expect_rc 0 "" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 8 --out idx2.h5 --set max_iter=2
  grep -q "taken over" "$WORK/out.log" || fail "the stale claim was not reported"
  # a claim of a running process is not
  sleep 60 & alive=$!
  printf 'vecanneal-claim host=%s pid=%d slurm_job=- slurm_restart=0 started=0\n' "$(hostname)" "$alive" > idx3.h5.partial
  expect_rc 4 "another job" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 8 --out idx3.h5 --set max_iter=2
  kill $alive
  [ -f idx3.h5.partial ] || fail "another job's claim was removed"
  ;;

config)
  gen --out data.h5 --n 2000 --d 8
  expect_rc 2 "directory" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out idx.h5 --config /tmp
  x=$(head -c 5000 /dev/zero | tr '\0' x)
  printf 'max_iter = 6\n# %s max_iter = 3\ntol = 0\nmin_changes = 0\n' "$x" > long.ini
  expect_rc 0 "" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out idx.h5 --config long.ini
  [ "$("$TOOL" attr idx.h5 iterations)" = 6 ] || fail "a comment's text was applied: $("$TOOL" attr idx.h5 iterations) iterations"
  printf '# %s\nbogus_key = 1\n' "$x" > bad.ini
  expect_rc 2 "bad.ini:2)" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out idx2.h5 --config bad.ini
  printf 'lr = %s\n' "$x" > badvalue.ini
  expect_rc 2 "badvalue.ini:1" $P "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out idx2.h5 --config badvalue.ini
  expect_rc 2 "option --anchors needs a value" $P "${COMPRESS[@]}" --input data.h5:/train --out idx2.h5 --anchors
  expect_rc 2 "option --anchors needs a value" $P "${COMPRESS[@]}" --input data.h5:/train --anchors --out idx2.h5
  expect_rc 2 "option --n needs a value" $P gen --out g.h5 --n
  [ -e idx2.h5 ] && fail "an index was written"
  ;;

stop)
  gen --out data.h5 --n 20000 --d 16 --clusters 16
  for np in 1 3; do
    for at in read preprocessing initialisation; do
      VECANNEAL_FAULT_SIGNAL_AT=$at expect_rc 75 "during the $at: no iteration ran" $np "${COMPRESS[@]}" --input data.h5:/train \
        --anchors 16 --out idx.h5
      nothing_left "$WORK"
    done
    # a real signal while kmeans|| runs on a large k (the init takes seconds)
    gen --out data_big.h5 --n 200000 --d 32 --clusters 100
    timeout 120 mpirun -n $np --oversubscribe -x VECANNEAL_TRACE_EXIT=1 "$BIN" "${COMPRESS[@]}" --input data_big.h5:/train --anchors 1500 \
      --out big.h5 > sig.log 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do grep -q "backend cpu" sig.log 2> /dev/null && break; sleep 0.05; done
    sleep 0.5
    pkill -TERM -f "^$BIN compress .*data_big.h5" || fail "no rank to signal"
    wait $pid
    rc=$?
    [ $rc -eq 75 ] || { cat sig.log; fail "SIGTERM during the initialisation: exit $rc, expected 75"; }
    grep -q "stopped by a signal during the" sig.log || { cat sig.log; fail "no message"; }
    [ "$(grep -c 'exits with code 75' sig.log)" -eq $np ] || { cat sig.log; fail "not every rank exited with 75"; }
    echo "  np $np SIGTERM: $(grep -m1 'stopped by' sig.log)"
    rm -f data_big.h5
    nothing_left "$WORK"
  done
  # the embedding stage (embed, and compress --embed) stops between encoder batches
  MODEL=${VECANNEAL_MODEL:-$VECANNEAL_SOURCE/models/all-MiniLM-L6-v2}
  [ -e "$MODEL/model.safetensors" ] || fail "model files missing under $MODEL: run scripts/fetch-model first"
  for i in $(seq 1 300); do echo "line $i of a corpus about stopping"; done > corpus.txt
  for io in collective independent; do # independent: the vectors file is open while the lines are encoded
    VECANNEAL_FAULT_SIGNAL_AT=embedding expect_rc 75 "during the embedding" $P embed --input corpus.txt --out vec.h5 \
      --model "$MODEL" --batch 1 --io $io
    nothing_left "$WORK"
    [ -e vec.h5 ] && fail "embed wrote its output after a stop (io $io)"
  done
  VECANNEAL_FAULT_SIGNAL_AT=embedding expect_rc 75 "during the embedding: no iteration ran" $P compress --embed corpus.txt \
    --embed-model "$MODEL" --embed-out vec.h5 --anchors 4 --out idx.h5
  nothing_left "$WORK"
  [ -e vec.h5 ] && fail "compress --embed wrote its vectors after a stop"
  ;;

resume)
  mkdir -p sub
  gen --out sub/data.h5 --n 6000 --d 16 --clusters 12 --seed 3
  gen --out other.h5 --n 6000 --d 16 --clusters 12 --seed 4
  gen --out shorter.h5 --n 5000 --d 16 --clusters 12 --seed 3
  args=("${COMPRESS[@]}" --anchors 12 --set max_iter=12 --set tol=0 --set min_changes=0)
  expect_rc 0 "" $P "${args[@]}" --input sub/data.h5:/train --out full.h5
  ckpt() { rm -f part.h5*; VECANNEAL_FAULT_STOP_AFTER=5 timeout 120 mpirun -n $P --oversubscribe -x VECANNEAL_FAULT_STOP_AFTER "$BIN" \
    "${args[@]}" --input sub/data.h5:/train --out part.h5 > /dev/null 2>&1; [ -f part.h5.ckpt.h5 ] || fail "no checkpoint"; }
  # the same input, named another way, and a copy: resumed, bitwise identical
  ckpt
  expect_rc 0 "" $P "${args[@]}" --input ./sub/../sub/data.h5:/train --out part.h5 --resume part.h5.ckpt.h5
  "$TOOL" same full.h5 part.h5 || fail "resumed with ./sub/../sub/data.h5: another index"
  ckpt
  cp sub/data.h5 copy.h5
  expect_rc 0 "" $P "${args[@]}" --input copy.h5:/train --out part.h5 --resume part.h5.ckpt.h5
  "$TOOL" same full.h5 part.h5 || fail "resumed from a copy of the input: another index"
  # other data of the same size at the same path
  ckpt
  cp sub/data.h5 keep.h5 && cp other.h5 sub/data.h5
  expect_rc 3 "part.h5.ckpt.h5.*other data" $P "${args[@]}" --input sub/data.h5:/train --out part.h5 --resume part.h5.ckpt.h5
  cp keep.h5 sub/data.h5
  # an input of another size: the message names the checkpoint and both sizes
  expect_rc 3 "part.h5.ckpt.h5.*6000 x 16.*5000 x 16" $P "${args[@]}" --input shorter.h5:/train --out part.h5 --resume part.h5.ckpt.h5
  # NaN anchors, a changed attribute, flipped data bytes
  cp part.h5.ckpt.h5 good.ckpt.h5
  "$TOOL" poke part.h5.ckpt.h5 /anchors 5 nan || fail poke
  expect_rc 3 "part.h5.ckpt.h5" $P "${args[@]}" --input sub/data.h5:/train --out part.h5 --resume part.h5.ckpt.h5
  cp good.ckpt.h5 part.h5.ckpt.h5 && "$TOOL" set-attr part.h5.ckpt.h5 iter 4 || fail set-attr
  expect_rc 3 "damaged" $P "${args[@]}" --input sub/data.h5:/train --out part.h5 --resume part.h5.ckpt.h5
  cp good.ckpt.h5 part.h5.ckpt.h5 && "$TOOL" set-attr part.h5.ckpt.h5 merges 7 || fail set-attr
  expect_rc 3 "checksum" $P "${args[@]}" --input sub/data.h5:/train --out part.h5 --resume part.h5.ckpt.h5
  cp good.ckpt.h5 part.h5.ckpt.h5 && "$TOOL" poke part.h5.ckpt.h5 /assignments 4321 3 || fail poke
  expect_rc 3 "checksum" $P "${args[@]}" --input sub/data.h5:/train --out part.h5 --resume part.h5.ckpt.h5
  # raw byte flips all over the file: resumed identically, or refused with exit 3; never another exit
  size=$(stat -c %s good.ckpt.h5)
  for off in $(seq 0 $(( size / 40 )) $(( size - 1 ))); do
    cp good.ckpt.h5 part.h5.ckpt.h5
    python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(int(sys.argv[2])); b=f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0]^0x5a])); f.close()" \
      part.h5.ckpt.h5 "$off"
    rm -f part.h5
    timeout 120 mpirun -n $P --oversubscribe "$BIN" "${args[@]}" --input sub/data.h5:/train --out part.h5 --resume part.h5.ckpt.h5 \
      > /dev/null 2> flip.err
    rc=$?
    case $rc in
      0) "$TOOL" same full.h5 part.h5 || fail "byte $off flipped: resumed to another index" ;;
      3) ;;
      *) cat flip.err; fail "byte $off flipped: exit $rc" ;;
    esac
    printf '%s:%s ' "$off" "$rc"
  done
  echo
  ;;

memory)
  gen --out data.h5 --n 20000 --d 16 --clusters 16
  gen --out data_big.h5 --n 400000 --d 64 --clusters 16   # 102 MB of rows
  # the cgroup limit of the process (as Slurm sets it on a job and its step), v2 and v1, read from a
  # made-up hierarchy: 150 MB on the job, 80 MB of it used
  mkdir -p cg/job/step cg/memory/job/step
  echo "0::/job/step" > self_v2
  printf '12:memory:/job/step\n3:cpu,cpuacct:/job\n' > self_v1
  echo max > cg/job/step/memory.max && echo 157286400 > cg/job/memory.max && echo 83886080 > cg/job/memory.current
  echo 9223372036854771712 > cg/memory/job/step/memory.limit_in_bytes
  echo 157286400 > cg/memory/job/memory.limit_in_bytes && echo 83886080 > cg/memory/job/memory.usage_in_bytes
  for v in v2 v1; do
    VECANNEAL_TEST_PROC_CGROUP=$WORK/self_$v VECANNEAL_TEST_CGROUP_MOUNT=$WORK/cg timeout 60 mpirun -n 1 -x VECANNEAL_TEST_PROC_CGROUP \
      -x VECANNEAL_TEST_CGROUP_MOUNT "$BIN" "${COMPRESS[@]}" --input data_big.h5:/train --anchors 16 --out idx.h5 > cg.log 2>&1
    rc=$?
    [ $rc -eq 5 ] && grep -q "cgroup.*0.15 GiB" cg.log || { cat cg.log; fail "cgroup $v: exit $rc, expected 5 naming the cgroup's limit"; }
    echo "  cgroup $v: $(grep -o 'vecanneal: error: .\{0,200\}' cg.log)"
  done
  for mb in $(seq 130 15 900); do
    (ulimit -v $((mb * 1024)); VECANNEAL_TRACE_START=1 timeout 60 mpirun -n 1 -x VECANNEAL_TRACE_START "$BIN" \
      "${COMPRESS[@]}" --input data.h5:/train --anchors 16 --out idx.h5 --set max_iter=3 > mem.log 2>&1)
    rc=$?
    # Before vecanneal's first instruction after MPI_Init (no "MPI started" line): the loader, mpirun
    # itself, or Open MPI's own start-up inside the rank, which can crash without a backtrace.
    if [ $rc -ne 0 ] && [ $rc -ne 5 ] && ! grep -q "^vecanneal: MPI started" mem.log; then
      rc=mpi
    fi
    case $rc in
      0) [ -f idx.h5 ] || fail "$mb MB: exit 0 without an index" ;;
      5) grep -q "vecanneal: error:.*ulimit -v" mem.log || { cat mem.log; fail "$mb MB: exit 5 without naming the limit"; } ;;
      mpi) ;;
      *) cat mem.log; fail "ulimit -v $mb MB: exit $rc (expected 0 or 5)" ;;
    esac
    printf '%s:%s ' "$mb" "$rc"
    rm -f idx.h5 idx.h5.partial
  done
  echo
  ;;

info)
  gen --out data.h5 --n 2000 --d 8
  expect_rc 0 "" 1 "${COMPRESS[@]}" --input data.h5:/train --anchors 4 --out idx.h5 --set max_iter=2
  cp idx.h5 nocount.h5 && "$TOOL" delete nocount.h5 /anchor_count || fail delete
  expect_rc 3 "nocount.h5.*damaged" 1 info nocount.h5
  cp idx.h5 nomse.h5 && "$TOOL" delete nomse.h5 /anchor_mse || fail delete
  expect_rc 3 "damaged" 1 info nomse.h5
  head -c 3000 idx.h5 > cut.h5
  expect_rc 3 "cut.h5" 1 info cut.h5
  echo "not hdf5" > text.h5
  expect_rc 3 "text.h5" 1 info text.h5
  expect_rc 3 "not a vecanneal index" 1 info data.h5
  expect_rc 0 "" 1 info idx.h5
  ;;

gpu)
  # The CUDA backend on 2 GPUs, the statistics through NCCL (label gpu; SKIP 77 with fewer than 2):
  # stop requests during the read, the preprocessing and the initialisation, and one rank's failed
  # write of the index and of a checkpoint with the communicator alive. Exit 75 or 4 on every rank,
  # nothing left behind, and the communicators finalized (a collective exit) or aborted (the failing
  # rank inside an MPI-IO write) as each rank reports (VECANNEAL_TRACE_EXIT).
  "$BIN" --version | grep -q "cuda yes, nccl yes" || { echo "SKIP: built without CUDA and NCCL"; exit 77; }
  ngpu=$(visible_gpus)
  [ "${ngpu:-0}" -ge 2 ] || { echo "SKIP: needs 2 CUDA devices, found ${ngpu:-0}"; exit 77; }
  export NCCL_NVLS_ENABLE=0
  gen --out data.h5 --n 400000 --d 64 --clusters 64
  G=(--backend cuda --set gpu_min_work=0)
  for at in read preprocessing initialisation; do
    VECANNEAL_FAULT_SIGNAL_AT=$at expect_rc 75 "during the $at: no iteration ran" 2 "${COMPRESS[@]}" "${G[@]}" --input data.h5:/train \
      --anchors 64 --out idx.h5
    [ "$(grep -c 'NCCL communicator finalized' "$WORK/err.log")" -eq 2 ] || { cat "$WORK/err.log"; fail "stop during the $at: not finalized"; }
    nothing_left "$WORK"
  done
  # Without MPI-IO (serial HDF5) each rank writes its rows itself and the ranks agree on a failure, then
  # exit together; through MPI-IO the failing rank ends the job from inside the collective transfer.
  serial_io=0; "$BIN" --version | grep -q "hdf5 serial" && serial_io=1
  for what in index checkpoint; do
    extra=()
    [ $what = checkpoint ] && extra=(--set checkpoint_every=2)
    VECANNEAL_FAULT_WRITE_FAILS_ON=1 expect_rc 4 "$what.*No space left on device" 2 "${COMPRESS[@]}" "${G[@]}" --input data.h5:/train \
      --anchors 64 --out idx.h5 --set max_iter=4 "${extra[@]}"
    if [ "$serial_io" = 1 ]; then
      [ "$(grep -c 'NCCL communicator finalized' "$WORK/err.log")" -eq 2 ] ||
        { cat "$WORK/err.log"; fail "$what write failure without MPI-IO: not finalized on both ranks"; }
    else
      grep -q "rank 1: NCCL communicator aborted" "$WORK/err.log" ||
        { cat "$WORK/err.log"; fail "$what write failure through MPI-IO: not aborted"; }
    fi
    nothing_left "$WORK"
  done
  ;;

*) fail "unknown case $CASE" ;;
esac
echo "PASS: reliability $CASE"
