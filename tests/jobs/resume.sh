#!/usr/bin/env bash
# resume.sh: checkpoint/resume. A run stopped after a checkpoint (by VECANNEAL_FAULT_STOP_AFTER, which
# acts as the stop signal at a fixed iteration, and once by a real SIGUSR1 to mpirun) exits with 75,
# leaves a checkpoint and no index; resuming it gives an index bitwise identical to the uninterrupted
# run with the same ranks. Periodic checkpoints (checkpoint_every) are removed when the job finishes.
source "$(dirname "$0")/lib.sh"
data=$WORK/data.h5
run_np 2 gen --out "$data" --n 20000 --d 16 --clusters 20 --seed 3 > /dev/null || fail gen
args=(compress --input "$data:/train" --anchors 24 --set threads=1 --set progress_every=0 --set max_iter=25 --set tol=0
      --set min_changes=0 --set robust=huber --set momentum=0.3 --set maintenance_interval=4 --set k_min=16 --set k_max=32
      --set split_count_factor=1.2)
run_np 3 "${args[@]}" --out "$WORK/full.h5" > /dev/null || fail "uninterrupted run"
for stop in 1 7 12; do
  rm -f "$WORK/part.h5" "$WORK/part.h5.ckpt.h5"
  VECANNEAL_FAULT_STOP_AFTER=$stop timeout 120 mpirun -n 3 --oversubscribe -x VECANNEAL_FAULT_STOP_AFTER "$BIN" "${args[@]}" --out "$WORK/part.h5" > "$WORK/stop.log" 2>&1
  rc=$?
  [ $rc -eq 75 ] || { cat "$WORK/stop.log"; fail "stop after $stop: exit $rc, expected 75"; }
  [ -f "$WORK/part.h5" ] && fail "an index was left by the stopped run"
  [ -f "$WORK/part.h5.ckpt.h5" ] || fail "no checkpoint after the stop"
  run_np 3 "${args[@]}" --out "$WORK/part.h5" --resume "$WORK/part.h5.ckpt.h5" > "$WORK/resume.log" || { cat "$WORK/resume.log"; fail "resume"; }
  "$TOOL" same "$WORK/full.h5" "$WORK/part.h5" || fail "resumed after iteration $stop differs from the uninterrupted run"
  [ -f "$WORK/part.h5.ckpt.h5" ] && fail "checkpoint not removed after the finished job"
done
# Periodic checkpoints do not change the result.
run_np 3 "${args[@]}" --set checkpoint_every=5 --out "$WORK/periodic.h5" > /dev/null || fail "periodic"
"$TOOL" same "$WORK/full.h5" "$WORK/periodic.h5" || fail "checkpoint_every changed the result"
# A checkpoint of another configuration is refused.
VECANNEAL_FAULT_STOP_AFTER=3 timeout 120 mpirun -n 3 --oversubscribe -x VECANNEAL_FAULT_STOP_AFTER "$BIN" "${args[@]}" --out "$WORK/x.h5" > /dev/null 2>&1
timeout 60 mpirun -n 3 --oversubscribe "$BIN" "${args[@]}" --set lr=1 --out "$WORK/x.h5" --resume "$WORK/x.h5.ckpt.h5" > /dev/null 2> "$WORK/mismatch.err"
[ $? -eq 2 ] && grep -q "lr" "$WORK/mismatch.err" || { cat "$WORK/mismatch.err"; fail "a mismatched checkpoint was not refused"; }
# A real SIGUSR1 to mpirun (as Slurm's --signal sends before the time limit).
run_np 2 gen --out "$WORK/big.h5" --n 100000 --d 64 --clusters 40 > /dev/null || fail "gen big"
big=(compress --input "$WORK/big.h5:/train" --anchors 128 --set threads=1 --set max_iter=400 --set tol=0 --set min_changes=0)
timeout 300 mpirun -n 2 --oversubscribe "$BIN" "${big[@]}" --out "$WORK/sig.h5" > "$WORK/sig.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do grep -q "^ *3 " "$WORK/sig.log" 2> /dev/null && break; sleep 0.1; done
pkill -USR1 -P $pid  # mpirun, the child of timeout (timeout itself would die of USR1)
wait $pid
rc=$?
[ $rc -eq 75 ] || { tail "$WORK/sig.log"; fail "SIGUSR1: exit $rc, expected 75"; }
it=$(grep -o "stopped by a signal after iteration [0-9]*" "$WORK/sig.log" | grep -o "[0-9]*$")
run_np 2 "${big[@]}" --set max_iter=$((it + 5)) --out "$WORK/sig.h5" --resume "$WORK/sig.h5.ckpt.h5" > /dev/null || fail "resume after SIGUSR1"
run_np 2 "${big[@]}" --set max_iter=$((it + 5)) --out "$WORK/sig_full.h5" > /dev/null || fail "uninterrupted big run"
"$TOOL" same "$WORK/sig.h5" "$WORK/sig_full.h5" || fail "resume after SIGUSR1 differs"
echo "SIGUSR1 after iteration $it: checkpoint, exit 75, resume identical"
# A stop signal after the last iteration (during the final pass and the write) lets the job finish:
# exit 0 and the same index as a run without it (before, the default action killed every rank).
VECANNEAL_FAULT_SIGNAL_AT=finish timeout 120 mpirun -n 3 --oversubscribe -x VECANNEAL_FAULT_SIGNAL_AT "$BIN" "${args[@]}" \
  --out "$WORK/late.h5" > "$WORK/late.log" 2>&1
rc=$?
[ $rc -eq 0 ] || { tail "$WORK/late.log"; fail "a signal after the last iteration: exit $rc, expected 0"; }
"$TOOL" same "$WORK/full.h5" "$WORK/late.h5" || fail "a signal after the last iteration changed the index"
[ -f "$WORK/late.h5.ckpt.h5" ] && fail "a signal after the last iteration left a checkpoint"
echo "SIGUSR1 after the last iteration: the job finished (exit 0), index identical"
echo "PASS: resume"
