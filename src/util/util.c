/* util.c: process context, checked-call failure paths, collective error agreement, logging. */
#define _GNU_SOURCE
#include "util/util.h"

#include <errno.h>   /* errno */
#include <hdf5.h>    /* H5Ewalk2, H5Eset_auto2 */
#include <libgen.h>  /* dirname */
#include <pthread.h> /* pthread_mutex_t */
#include <sched.h>   /* sched_getaffinity */
#include <signal.h>  /* sig_atomic_t */
#include <stdarg.h>
#include <stdatomic.h> /* atomic_int: set from the thread that picks a device */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h> /* getrusage */
#include <time.h>         /* clock_gettime */
#include <sys/statvfs.h>  /* statvfs */
#include <unistd.h>       /* unlink, gethostname */

va_proc_t va_proc = {.rank = 0, .nranks = 1, .local_rank = 0, .local_nranks = 1, .host = "?"};

/* Pending temporary files: fixed slots, so that a signal handler may walk them. */
#define PENDING_SLOTS 8
static char pending[PENDING_SLOTS][4096];
static volatile sig_atomic_t pending_used[PENDING_SLOTS], pending_claim[PENDING_SLOTS];

static int command_argc;
static char **command_argv;

void va_proc_set_command_line(int argc, char **argv) {
  command_argv = va_malloc((size_t)(argc > 0 ? argc : 1) * sizeof *command_argv, "the command line");
  for (int i = 0; i < argc; i++) {
    size_t len = strlen(argv[i]) + 1;
    command_argv[i] = memcpy(va_malloc(len, "the command line"), argv[i], len);
  }
  command_argc = argc;
}

char *const *va_proc_command_line(int *argc) {
  *argc = command_argc;
  return command_argv;
}

void va_proc_init(void) {
  va_proc_init_mpi();
  va_proc_init_hdf5();
}

void va_proc_init_mpi(void) {
  struct timespec now;
  va_proc.start_time = clock_gettime(CLOCK_REALTIME, &now) == 0 ? (double)now.tv_sec + 1e-9 * (double)now.tv_nsec : 0;
  VA_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &va_proc.rank));
  VA_MPI(MPI_Comm_size(MPI_COMM_WORLD, &va_proc.nranks));
  MPI_Comm node;
  VA_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, va_proc.rank, MPI_INFO_NULL, &node));
  VA_MPI(MPI_Comm_rank(node, &va_proc.local_rank));
  VA_MPI(MPI_Comm_size(node, &va_proc.local_nranks));
  VA_MPI(MPI_Comm_free(&node));
  if (gethostname(va_proc.host, sizeof va_proc.host) != 0) strcpy(va_proc.host, "?");
  va_proc.host[sizeof va_proc.host - 1] = 0;
}

/* We report HDF5 errors ourselves (one line, with the innermost message). */
void va_proc_init_hdf5(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

void va_pending_add(const char *path, int claim) {
  for (int i = 0; i < PENDING_SLOTS; i++)
    if (pending_used[i] && !strcmp(pending[i], path)) return;
  for (int i = 0; i < PENDING_SLOTS; i++)
    if (!pending_used[i]) {
      snprintf(pending[i], sizeof pending[i], "%s", path);
      pending_claim[i] = claim;
      pending_used[i] = 1; /* last: a signal handler sees the slot only once it is complete */
      return;
    }
  VA_FATAL("more than %d temporary files at once (%s)", PENDING_SLOTS, path);
}

void va_pending_drop(const char *path) {
  for (int i = 0; i < PENDING_SLOTS; i++)
    if (pending_used[i] && !strcmp(pending[i], path)) pending_used[i] = 0;
}

void va_pending_remove_all(void) {
  for (int i = 0; i < PENDING_SLOTS; i++)
    if (pending_used[i]) {
      unlink(pending[i]);
      pending_used[i] = 0;
    }
}

void va_pending_remove_claims(void) {
  for (int i = 0; i < PENDING_SLOTS; i++)
    if (pending_used[i] && pending_claim[i]) {
      unlink(pending[i]);
      pending_used[i] = 0; /* forgotten: a later exit must not remove another job's new claim */
    }
}

static void remove_pending(void) { va_pending_remove_all(); }

static void (*exit_hook)(int aborting);
void va_set_exit_hook(void (*hook)(int aborting)) { exit_hook = hook; }
static void run_exit_hook(int aborting) {
  void (*hook)(int) = exit_hook;
  exit_hook = NULL; /* once, also when the hook itself fails */
  if (hook) hook(aborting);
}

void va_fatal_at(const char *file, int line, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "vecanneal: fatal: rank %d on %s, %s:%d: %s\n", va_proc.rank, va_proc.host, file, line, msg);
  fflush(stderr);
  remove_pending();
  run_exit_hook(1);
  MPI_Abort(MPI_COMM_WORLD, VA_EXIT_INTERNAL);
  exit(VA_EXIT_INTERNAL);
}

