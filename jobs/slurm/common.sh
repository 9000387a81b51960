# common.sh: shared by the vecanneal sbatch scripts in this folder. Sourced, never submitted.
# Each script sources it, calls va_setup, builds its command line and calls va_step.
# Environment it reads (all optional):
#   VECANNEAL_CONFIG      config file when none is given as the script's first argument
#   VECANNEAL             the vecanneal binary [REPO/build/vecanneal, else vecanneal on PATH]
#   VECANNEAL_HOME        the repository [the one holding this file; the scripts look for this file
#                         in $VECANNEAL_HOME, else $SLURM_SUBMIT_DIR: submit from the repository root]
#   VECANNEAL_OUT_DIR     where the job's folder JOBID/ goes [SUBMIT_DIR/out; relative: to SUBMIT_DIR]
#   VECANNEAL_MODULES     modules to load first, as `module load $VECANNEAL_MODULES` does
#   VECANNEAL_ENV_SCRIPT  a bash file sourced after the modules, before anything else runs
#   VECANNEAL_LAUNCHER    auto | srun | mpirun [auto: srun --mpi=pmix when this Slurm has pmix]
#   MPIRUN                the mpirun to fall back on [mpirun]
# The scripts set no NCCL_* (or other library) variable: whatever the environment holds, e.g. a
# site's NCCL_NVLS_ENABLE or NCCL_IB_HCA, reaches every rank as it is (sbatch passes the submit
# environment on, and srun and Open MPI's mpirun under Slurm pass the job's on to the ranks).

va_log() { echo "vecanneal-slurm: $*" >&2; }
va_die() { va_log "$*"; exit 2; }   # 2 = usage/config, as vecanneal itself

# Open MPI refuses to start as root unless told so. Real clusters run jobs as the user and never
# get here; containers and the single-node test cluster (tests/slurm/) run them as root.
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   # only as root: mpirun refuses root without both
fi

