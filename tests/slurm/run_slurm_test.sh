#!/bin/bash
# run_slurm_test.sh VECANNEAL_BINARY REPO_DIR
# The `slurm` CTest: a throw-away one-node Slurm cluster (munged, slurmctld, slurmd on localhost,
# all state in a temp dir, two fake GPUs) runs the job scripts of jobs/slurm/ as shipped:
#   0. all five scripts pass bash -n and sbatch --test-only (their #SBATCH lines parse);
#   1. compress.sbatch, 2 tasks, CPU config, sbatch --wait (srun --mpi=pmix when this Slurm has
#      pmix, else mpirun): job COMPLETED 0:0, index readable by `vecanneal info`, metrics written;
#   2. scaling.sbatch as a 2-element array (1 and 2 ranks) through the mpirun fallback;
#   3. the time-limit flow with the real binary, once per launcher (2 ranks): USR1 to the batch
#      shell mid-run (what --signal=B:USR1@T does) -> forwarded -> checkpoint, exit 75 -> scontrol
#      requeue -> the second run resumes and ends as an uninterrupted run does; a plain scancel
#      keeps the checkpoint and is not requeued;
#   4. --gpus-per-task=1 --gpu-bind=single:1 give each srun rank its own (fake) GPU;
#   5. the site hook (VECANNEAL_MODULES through a fake `module` function, then VECANNEAL_ENV_SCRIPT)
#      and the NCCL variables of the environment reach every rank, unchanged (none when it has none);
#      VECANNEAL_OUT_DIR (relative and absolute) holds the job folder; compress-cpu.sbatch asks for no
#      GPU and runs a config that says cuda on the CPU; a failing hook ends the job with 2;
#   6. embed.sbatch and pipeline.sbatch on 20 lines, when models/all-MiniLM-L6-v2 is installed.
# Installs slurm-wlm and munge with apt-get when missing (root only; VA_SLURM_NO_INSTALL=1: don't).
# Exits 0 pass, 1 fail, 77 skip (Slurm unavailable here), always with the reason.
# VA_SLURM_KEEP=1 keeps the temp dir (logs, slurm.conf) for a look afterwards;
# VA_SLURM_NO_FAKE_GPUS=1 runs without fake GPUs (the scripts' GPU lines are then stripped).
set -u
BIN=${1:?usage: run_slurm_test.sh VECANNEAL_BINARY REPO_DIR}
REPO=${2:?usage: run_slurm_test.sh VECANNEAL_BINARY REPO_DIR}
BUDGET=270                      # seconds for the whole test (CTest TIMEOUT is 300)
T0=$SECONDS
say()  { echo "[slurm-test $((SECONDS - T0))s] $*"; }
skip() { say "SKIP: $*"; exit 77; }
fail() { say "FAIL: $*"; dump_logs; exit 1; }
left() { local l=$((BUDGET - (SECONDS - T0))); [ "$l" -gt "${1:-9999}" ] && l=$1; [ "$l" -gt 0 ] || l=1; echo "$l"; }
TMP=""
dump_logs() {
  [ -n "$TMP" ] || return 0
  local f
  for f in "$TMP"/log/*.log "$TMP"/work/*.out; do
    [ -f "$f" ] && { echo "----- $f (last 40 lines)"; tail -n 40 "$f"; }
  done
}

# Slurm variables of an enclosing job (CI inside Slurm) would confuse the clients and the scripts.
for v in $(compgen -e | grep '^SLURM_'); do unset "$v"; done
# The scripts' hook and output folder are set per job below; a caller's would change every job.
unset VECANNEAL_OUT_DIR VECANNEAL_MODULES VECANNEAL_ENV_SCRIPT

[ -x "$BIN" ] || fail "no vecanneal binary at $BIN"
BIN=$(realpath "$BIN"); REPO=$(realpath "$REPO")
[ -f "$REPO/jobs/slurm/compress.sbatch" ] || fail "no jobs/slurm/compress.sbatch under $REPO"
command -v mpirun >/dev/null || skip "no mpirun on PATH"

# --- install ---------------------------------------------------------------------------------------
need() { for c in munged mungekey slurmctld slurmd sbatch srun sinfo scontrol scancel; do command -v "$c" >/dev/null || return 1; done; }
if ! need; then
  [ "$(id -u)" = 0 ] || skip "Slurm is not installed and we are not root to apt-get it"
  [ -z "${VA_SLURM_NO_INSTALL:-}" ] || skip "Slurm is not installed (VA_SLURM_NO_INSTALL set)"
  command -v apt-get >/dev/null || skip "Slurm is not installed and there is no apt-get"
  say "installing slurm-wlm and munge with apt-get"
  export DEBIAN_FRONTEND=noninteractive   # apt-get must not stop to ask (no terminal under CTest)
  { timeout "$(left 120)" apt-get -o DPkg::Lock::Timeout=60 update &&
    timeout "$(left 150)" apt-get -o DPkg::Lock::Timeout=60 install -y --no-install-recommends slurm-wlm munge; } > /tmp/va-slurm-apt.log 2>&1 ||
    { tail -n 5 /tmp/va-slurm-apt.log; skip "apt-get install slurm-wlm munge failed (log /tmp/va-slurm-apt.log)"; }
  need || skip "slurm-wlm/munge installed but a command is still missing"
fi
[ "$(id -u)" = 0 ] || skip "the test cluster runs its daemons as root (SlurmUser=root); run as root"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   # Open MPI refuses root without them
say "$(slurmctld -V), $(munged -V 2>&1 | head -n 1)"

# --- the cluster -----------------------------------------------------------------------------------
TMP=$(mktemp -d /tmp/va-slurm.XXXXXX) || fail "mktemp"
chmod 755 "$TMP"                       # munged wants every directory above its socket searchable
mkdir -p "$TMP"/{munge,state,spool,log,work}
PIDS=()
cleanup() {
  local rc=$? p i
  trap - EXIT INT TERM
  if [ -n "${SLURM_CONF:-}" ] && [ -f "$TMP/slurmctld.pid" ]; then
    scancel --full --quiet --partition=vatest 2>/dev/null   # no job may outlive its slurmd
    for i in $(seq 20); do [ -z "$(squeue -h -t R,CG 2>/dev/null)" ] && break; sleep 0.5; done
  fi
  for p in "$TMP/slurmd.pid" "$TMP/slurmctld.pid" "$TMP/munge/munged.pid"; do
    [ -s "$p" ] && PIDS+=("$(cat "$p")")
  done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for i in $(seq 20); do
    local alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break; sleep 0.5
  done
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  if [ -n "${VA_SLURM_KEEP:-}" ]; then say "kept $TMP"; else rm -rf "$TMP"; fi
  say "daemons stopped, exit $rc"
  exit $rc
}
trap cleanup EXIT
trap 'say "interrupted"; exit 1' INT TERM

# munge: our own daemon, key and socket in the temp dir (a system munged, if any, is left alone).
MSOCK=$TMP/munge/munge.socket.2
if ! mungekey --create --keyfile="$TMP/munge/munge.key" 2>/dev/null; then
  dd if=/dev/urandom of="$TMP/munge/munge.key" bs=1024 count=1 2>/dev/null
fi
chmod 600 "$TMP/munge/munge.key"
munged --key-file="$TMP/munge/munge.key" --socket="$MSOCK" --pid-file="$TMP/munge/munged.pid" \
  --log-file="$TMP/log/munged.log" --seed-file="$TMP/munge/munged.seed" ||
  { tail -n 3 "$TMP/log/munged.log"; skip "munged does not start in this sandbox"; }
munge -S "$MSOCK" -n | unmunge -S "$MSOCK" >/dev/null || skip "munge credentials do not round-trip"

# Two free TCP ports (nothing answers on them) for slurmctld and slurmd.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORTS=(); p=$((20000 + $$ % 20000))
while [ ${#PORTS[@]} -lt 2 ]; do port_free "$p" && PORTS+=("$p"); p=$((p + 1)); done
HOST=$(uname -n); HOST=${HOST%%.*}   # what slurmd matches NodeName against
NCPU=$(nproc)
# Fake GPUs, so the scripts' --gpus-per-task/--gpu-bind lines are tested as shipped: character
# devices (copies of /dev/null) for gres.conf; the CPU config never touches them.
GRES=""
if [ -z "${VA_SLURM_NO_FAKE_GPUS:-}" ] && mknod "$TMP/fakegpu0" c 1 3 2>/dev/null && mknod "$TMP/fakegpu1" c 1 3 2>/dev/null; then
  echo "NodeName=$HOST Name=gpu File=$TMP/fakegpu[0-1]" > "$TMP/gres.conf"
  GRES="Gres=gpu:2"
fi
write_conf() {   # $1: the node's Gres= (or empty)
  cat > "$TMP/slurm.conf" <<EOF
# one-node test cluster of vecanneal's tests/slurm/run_slurm_test.sh
ClusterName=vatest
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${PORTS[0]}
SlurmdPort=${PORTS[1]}
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job may start again this long after it was killed (default 120 s)
AuthInfo=socket=$MSOCK,cred_expire=10
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/log/slurmctld.log
SlurmdLogFile=$TMP/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups: containers rarely have them
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
# finished jobs stay in 'scontrol show job' for 10 minutes (no slurmdbd, so no sacct)
MinJobAge=600
KillWait=5
GresTypes=gpu
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$NCPU RealMemory=1024 $1 State=UNKNOWN
PartitionName=vatest Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}
export SLURM_CONF=$TMP/slurm.conf   # every Slurm client and daemon of this test reads this cluster's file
start_slurm() {   # starts both daemons, waits for the node to be idle; returns 1 if it never is
  slurmctld -f "$SLURM_CONF" || return 2
  slurmd -f "$SLURM_CONF" || return 2
  local t=$((SECONDS + $(left 30))) st
  while [ $SECONDS -lt $t ]; do
    st=$(sinfo -h -n "$HOST" -o %t 2>/dev/null)
    [ "$st" = idle ] && return 0
    sleep 0.5
  done
  say "node state '${st:-none}' after waiting"; return 1
}
stop_slurm() {
  local p
  for p in "$TMP/slurmd.pid" "$TMP/slurmctld.pid"; do
    [ -s "$p" ] && kill "$(cat "$p")" 2>/dev/null
  done
  sleep 2; rm -f "$TMP/slurmd.pid" "$TMP/slurmctld.pid"; rm -rf "$TMP"/state/* "$TMP"/spool/*
}
GPU_LINES=shipped
write_conf "$GRES"
start_slurm; rc=$?
if [ $rc = 1 ] && [ -n "$GRES" ]; then
  say "node not idle with fake GPUs; retrying without them (the GPU #SBATCH lines get stripped)"
  tail -n 5 "$TMP/log/slurmctld.log"
  stop_slurm; write_conf ""; GPU_LINES=stripped
  start_slurm; rc=$?
elif [ -z "$GRES" ]; then GPU_LINES=stripped
fi
[ $rc = 2 ] && { dump_logs; skip "slurmctld/slurmd do not start in this sandbox"; }
[ $rc = 0 ] || { dump_logs; skip "the Slurm node never became idle in this sandbox"; }
say "cluster up: node $HOST, $NCPU CPUs, ports ${PORTS[*]}, GPU lines $GPU_LINES; srun --mpi=list: $(srun --mpi=list 2>&1 | grep -v types | tr -d '\t' | tr '\n' ' ')"

# --- helpers ---------------------------------------------------------------------------------------
W=$TMP/work
jobfield() { scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }
wait_job() {   # wait_job ID SECONDS: polls until the job has ended (faster than sbatch --wait)
  local t=$((SECONDS + $2))
  while [ $SECONDS -lt $t ]; do
    case $(jobfield "$1" JobState) in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE) return 0 ;; esac
    sleep 0.5
  done
  return 1
}
script() {   # the script to submit: as shipped, or without its GPU lines when there are no fake GPUs
  if [ "$GPU_LINES" = shipped ]; then echo "$REPO/jobs/slurm/$1"
  else sed '/^#SBATCH --gpu/d' "$REPO/jobs/slurm/$1" > "$W/$1" && echo "$W/$1"; fi
}
# submit TIMEOUT EXPORTS SBATCH-ARGS...: from $W, the submit directory (outputs land in
# $W/out/JOBID, logs in $W/*.out); prints the job id, before waiting when --wait is given.
submit() { local to=$1 ex=$2; shift 2; (cd "$W" && timeout "$to" sbatch --parsable --export="ALL,VECANNEAL_HOME=$REPO,$ex" "$@"); }

# --- data and config -------------------------------------------------------------------------------
# A private copy of the binary: a rebuild during the test (make in another shell) can't break a job.
cp "$BIN" "$TMP/vecanneal" && BIN=$TMP/vecanneal || fail "cannot copy $BIN"
(cd "$W" && mpirun --oversubscribe -n 1 "$BIN" gen --out "$W/data.h5" --n 2000 --d 16 --clusters 8 --seed 7) > "$W/gen.log" 2>&1 ||
  { cat "$W/gen.log"; fail "vecanneal gen failed"; }
cat > "$W/cpu.ini" <<EOF
# CPU config of the slurm test (out and metrics come from the job script)
[data]
input = $W/data.h5:/train
[compress]
k = 8
backend = cpu
max_iter = 30
progress_every = 10
EOF

# --- 0. every script parses: bash -n, and sbatch --test-only on this cluster (sizes cut to fit) ------
for f in compress compress-cpu embed pipeline scaling; do
  bash -n "$REPO/jobs/slurm/$f.sbatch" || fail "$f.sbatch: bash syntax error"
  msg=$(cd "$W" && timeout "$(left 20)" sbatch --test-only --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 \
        --time=5 "$(script $f.sbatch)" 2>&1) || { echo "$msg"; fail "sbatch --test-only $f.sbatch refused"; }
done
bash -n "$REPO/jobs/slurm/common.sh" || fail "common.sh: bash syntax error"
say "0. all five scripts pass bash -n and sbatch --test-only"

# --- 1. compress.sbatch ----------------------------------------------------------------------------
say "1. compress.sbatch: 2 tasks x 1 CPU, config cpu.ini, sbatch --wait"
id=$(submit "$(left 60)" "VECANNEAL=$BIN" --wait --ntasks-per-node=2 --cpus-per-task=1 --time=5 \
     "$(script compress.sbatch)" cpu.ini --set seed=3)
wrc=$?
id=${id%%;*}
[ -n "$id" ] || fail "compress.sbatch: no job id (sbatch --wait exit $wrc)"
state=$(jobfield "$id" JobState); ec=$(jobfield "$id" ExitCode)
say "job $id: sbatch --wait exit $wrc, JobState=$state ExitCode=$ec"
[ $wrc = 124 ] && { scancel "$id"; fail "compress job $id did not finish in time"; }
[ "$state" = COMPLETED ] && [ "$ec" = 0:0 ] && [ $wrc = 0 ] || fail "compress job $id: state $state, exit $ec, sbatch $wrc"
# The #SBATCH lines (with their trailing comments) were read: requeue on, the GPU per task asked.
scontrol show job "$id" > "$W/job-$id.txt"
grep -q "Requeue=1" "$W/job-$id.txt" || fail "job $id is not requeueable: #SBATCH --requeue not read"
[ "$GPU_LINES" = stripped ] || grep -q "TresPerTask=.*gpu:1" "$W/job-$id.txt" || fail "job $id: no gpu per task"
idx=$W/out/$id/index.h5
[ -s "$idx" ] || fail "no index at $idx"
[ -s "$W/out/$id/metrics.json" ] || fail "no metrics at $W/out/$id/metrics.json"
info=$("$BIN" info "$idx" 2>&1) || { echo "$info"; fail "vecanneal info $idx failed"; }
for want in "n  *2000" "d  *16" "ranks  *2" "seed  *3" "k_final  *8" "threads  *= 1"; do
  echo "$info" | grep -q "^ *$want\$" || { echo "$info" | head -n 30; fail "vecanneal info: no line '$want'"; }
done
grep -q "launcher" "$W/va-compress-$id.out" && say "  $(grep -o 'launcher .*' "$W/va-compress-$id.out")"
say "  ok: $idx ($("$BIN" info "$idx" | grep -c .) info lines), metrics.json written"

# --- 2. scaling.sbatch, through the mpirun fallback ------------------------------------------------
say "2. scaling.sbatch: --array=0-1 (1 and 2 ranks of 2 tasks), VECANNEAL_LAUNCHER=mpirun"
id=$(submit "$(left 60)" "VECANNEAL=$BIN,VECANNEAL_LAUNCHER=mpirun" --wait --array=0-1 --ntasks=2 \
     --cpus-per-task=1 --time=5 "$(script scaling.sbatch)" cpu.ini)
wrc=$?; id=${id%%;*}
[ -n "$id" ] || fail "scaling.sbatch: no job id (sbatch --wait exit $wrc)"
[ $wrc = 0 ] || { scancel "$id"; fail "scaling array $id: sbatch --wait exit $wrc"; }
for a in 0 1; do
  s=$(jobfield "${id}_$a" JobState); e=$(jobfield "${id}_$a" ExitCode)
  [ "$s" = COMPLETED ] && [ "$e" = 0:0 ] || fail "scaling element ${id}_$a: state $s exit $e"
done
for n in 1 2; do
  "$BIN" info "$W/out/$id/ranks-$n/index.h5" | grep -q "^ *ranks  *$n\$" || fail "scaling: no $n-rank index in out/$id/ranks-$n"
done
[ "$(grep -c . "$W/out/$id/scaling.tsv")" = 3 ] || { cat "$W/out/$id/scaling.tsv"; fail "scaling.tsv is not a header + 2 lines"; }
say "  ok: $(tr '\t\n' ' |' < "$W/out/$id/scaling.tsv")"

# --- 3. time-limit signal -> checkpoint -> exit 75 -> requeue -> --resume --------------------------
# A run long enough to be interrupted (200000 x 64, k 128: ~114 iterations of ~25 ms on 2 ranks here;
# 'tol = 0' only stops when nothing changes any more), once per launcher with 2 ranks. The USR1 travels
# test poll (0.3 s) -> scancel -> slurmd -> batch shell -> launcher -> ranks: with 50000 x 32 rows the
# whole loop (0.3 s) once ended before it arrived. The jobs overlap: while one waits out
# its requeue delay the other runs. The resumed result must equal an uninterrupted run's.
(cd "$W" && mpirun --oversubscribe -n 1 "$BIN" gen --out "$W/long.h5" --n 200000 --d 64 --clusters 64 --seed 11) >> "$W/gen.log" 2>&1 ||
  { cat "$W/gen.log"; fail "vecanneal gen (long) failed"; }
printf '%s\n' "input = $W/long.h5:/train" "k = 128" "backend = cpu" "max_iter = 400" "tol = 0" \
  "tol_mode = absolute" "min_changes = 0" "progress_every = 1" > "$W/long.ini"
(cd "$W" && mpirun --oversubscribe -n 2 "$BIN" compress --config long.ini --set threads=1 --set progress_every=0 \
  --out "$W/long-ref.h5") > "$W/long-ref.log" 2>&1 || { cat "$W/long-ref.log"; fail "uninterrupted reference run failed"; }
summary() { "$BIN" info "$1" | grep -E '^ *(iterations|k_final|final_energy|distortion|converged) '; }
REF=$(summary "$W/long-ref.h5")
LAUNCHERS="mpirun"; srun --mpi=list 2>&1 | grep -qw pmix && LAUNCHERS="srun mpirun"
say "3. requeue flow: compress.sbatch, 2 ranks, USR1 to the batch shell mid-run (launchers: $LAUNCHERS)"
declare -A JOB SIGNALLED
for L in $LAUNCHERS; do
  id=$(submit 20 "VECANNEAL=$BIN,VECANNEAL_LAUNCHER=$L" --ntasks-per-node=2 --cpus-per-task=1 --time=5 \
       "$(script compress.sbatch)" long.ini)
  JOB[$L]=${id%%;*}; [ -n "${JOB[$L]}" ] || fail "requeue test ($L): sbatch failed"; SIGNALLED[$L]=0
done
# Signal each job once its first iteration line shows: what --signal=B:USR1@T does at T seconds
# before the time limit (USR1 to the batch shell only). Then wait for every job to end.
t=$((SECONDS + $(left 150)))
while [ $SECONDS -lt $t ]; do
  ended=0
  for L in $LAUNCHERS; do
    id=${JOB[$L]}
    if [ "${SIGNALLED[$L]}" = 0 ] && grep -Eq '^ +[0-9]+ +[0-9.e+-]+ +[0-9.e+-]+ ' "$W/va-compress-$id.out" 2>/dev/null; then
      scancel --batch --signal=USR1 "$id" || fail "scancel --batch --signal=USR1 $id"; SIGNALLED[$L]=1
    fi
    case $(jobfield "$id" JobState) in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) ended=$((ended + 1)) ;; esac
  done
  [ "$ended" = "$(echo $LAUNCHERS | wc -w)" ] && break
  sleep 0.3
done
for L in $LAUNCHERS; do
  id=${JOB[$L]}; log=$W/va-compress-$id.out; out=$W/out/$id/index.h5
  s=$(jobfield "$id" JobState); r=$(jobfield "$id" Restarts); e=$(jobfield "$id" ExitCode)
  [ "${SIGNALLED[$L]}" = 1 ] || fail "requeue test ($L): job $id never showed an iteration (state $s)"
  [ "$s" = COMPLETED ] && [ "$r" = 1 ] && [ "$e" = 0:0 ] || fail "requeue test ($L) job $id: state $s, restarts $r, exit $e"
  it=$(sed -n 's/^checkpoint after iteration \([0-9]*\) written.*/\1/p' "$log" | head -n 1)
  [ -n "$it" ] || fail "requeue test ($L): no 'checkpoint after iteration' in $log"
  grep -q "exit 75: stopped by the signal.*requeueing" "$log" || fail "requeue test ($L): the script did not requeue on 75"
  grep -q "^resuming from $out.ckpt.h5 after iteration $it " "$log" || fail "requeue test ($L): the second run did not resume from $out.ckpt.h5"
  [ ! -e "$out.ckpt.h5" ] || fail "requeue test ($L): the checkpoint outlived the completed job"
  got=$(summary "$out")
  [ "$got" = "$REF" ] || { echo "resumed:"; echo "$got"; echo "uninterrupted:"; echo "$REF"; fail "requeue test ($L): resumed result differs from the uninterrupted run"; }
  say "  ok ($L): job $id USR1 -> checkpoint after iteration $it -> exit 75 -> requeued -> --resume -> COMPLETED, same result as uninterrupted"
done

# scancel must cancel: vecanneal's SIGTERM also ends in checkpoint + 75, which must not requeue.
id=$(submit 20 "VECANNEAL=$BIN" --ntasks-per-node=2 --cpus-per-task=1 --time=5 "$(script compress.sbatch)" long.ini)
id=${id%%;*}; [ -n "$id" ] || fail "scancel test: sbatch failed"
log=$W/va-compress-$id.out
t=$((SECONDS + $(left 40)))
until grep -Eq '^ +[0-9]+ +[0-9.e+-]+ +[0-9.e+-]+ ' "$log" 2>/dev/null || [ $SECONDS -ge $t ]; do sleep 0.3; done
scancel "$id" || fail "scancel $id"
t=$((SECONDS + $(left 30)))
until grep -q "not requeued" "$log" 2>/dev/null || [ $SECONDS -ge $t ]; do sleep 0.3; done
sleep 1
s=$(jobfield "$id" JobState); r=$(jobfield "$id" Restarts)
[ "$s" = CANCELLED ] && [ "$r" = 0 ] || fail "scancel test: job $id is $s with $r restarts, want CANCELLED, 0"
grep -q "not requeued" "$log" || fail "scancel test: no 'not requeued' in $log"
[ -s "$W/out/$id/index.h5.ckpt.h5" ] || fail "scancel test: no checkpoint kept in out/$id"
say "  ok: scancel of job $id -> checkpoint kept, exit 75 not requeued, CANCELLED"

# --- 4. one GPU per rank (the fake GPUs of this cluster) -------------------------------------------
# A probe in place of vecanneal prints what each rank sees.
printf '%s\n' '#!/bin/bash' \
  'echo "gpu-probe: rank ${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-?}} CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"' > "$W/gpu-probe"
chmod +x "$W/gpu-probe"
if [ "$GPU_LINES" = shipped ] && [[ $LAUNCHERS == *srun* ]]; then
  id=$(submit 20 "VECANNEAL=$W/gpu-probe" --ntasks-per-node=2 --cpus-per-task=1 --time=5 "$(script compress.sbatch)" cpu.ini)
  id=${id%%;*}; [ -n "$id" ] || fail "GPU binding test: sbatch failed"
  wait_job "$id" "$(left 40)" || fail "GPU binding test: job $id did not end"
  [ "$(jobfield "$id" JobState)" = COMPLETED ] || fail "GPU binding test: job $id $(jobfield "$id" JobState)"
  devs=$(sed -n 's/^gpu-probe: rank [0-9]* CUDA_VISIBLE_DEVICES=//p' "$W/va-compress-$id.out" | sort | tr '\n' ' ')
  [ "$devs" = "0 1 " ] || fail "GPU binding test: ranks saw CUDA_VISIBLE_DEVICES '$devs', want one GPU each (0, 1)"
  say "4. --gpus-per-task=1 --gpu-bind=single:1 under srun: rank GPUs $devs"; DONE_EXTRA=", GPU binding"
else
  say "4. GPU binding not checked (GPU lines $GPU_LINES, launchers $LAUNCHERS)"; DONE_EXTRA=""
fi

# --- 5. output folder, site hook, NCCL pass-through, the CPU-only form -----------------------------
# A probe in place of vecanneal prints, per rank, what reached it: the NCCL variables (passed through
# as the environment holds them, never set by the scripts), the marker of the env script, the
# modules the fake `module` function loaded (exported to the batch shell as Lmod exports its own),
# and its arguments (the --out folder, --set backend=cpu).
printf '%s\n' '#!/bin/bash' \
  'echo "env-probe: rank ${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-?}} nvls=${NCCL_NVLS_ENABLE-unset} ncclib=${NCCL_IB_HCA-unset} marker=${VA_TEST_ENV_MARKER-unset} modules=${VA_TEST_MODULES-unset} args=$*"' > "$W/env-probe"
chmod +x "$W/env-probe"
# The site's env script: relative to the submit directory; sees the modules already loaded.
printf '%s\n' '# site env of the slurm test: a marker for the ranks, and proof that the modules came first' \
  'export VA_TEST_ENV_MARKER="sourced-after:${VA_TEST_MODULES-none}"   # read by env-probe on every rank' > "$W/site-env.sh"
module() {   # the fake `module`: 'load A B' records A B in VA_TEST_MODULES; a module named broken fails
  echo "fake-module: $*" >&2
  [ "$1" = load ] || return 1
  shift
  case " $* " in *" broken "*) return 1 ;; esac
  export VA_TEST_MODULES="${VA_TEST_MODULES:+$VA_TEST_MODULES }$*"   # what the probe prints
}
# hooked SECONDS EXPORTS SBATCH-ARGS...: submit with the fake module function and the hook variables
# in the environment (sbatch passes the submit environment on, functions included).
hooked() {
  (export -f module   # sbatch carries it to the batch shell, as a site's Lmod function travels
   export VECANNEAL_MODULES=${VECANNEAL_MODULES:-vatest/1.0 other/2} VECANNEAL_ENV_SCRIPT=site-env.sh   # the hook under test
   submit "$@")
}
say "5. VECANNEAL_OUT_DIR, VECANNEAL_MODULES + VECANNEAL_ENV_SCRIPT, NCCL variables, compress-cpu.sbatch"
# a: the CPU-only form, probe, relative VECANNEAL_OUT_DIR, NCCL settings of the environment (srun if any)
ida=$(NCCL_NVLS_ENABLE=1 NCCL_IB_HCA=mlx5_0 hooked 20 "VECANNEAL=$W/env-probe,VECANNEAL_OUT_DIR=scratch" \
      --ntasks-per-node=2 --cpus-per-task=1 --time=5 "$REPO/jobs/slurm/compress-cpu.sbatch" cpu.ini); ida=${ida%%;*}