void va_abort_job(int code, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "vecanneal: error: %s (rank %d on %s)\n", msg, va_proc.rank, va_proc.host);
  fflush(stderr);
  remove_pending();
  run_exit_hook(1);
  if (getenv("VECANNEAL_TRACE_EXIT"))
    fprintf(stderr, "vecanneal: rank %d aborts the job with code %d\n", va_proc.rank, code);
  fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, code);
  exit(code);
}

void va_mpi_fail(int err, const char *call, const char *file, int line) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(err, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", err);
  va_fatal_at(file, line, "%s failed: %s", call, s);
}

static herr_t h5_walk_innermost(unsigned n, const H5E_error2_t *e, void *data) {
  /* Walking upward, the first entry is the innermost (most specific) failure. */
  char *out = data;
  if (n == 0) snprintf(out, 512, "%s (in %s)", e->desc ? e->desc : "?", e->func_name ? e->func_name : "?");
  return 0;
}

const char *va_h5_last_error(void) {
  static char buf[512];
  buf[0] = 0;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_walk_innermost, buf);
  if (!buf[0]) snprintf(buf, sizeof buf, "unknown HDF5 error");
  return buf;
}

static struct {
  int code;
  char what[64], path[4096];
} h5_scope;

void va_h5_scope(int code, const char *what, const char *path) {
  h5_scope.code = path ? code : 0;
  snprintf(h5_scope.what, sizeof h5_scope.what, "%s", path ? what : "");
  snprintf(h5_scope.path, sizeof h5_scope.path, "%s", path ? path : "");
}

/* Collects the system's own words from HDF5's stack: the sec2 driver quotes "error message = '...'",
 * the MPI-IO driver the MPI error class. */
static herr_t h5_walk_reason(unsigned n, const H5E_error2_t *e, void *data) {
  char *out = data;
  const char *d = e->desc ? e->desc : "", *q = strstr(d, "error message = '");
  (void)n;
  if (out[0]) return 0;
  if (q) {
    q += strlen("error message = '");
    const char *end = strchr(q, '\'');
    snprintf(out, 256, "%.*s", end ? (int)(end - q) : 200, q);
  } else if (strstr(d, "MPI_ERR_NO_SPACE") || strstr(d, "No space left")) {
    snprintf(out, 256, "%s", strerror(ENOSPC));
  } else if (strstr(d, "MPI_ERR_QUOTA")) {
    snprintf(out, 256, "%s", strerror(EDQUOT));
  }
  return 0;
}

const char *va_write_failure_reason(const char *path) {
  static char reason[512];
  const int saved = errno;
  reason[0] = 0;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_walk_reason, reason);
  if (reason[0]) return reason;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  struct statvfs fs;
  if (statvfs(dirname(dir), &fs) == 0 && (double)fs.f_bavail * (double)fs.f_frsize < 1048576.0) {
    snprintf(reason, sizeof reason, "%s (%.0f bytes free there)", strerror(ENOSPC),
             (double)fs.f_bavail * (double)fs.f_frsize);
    return reason;
  }
  if (saved) snprintf(reason, sizeof reason, "%s", strerror(saved));
  else snprintf(reason, sizeof reason, "%s", va_h5_last_error());
  return reason;
}

void va_h5_write_failure(const char *call, const char *file, int line, char *out, size_t len) {
  snprintf(out, len, "cannot write the %s '%s': %s (%s at %s:%d)", h5_scope.what, h5_scope.path,
           va_write_failure_reason(h5_scope.path), call, file, line);
}

void va_h5_fail(const char *call, const char *file, int line) {
  if (h5_scope.code == VA_EXIT_OUTPUT) {
    char msg[1536];
    va_h5_write_failure(call, file, line, msg, sizeof msg);
    va_abort_job(VA_EXIT_OUTPUT, "%s", msg);
  }
  if (h5_scope.code)
    va_abort_job(h5_scope.code, "cannot read the %s '%s' (damaged or not what it should be): %s (%s at %s:%d)",
                 h5_scope.what, h5_scope.path, va_h5_last_error(), call, file, line);
  va_fatal_at(file, line, "%s failed: %s", call, va_h5_last_error());
}

/* How much more memory an allocation of `bytes` would have needed is unknown; the message names the
 * buffer and its size, and the limits a job can meet. */