# va_site_env: the site's hook, before the binary and the launcher are looked up, so that either
# may come from it. VECANNEAL_MODULES: `module load` of that list (Lmod or Environment Modules; a
# batch shell that lacks the `module` function gets it from /etc/profile.d when it is there).
# VECANNEAL_ENV_SCRIPT: a bash file sourced here (relative: to the submit directory), for anything
# else: a virtual environment, a spack load, variables. A failure of either ends the job with 2.
va_site_env() {
  if [ -n "${VECANNEAL_MODULES:-}" ]; then
    if ! type module >/dev/null 2>&1; then
      local f
      for f in /etc/profile.d/lmod.sh /etc/profile.d/modules.sh; do
        [ -r "$f" ] && . "$f" && break
      done
    fi
    type module >/dev/null 2>&1 || va_die "VECANNEAL_MODULES='$VECANNEAL_MODULES' but this shell has no 'module' command"
    # shellcheck disable=SC2086  # a list of module names: split on spaces on purpose
    module load $VECANNEAL_MODULES || va_die "module load $VECANNEAL_MODULES failed"
    va_log "module load $VECANNEAL_MODULES"
  fi
  if [ -n "${VECANNEAL_ENV_SCRIPT:-}" ]; then
    local env=$VECANNEAL_ENV_SCRIPT
    case $env in /*) ;; *) env=${SLURM_SUBMIT_DIR:-$PWD}/$env ;; esac
    [ -r "$env" ] || va_die "VECANNEAL_ENV_SCRIPT '$env' not readable"
    # shellcheck disable=SC1090  # the site's file, named at submission
    . "$env" || va_die "sourcing VECANNEAL_ENV_SCRIPT '$env' failed (status $?)"
    va_log "sourced $env"
  fi
  return 0
}

# va_setup NAME "$@": sets VA_HOME, VA_BIN, VA_CONFIG, VA_OUT (created), VA_ARGS (the arguments
# after the config, passed on to vecanneal), VA_THREADS and VA_LAUNCH (the launcher, without -n).
# With VA_NO_CONFIG=1 (embed: it takes no config file) all arguments go to VA_ARGS.
va_setup() {
  local name=$1; shift
  va_site_env
  VA_HOME=${VECANNEAL_HOME:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}   # this repository
  # Config by file: first argument (if it is not an option), else $VECANNEAL_CONFIG, else the default.
  VA_CONFIG=""
  if [ "${VA_NO_CONFIG:-0}" != 1 ]; then
    VA_CONFIG=${VECANNEAL_CONFIG:-$VA_HOME/configs/default.ini}
    if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then VA_CONFIG=$1; shift; fi
    case $VA_CONFIG in /*) ;; *) VA_CONFIG=${SLURM_SUBMIT_DIR:-$PWD}/$VA_CONFIG ;; esac
    [ -r "$VA_CONFIG" ] || va_die "config file '$VA_CONFIG' not readable (give it as the first argument or in VECANNEAL_CONFIG)"
  fi
  VA_ARGS=("$@")
  # The binary: $VECANNEAL, else the checkout's build/, else an install's bin/ (cmake --install puts these
  # scripts in PREFIX/share/vecanneal/jobs/slurm), else PATH.
  VA_BIN=${VECANNEAL:-$VA_HOME/build/vecanneal}
  [ -x "$VA_BIN" ] || VA_BIN=$VA_HOME/../../bin/vecanneal
  [ -x "$VA_BIN" ] || VA_BIN=$(command -v vecanneal) || va_die "no vecanneal binary (set VECANNEAL or build $VA_HOME/build)"
  # One folder per job under VECANNEAL_OUT_DIR (scratch, say), else under the submit directory; an
  # array's elements share the array's folder. A requeued job keeps its id, so its folder.
  local base=${VECANNEAL_OUT_DIR:-out}
  case $base in /*) ;; *) base=${SLURM_SUBMIT_DIR:-$PWD}/$base ;; esac
  VA_OUT=$base/${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-local-$$}}
  mkdir -p "$VA_OUT" || { va_log "cannot create the output folder $VA_OUT (VECANNEAL_OUT_DIR)"; exit 4; }
  # Slurm's cpus-per-task decides the threads of each rank (vecanneal's own guess divides the
  # cores it may use by the ranks on the node, which undercounts when the launcher binds).
  # Put VA_THREADS before VA_ARGS: a --set threads=N among the script's arguments still wins.
  VA_THREADS=()
  if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then VA_THREADS=(--set "threads=$SLURM_CPUS_PER_TASK"); fi
  local mode=${VECANNEAL_LAUNCHER:-auto}
  if [ "$mode" = auto ]; then
    mode=mpirun
    # srun --mpi=pmix only where this Slurm was built with PMIx (Debian's is; some are not).
    if [ -n "${SLURM_JOB_ID:-}" ] && command -v srun >/dev/null &&
       srun --mpi=list 2>&1 | grep -qw pmix; then mode=srun; fi
  fi
  case $mode in
    # srun 22.05+ does not take --cpus-per-task from the allocation: pass it on. GPU options
    # (--gpus-per-task, --gpu-bind) are inherited through SLURM_GPUS_PER_TASK / SLURM_GPU_BIND.
    srun) VA_LAUNCH=(srun --mpi=pmix --kill-on-bad-exit=1 ${SLURM_CPUS_PER_TASK:+--cpus-per-task=$SLURM_CPUS_PER_TASK}) ;;
    # Open MPI's mpirun reads the Slurm allocation itself. No binding: threads of a rank may use
    # all of its cores. It does not bind GPUs: every rank sees all of the job's GPUs
    # (CUDA_VISIBLE_DEVICES of the batch step); the CUDA backend takes local rank % GPUs.
    mpirun) VA_LAUNCH=("${MPIRUN:-mpirun}" --bind-to none) ;;
    *) va_die "VECANNEAL_LAUNCHER='$mode' (auto|srun|mpirun)" ;;
  esac
  va_log "$name: job ${SLURM_JOB_ID:-none} restart ${SLURM_RESTART_COUNT:-0}, config ${VA_CONFIG:-none}, out $VA_OUT, launcher $mode"
}

# va_resume_args: sets VA_RESUME to (--resume NEWEST) when a checkpoint *.ckpt.h5 exists in VA_OUT,
# else to nothing: a first run never gets --resume. compress writes its checkpoint to OUT.ckpt.h5
# (VA_OUT/index.h5.ckpt.h5; a requeued job keeps its id, so its folder) when SIGUSR1/SIGTERM
# stop it (via OUT.ckpt.h5.partial and a rename, so a *.ckpt.h5 is whole), and removes it when it
# completes. A config's `checkpoint` key pointing elsewhere is not seen.
va_resume_args() {
  VA_RESUME=()
  local ckpt
  ckpt=$(ls -t "$VA_OUT"/*.ckpt.h5 2>/dev/null | head -n 1)
  [ -n "$ckpt" ] && VA_RESUME=(--resume "$ckpt") && va_log "resuming from $ckpt"
  return 0
}

# va_step NTASKS ARGS...: launches 'vecanneal ARGS' on NTASKS ranks in the background, so that this
# shell can take signals while it runs, and returns its exit status.
#   USR1 (#SBATCH --signal=B:USR1@T goes to this shell only) is forwarded to the launcher, which
#        forwards it to every rank: vecanneal checkpoints at the end of its iteration (or, before
#        its first, stops) and exits 75.
#   TERM (scancel, time limit, preemption) already reaches every process of the job from Slurm;
#        the trap only keeps this shell alive to see the exit code, and notes (VA_TERM=1) that
#        the job is being ended, so that va_finish does not requeue it.
# With VA_HOLD_USR1=1 (a step that cannot checkpoint) USR1 is only noted in VA_USR1=1.
VA_TERM=0 VA_USR1=0
va_step() {
  local n=$1; shift
  "${VA_LAUNCH[@]}" -n "$n" "$VA_BIN" "$@" &
  local child=$! rc
  trap 'VA_USR1=1; if [ "${VA_HOLD_USR1:-0}" = 1 ]; then va_log "USR1: noted (this step cannot checkpoint)";
        else va_log "USR1: forwarding to the job step"; kill -USR1 '"$child"' 2>/dev/null; fi' USR1
  trap 'va_log "TERM: the job is being ended; waiting for the job step"; VA_TERM=1' TERM
  while :; do
    wait "$child"; rc=$?
    kill -0 "$child" 2>/dev/null || break   # ended; else wait was cut short by a trap
  done
  wait "$child"; rc=$?                      # its real status (bash keeps it)
  trap - USR1 TERM
  return $rc
}

# va_finish RC: exit 75 from vecanneal means "stopped by a signal, requeue me": with a checkpoint
# when the job had iterated, without one when it stopped during its read or initialisation (the
# next run then starts afresh). Requeueing keeps the job id, so the next run finds the checkpoint,
# if any, in VA_OUT. Slurm kills this script as it
# requeues; it exits RC otherwise. Not after a SIGTERM to this shell: scancel must cancel (the
# checkpoint stays, for a manual --resume), and Slurm's own PreemptMode=REQUEUE handles preemption.
va_finish() {
  local rc=$1
  if [ "$rc" = 75 ] && [ "$VA_TERM" = 1 ]; then
    va_log "exit 75 after SIGTERM: job cancelled or at its limit, not requeued; checkpoint kept in $VA_OUT"
  elif [ "$rc" = 75 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    va_log "exit 75: stopped by the signal (checkpoint written if it had iterated), requeueing job $SLURM_JOB_ID"
    scontrol requeue "$SLURM_JOB_ID" && exit 0
    va_log "scontrol requeue failed (job not requeueable, or being cancelled)"
  fi
  [ "$rc" = 0 ] || va_log "vecanneal exited $rc"
  exit "$rc"
}
