#!/usr/bin/env bash
# rankdeath.sh [cpu|cuda]: a rank that dies in the middle of a run ends every rank with a non-zero exit
# within 30 s (no hang), and leaves no index or partial file behind.
#   cpu:  SIGKILL of one of 3 CPU ranks (MPI collectives; mpirun ends the survivors).
#   cuda (label gpu, SKIP 77 without 2 GPUs): 2 ranks, one GPU each, statistics through NCCL:
#         (1) SIGKILL of one rank; (2) SIGSTOP of one rank, so that its peer waits in an NCCL
#         allreduce that never completes: VECANNEAL_NCCL_TIMEOUT=5 makes that wait fatal (message
#         naming the stuck peer, MPI_Abort), which must end the job, the stopped rank included.
source "$(dirname "$0")/lib.sh"
backend=${1:-cpu}
export NCCL_NVLS_ENABLE=0
if [ "$backend" = cuda ]; then
  "$BIN" --version | grep -q "cuda yes" || { echo "SKIP: built without CUDA"; exit 77; }
  ngpu=$(visible_gpus)
  [ "${ngpu:-0}" -ge 2 ] || { echo "SKIP: needs 2 CUDA devices, found ${ngpu:-0}"; exit 77; }
  ranks=2
  rows=2000000
  extra=(--backend cuda --set gpu_min_work=0)
else
  ranks=3
  rows=100000
  extra=(--set threads=1)
fi
run_np 2 gen --out "$WORK/d.h5" --n $rows --d 64 --clusters 40 > /dev/null || fail gen
out=$WORK/idx.h5

# kill_one SIGNAL [ENV=VALUE]: starts the job, sends SIGNAL to one rank after iteration 2, waits for
# mpirun; sets rc and secs.
kill_one() {
  local sig=$1; shift
  rm -f "$out" "$out.partial" "$WORK/run.log"
  env "$@" timeout 300 mpirun -n $ranks --oversubscribe -x NCCL_NVLS_ENABLE -x VECANNEAL_NCCL_TIMEOUT "$BIN" compress \
    --input "$WORK/d.h5:/train" --anchors 128 --out "$out" "${extra[@]}" \
    --set max_iter=100000000 --set tol=0 --set min_changes=0 > "$WORK/run.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 600); do grep -q "^ *2 " "$WORK/run.log" 2> /dev/null && break; sleep 0.1; done
  grep -q "^ *2 " "$WORK/run.log" || { cat "$WORK/run.log"; fail "the job did not reach iteration 2"; }
  victim=$(pgrep -f "vecanneal compress --input $WORK/d.h5" | grep -v "^$pid\$" | tail -1)
  [ -n "$victim" ] || fail "no rank process found"
  local t0 t1
  t0=$(date +%s.%N)
  kill -"$sig" "$victim"
  wait $pid
  rc=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  echo "$sig to rank process $victim ($backend): mpirun exited with $rc after $secs s"
  [ $rc -ne 0 ] || fail "exit status 0 after a rank died"
  [ $rc -ne 124 ] || fail "hang: the job outlived the 300 s timeout"
  awk -v s="$secs" 'BEGIN { exit !(s <= 30) }' || fail "took $secs s (> 30 s)"
  sleep 1
  pgrep -f "vecanneal compress --input $WORK/d.h5" > /dev/null && fail "ranks still running after mpirun exited"
  [ -e "$out" ] && fail "index left behind"
  [ -e "$out.partial" ] && fail "partial index left behind"
  return 0
}

kill_one KILL VECANNEAL_NCCL_TIMEOUT=0
if [ "$backend" = cuda ]; then
  kill_one STOP VECANNEAL_NCCL_TIMEOUT=5
  grep -q "still pending after 5 s (VECANNEAL_NCCL_TIMEOUT)" "$WORK/run.log" || { tail -20 "$WORK/run.log"; fail "no NCCL timeout message"; }
  grep "VECANNEAL_NCCL_TIMEOUT" "$WORK/run.log" | head -1
fi
echo "PASS: rank death ($backend)"