# b: the GPU form through mpirun with no NCCL variable in the environment: the ranks see none
idb=$(unset NCCL_NVLS_ENABLE NCCL_IB_HCA; submit 20 "VECANNEAL=$W/env-probe,VECANNEAL_LAUNCHER=mpirun" \
      --ntasks-per-node=2 --cpus-per-task=1 --time=5 "$(script compress.sbatch)" cpu.ini); idb=${idb%%;*}
# c: the CPU-only form for real, with a config that asks for cuda (the form must run it on the CPU),
#    outputs in an absolute VECANNEAL_OUT_DIR
sed 's/^backend = cpu$/backend = cuda/' "$W/cpu.ini" > "$W/cuda.ini"
idc=$(hooked 20 "VECANNEAL=$BIN,VECANNEAL_OUT_DIR=$TMP/scratch-abs" --ntasks-per-node=2 --cpus-per-task=1 --time=5 \
      "$REPO/jobs/slurm/compress-cpu.sbatch" cuda.ini --set seed=5); idc=${idc%%;*}
# d, e: a hook that fails ends the job with 2 before anything runs
idd=$(submit 20 "VECANNEAL=$W/env-probe,VECANNEAL_ENV_SCRIPT=no-such-env.sh" --ntasks-per-node=1 --cpus-per-task=1 \
      --time=5 "$REPO/jobs/slurm/compress-cpu.sbatch" cpu.ini); idd=${idd%%;*}
