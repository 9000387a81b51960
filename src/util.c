/* util.c: process context, checked-call failure paths, collective error agreement, logging. */
#define _GNU_SOURCE
#include "util.h"

#include <hdf5.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

va_proc_t va_proc = {0, 1, 0, 1, "?"};
static char pending_output[4096];

void va_proc_init(void) {
  VA_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &va_proc.rank));
  VA_MPI(MPI_Comm_size(MPI_COMM_WORLD, &va_proc.nranks));
  MPI_Comm node;
  VA_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, va_proc.rank, MPI_INFO_NULL, &node));
  VA_MPI(MPI_Comm_rank(node, &va_proc.local_rank));
  VA_MPI(MPI_Comm_size(node, &va_proc.local_nranks));
  VA_MPI(MPI_Comm_free(&node));
  if (gethostname(va_proc.host, sizeof va_proc.host) != 0) strcpy(va_proc.host, "?");
  va_proc.host[sizeof va_proc.host - 1] = 0;
  /* We report HDF5 errors ourselves (one line, with the innermost message). */
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void va_set_pending_output(const char *path) {
  if (!path) pending_output[0] = 0;
  else snprintf(pending_output, sizeof pending_output, "%s", path);
}

static void remove_pending(void) {
  if (pending_output[0]) { unlink(pending_output); pending_output[0] = 0; }
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
  MPI_Abort(MPI_COMM_WORLD, VA_EXIT_INTERNAL);
  exit(VA_EXIT_INTERNAL);
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

void va_h5_fail(const char *call, const char *file, int line) {
  va_fatal_at(file, line, "%s failed: %s", call, va_h5_last_error());
}

void *va_malloc(size_t bytes, const char *what) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) VA_FATAL("out of memory allocating %zu bytes for %s", bytes, what);
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
  if (!p) VA_FATAL("out of memory allocating %zu x %zu bytes for %s", count, size, what);
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
    if (va_proc.rank == 0) VA_MPI(MPI_Recv(text, (int)sizeof text, MPI_CHAR, first, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  }
  if (va_proc.rank == 0) {
    fprintf(stderr, "vecanneal: error: %s\n", text);
    fflush(stderr);
  }
  return worst;
}

void va_exit_all(int code) {
  remove_pending();
  /* Tests check that every rank leaves with the agreed code. */
  if (getenv("VECANNEAL_TRACE_EXIT")) fprintf(stderr, "vecanneal: rank %d exits with code %d\n", va_proc.rank, code);
  fflush(stdout);
  MPI_Finalize();
  exit(code);
}

void va_log0(const char *fmt, ...) {
  if (va_proc.rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
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