static _Noreturn void out_of_memory(double bytes, const char *what) {
  va_abort_job(VA_EXIT_RESOURCE,
               "out of memory: %.0f bytes (%.2f GiB) for %s could not be allocated; the job needs more memory "
               "than this rank may use (physical memory, ulimit -v/-d, or the cgroup limit of a Slurm job): use more "
               "ranks or nodes",
               bytes, bytes / 1073741824.0, what);
}

void *va_malloc(size_t bytes, const char *what) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) out_of_memory((double)bytes, what);
  return p;
}

void va_prefault(void *p, size_t bytes, int threads) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  volatile char *c = p;
  const int64_t pages = (int64_t)((bytes + page - 1) / page);
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(static)
#endif
  for (int64_t i = 0; i < pages; i++) c[(size_t)i * page] = 0;
  (void)threads;
}

void va_copy_rows_padded(float *dst, int64_t ld, const float *src, int64_t d, int64_t nrows, int threads) {
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads > 1 && nrows * d >= (1 << 18) ? threads : 1) schedule(static)
#endif
  for (int64_t i = 0; i < nrows; i++) {
    memcpy(dst + i * ld, src + i * d, (size_t)d * sizeof(float));
    memset(dst + i * ld + d, 0, (size_t)(ld - d) * sizeof(float));
  }
  (void)threads;
}

void *va_calloc(size_t count, size_t size, const char *what) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) out_of_memory((double)count * (double)size, what);
  return p;
}

int va_agree(int code, const char *msg) {
  int worst = 0;
  VA_MPI(MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (!worst) return 0;
  /* The lowest failing rank's message is the one rank 0 prints. */
  int me = code ? va_proc.rank : va_proc.nranks, first = 0;
  VA_MPI(MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  char text[1024] = {0};
  if (va_proc.rank == first) snprintf(text, sizeof text, "%s", msg ? msg : "unspecified error");
  if (first != 0) {
    if (va_proc.rank == first) VA_MPI(MPI_Send(text, (int)sizeof text, MPI_CHAR, 0, 77, MPI_COMM_WORLD));
    if (va_proc.rank == 0)
      VA_MPI(MPI_Recv(text, (int)sizeof text, MPI_CHAR, first, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  }
  if (va_proc.rank == 0) {
    fprintf(stderr, "vecanneal: error: %s\n", text);
    fflush(stderr);
  }
  return worst;
}

static void finalize_all(int code) {
  remove_pending();
  run_exit_hook(0);
  /* Tests check that every rank leaves with the agreed code. */
  if (getenv("VECANNEAL_TRACE_EXIT")) fprintf(stderr, "vecanneal: rank %d exits with code %d\n", va_proc.rank, code);
  fflush(stdout);
  MPI_Finalize();
}

static atomic_int exit_skips_handlers;
void va_exit_skip_handlers(void) { atomic_store(&exit_skips_handlers, 1); }

void va_exit_all(int code) {
  finalize_all(code);
  if (atomic_load(&exit_skips_handlers)) {
    fflush(NULL);
    _exit(code);
  }
  exit(code);
}

void va_exit_all_at_start(int code) {
  va_exit_skip_handlers();
  va_exit_all(code);
}

/* Rank 0's lines come from the main thread and the heartbeat thread (heartbeat.h): one at a time. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static double log_last; /* monotonic seconds of the last line; 0 before the first */

static double monotonic_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void log_line(int counts, const char *fmt, va_list ap) {
  pthread_mutex_lock(&log_lock);
  vprintf(fmt, ap);
  fflush(stdout);
  if (counts) log_last = monotonic_seconds();
  pthread_mutex_unlock(&log_lock);
}

void va_log0(const char *fmt, ...) {
  if (va_proc.rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  log_line(1, fmt, ap);
  va_end(ap);
}

void va_log0_aside(const char *fmt, ...) {
  if (va_proc.rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  log_line(0, fmt, ap);
  va_end(ap);
}

double va_progress_seconds(void) {
  static double seconds = 0;
  if (seconds <= 0) {
    const char *env = getenv("VECANNEAL_PROGRESS_SECONDS");
    char *end = NULL;
    double v = env ? strtod(env, &end) : 0;
    seconds = env && end != env && v > 0 ? v : 5.0;
  }
  return seconds;
}

double va_log_quiet_seconds(double *line_at) {
  pthread_mutex_lock(&log_lock);
  double last = log_last;
  pthread_mutex_unlock(&log_lock);
  if (line_at) *line_at = last;
  return last > 0 ? monotonic_seconds() - last : 0;
}

double va_now(void) { return MPI_Wtime(); }

size_t va_peak_rss(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (size_t)ru.ru_maxrss * 1024u; /* Linux reports KiB */
}

int va_cpu_count(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}