ide=$(VECANNEAL_MODULES="vatest/1.0 broken" hooked 20 "VECANNEAL=$W/env-probe" --ntasks-per-node=1 --cpus-per-task=1 \
      --time=5 "$REPO/jobs/slurm/compress-cpu.sbatch" cpu.ini); ide=${ide%%;*}
for id in "$ida" "$idb" "$idc" "$idd" "$ide"; do
  [ -n "$id" ] || fail "step 5: sbatch failed (jobs '$ida' '$idb' '$idc' '$idd' '$ide')"
done
for id in $ida $idb $idc $idd $ide; do wait_job "$id" "$(left 60)" || fail "step 5: job $id did not end"; done
for id in $ida $idb $idc; do
  [ "$(jobfield "$id" JobState)" = COMPLETED ] || fail "step 5: job $id $(jobfield "$id" JobState) $(jobfield "$id" ExitCode)"
done
probe() { sed -n 's/^env-probe: rank [0-9]* //p' "$1" | sort -u; }
want="nvls=1 ncclib=mlx5_0 marker=sourced-after:vatest/1.0 other/2 modules=vatest/1.0 other/2 args=compress --config $W/cpu.ini --out $W/scratch/$ida/index.h5 --metrics $W/scratch/$ida/metrics.json --set backend=cpu --set threads=1"
got=$(probe "$W/va-compress-cpu-$ida.out")
[ "$(grep -c '^env-probe: rank' "$W/va-compress-cpu-$ida.out")" = 2 ] && [ "$got" = "$want" ] ||
  { echo "got:  $got"; echo "want: $want"; fail "step 5a: the ranks of job $ida did not see the hook, the NCCL settings, the out folder or backend cpu"; }
