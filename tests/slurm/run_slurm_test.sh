#!/bin/bash
# run_slurm_test.sh VECANNEAL_BINARY REPO_DIR
# The `slurm` CTest: a throw-away one-node Slurm cluster (munged, slurmctld, slurmd on localhost,
# all state in a temp dir) runs the job scripts of jobs/slurm/ as shipped:
#   1. compress.sbatch, 2 tasks, CPU config (srun --mpi=pmix when this Slurm has pmix, else mpirun);
#      job state COMPLETED 0:0, index readable by `vecanneal info`, metrics written;
#   2. scaling.sbatch as a 2-element array (1 and 2 ranks) through the mpirun fallback;
#   3. the signal/requeue flow with a stand-in binary (vecanneal has no checkpoints yet): USR1 to the
#      batch shell (as --signal=B:USR1@T does) -> forwarded -> exit 75 -> scontrol requeue -> the
#      second run gets --resume CKPT and completes.
# Installs slurm-wlm and munge with apt-get when missing (root only; VA_SLURM_NO_INSTALL=1: don't).
# Exits 0 pass, 1 fail, 77 skip (Slurm unavailable here), always with the reason.
# VA_SLURM_KEEP=1 keeps the temp dir (logs, slurm.conf) for a look afterwards.
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
  export DEBIAN_FRONTEND=noninteractive
  { timeout "$(left 120)" apt-get update &&
    timeout "$(left 150)" apt-get install -y --no-install-recommends slurm-wlm munge; } > /tmp/va-slurm-apt.log 2>&1 ||
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
HOST=$(hostname -s)
NCPU=$(nproc)
# Fake GPUs, so the scripts' --gpus-per-task/--gpu-bind lines are tested as shipped: character
# devices (copies of /dev/null) for gres.conf; the CPU config never touches them.
GRES=""
if mknod "$TMP/fakegpu0" c 1 3 2>/dev/null && mknod "$TMP/fakegpu1" c 1 3 2>/dev/null; then
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
export SLURM_CONF=$TMP/slurm.conf
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
script() {   # the script to submit: as shipped, or without its GPU lines when there are no fake GPUs
  if [ "$GPU_LINES" = shipped ]; then echo "$REPO/jobs/slurm/$1"
  else sed '/^#SBATCH --gpu/d' "$REPO/jobs/slurm/$1" > "$W/$1" && echo "$W/$1"; fi
}
# submit TIMEOUT EXPORTS SBATCH-ARGS...: from $W, the submit directory (outputs land in
# $W/out/JOBID, logs in $W/*.out); prints the job id, before waiting when --wait is given.
submit() { local to=$1 ex=$2; shift 2; (cd "$W" && timeout "$to" sbatch --parsable --export="ALL,VECANNEAL_HOME=$REPO,$ex" "$@"); }

# --- data and config -------------------------------------------------------------------------------
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

# --- 3. signal -> exit 75 -> requeue -> --resume (stand-in binary) ---------------------------------
# vecanneal has no checkpoints yet: this stand-in plays its future part. Without --resume it waits
# for SIGUSR1, writes OUT.ckpt and exits 75; with --resume CKPT it writes the index and exits 0.
cat > "$W/fake-vecanneal" <<'EOF'
#!/bin/bash
out=""; resume=""
while [ $# -gt 0 ]; do case $1 in --out) out=$2; shift ;; --resume) resume=$2; shift ;; esac; shift; done
echo "fake-vecanneal: restart ${SLURM_RESTART_COUNT:-0}, resume '${resume}'"
if [ -n "$resume" ]; then echo "resumed from $resume" > "$out"; exit 0; fi
trap 'echo checkpoint > "$out.ckpt"; echo "fake-vecanneal: USR1, checkpoint written"; exit 75' USR1
touch "$out.started"
for i in $(seq 600); do sleep 0.1; done
exit 1
EOF
chmod +x "$W/fake-vecanneal"
# One job per launcher, side by side (1 task each): srun forwards USR1 to its tasks, mpirun to its ranks.
LAUNCHERS="mpirun"; srun --mpi=list 2>&1 | grep -qw pmix && LAUNCHERS="srun mpirun"
say "3. requeue flow: compress.sbatch with a stand-in binary, USR1 to the batch shell (launchers: $LAUNCHERS)"
declare -A JOB
for L in $LAUNCHERS; do
  id=$(submit 20 "VECANNEAL=$W/fake-vecanneal,VECANNEAL_LAUNCHER=$L" --ntasks-per-node=1 \
       --cpus-per-task=1 --time=5 "$(script compress.sbatch)" cpu.ini)
  JOB[$L]=${id%%;*}; [ -n "${JOB[$L]}" ] || fail "requeue test ($L): sbatch failed"
done
for L in $LAUNCHERS; do
  id=${JOB[$L]}; out=$W/out/$id/index.h5
  t=$((SECONDS + $(left 40))); while [ $SECONDS -lt $t ] && [ ! -e "$out.started" ]; do sleep 0.3; done
  [ -e "$out.started" ] || fail "requeue test ($L): job $id never started the step"
  # What --signal=B:USR1@T does at T seconds before the time limit: USR1 to the batch shell only.
  scancel --batch --signal=USR1 "$id" || fail "scancel --batch --signal=USR1 $id"
done
# Slurm holds a requeued job back for cred_expire (10 s here, 120 s by default), then starts it.
for L in $LAUNCHERS; do
  id=${JOB[$L]}; out=$W/out/$id/index.h5
  t=$((SECONDS + $(left 60)))
  while [ $SECONDS -lt $t ]; do
    s=$(jobfield "$id" JobState)
    case $s in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
    sleep 0.5
  done
  s=$(jobfield "$id" JobState); r=$(jobfield "$id" Restarts); e=$(jobfield "$id" ExitCode)
  [ "$s" = COMPLETED ] && [ "$r" = 1 ] && [ "$e" = 0:0 ] || fail "requeue test ($L) job $id: state $s, restarts $r, exit $e"
  grep -q "resumed from $out.ckpt" "$out" || fail "requeue test ($L): the second run did not get --resume $out.ckpt"
  say "  ok ($L): job $id USR1 -> checkpoint -> exit 75 -> requeued -> --resume index.h5.ckpt -> COMPLETED"
done

say "PASS (compress, scaling array, requeue flow) in $((SECONDS - T0)) s"
exit 0