[ -d "$W/scratch/$ida" ] && [ ! -e "$W/out/$ida" ] || fail "step 5a: VECANNEAL_OUT_DIR=scratch: no $W/scratch/$ida, or $W/out/$ida made"
got=$(probe "$W/va-compress-$idb.out")
[ "$(grep -c '^env-probe: rank' "$W/va-compress-$idb.out")" = 2 ] || fail "step 5b: job $idb: not 2 ranks"
case $got in "nvls=unset ncclib=unset marker=unset modules=unset args=compress "*) ;;
  *) echo "got: $got"; fail "step 5b: job $idb's ranks saw an NCCL variable the environment did not hold (or a hook ran)" ;; esac
grep -q "TresPerTask=.*gpu" <(scontrol show job "$idc") && fail "step 5c: compress-cpu.sbatch asked for GPUs"
idx=$TMP/scratch-abs/$idc/index.h5
info=$("$BIN" info "$idx" 2>&1) || { echo "$info"; fail "step 5c: no index at $idx"; }
for w in "n  *2000" "ranks  *2" "seed  *5" "backend  *cpu"; do
  echo "$info" | grep -q "^ *$w\$" || { echo "$info" | head -n 30; fail "step 5c: vecanneal info: no line '$w'"; }
done
[ -s "$TMP/scratch-abs/$idc/metrics.json" ] && [ ! -e "$W/out/$idc" ] || fail "step 5c: metrics not in VECANNEAL_OUT_DIR, or out/$idc made"
for id in $idd $ide; do
  [ "$(jobfield "$id" JobState)" = FAILED ] && [ "$(jobfield "$id" ExitCode)" = 2:0 ] ||
    fail "step 5: failing hook, job $id: $(jobfield "$id" JobState) $(jobfield "$id" ExitCode), want FAILED 2:0"
  grep -q '^env-probe' "$W/va-compress-cpu-$id.out" && fail "step 5: job $id ran vecanneal after its hook failed"
done
grep -q "VECANNEAL_ENV_SCRIPT .*no-such-env.sh' not readable" "$W/va-compress-cpu-$idd.out" || fail "step 5d: no message for the missing env script"
grep -q "module load vatest/1.0 broken failed" "$W/va-compress-cpu-$ide.out" || fail "step 5e: no message for the failed module load"
say "  ok: hook (modules, then env script) and NCCL settings reach every rank (job $ida); none set when the environment has none (job $idb); compress-cpu.sbatch runs a cuda config on the CPU into VECANNEAL_OUT_DIR (job $idc); a failing hook ends the job with 2 (jobs $idd, $ide)"

# --- 6. embed.sbatch and pipeline.sbatch (when the model is installed) ----------------------------
MODEL=$REPO/models/all-MiniLM-L6-v2
if [ -f "$MODEL/model.safetensors" ] && [ -f "$REPO/tests/data/embed_small.jsonl" ]; then
  cp "$REPO/tests/data/embed_small.jsonl" "$W/corpus.jsonl"
  printf '%s\n' "k = 4" "backend = cpu" "progress_every = 0" > "$W/embed-k4.ini"
  ide=$(submit 20 "VECANNEAL=$BIN,VECANNEAL_MODEL=$MODEL" --ntasks-per-node=1 --cpus-per-task=1 --time=5 \
        "$(script embed.sbatch)" corpus.jsonl); ide=${ide%%;*}
  idp=$(submit 20 "VECANNEAL=$BIN,VECANNEAL_MODEL=$MODEL,VECANNEAL_CORPUS=corpus.jsonl" --ntasks-per-node=1 \
        --cpus-per-task=1 --time=5 "$(script pipeline.sbatch)" embed-k4.ini); idp=${idp%%;*}
  [ -n "$ide" ] && [ -n "$idp" ] || fail "embed/pipeline: sbatch failed"
  { wait_job "$ide" "$(left 90)" && wait_job "$idp" "$(left 90)"; } || fail "embed/pipeline jobs $ide $idp did not end"
  for id in $ide $idp; do
    [ "$(jobfield "$id" JobState)" = COMPLETED ] || fail "embed/pipeline job $id: $(jobfield "$id" JobState) $(jobfield "$id" ExitCode)"
  done
  [ -s "$W/out/$ide/vectors.h5" ] || fail "embed.sbatch: no out/$ide/vectors.h5"
  [ -s "$W/out/$idp/vectors.h5" ] || fail "pipeline.sbatch: no out/$idp/vectors.h5"
  info=$("$BIN" info "$W/out/$idp/index.h5") || fail "pipeline.sbatch: vecanneal info out/$idp/index.h5 failed"
  for want in "n  *20" "d  *384" "metric  *cosine" "k_final  *4"; do
    echo "$info" | grep -q "^ *$want\$" || fail "pipeline index: no line '$want'"
  done
  say "6. embed.sbatch (job $ide) and pipeline.sbatch (job $idp, embed + compress): 20 x 384, cosine, k 4"
  DONE_EXTRA="$DONE_EXTRA, embed, pipeline"
else
  say "6. embed/pipeline not run: no model in $MODEL (scripts/fetch-model installs it)"
fi

say "PASS (scripts parse, compress, scaling array, requeue flow$DONE_EXTRA, hook, out dir, CPU form) in $((SECONDS - T0)) s"
exit 0
