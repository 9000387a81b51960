/* util.h: process-wide context (rank, host), exit codes, checked-call macros and rank-0 logging.
 * Every library call goes through a VA_* macro so that a failure names rank, host, file:line and the
 * library's own message, and then ends every rank (MPI_Abort) instead of leaving the others hanging.
 * Expected failures (bad input, bad config) go through va_agree(): all ranks agree on one error code,
 * rank 0 prints one message, and every rank exits with that code. */
#ifndef VECANNEAL_UTIL_H
#define VECANNEAL_UTIL_H
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/format.h" /* va_format_double, va_format_seconds */

/* Exit codes (documented in README.md). */
enum {
  VA_EXIT_OK = 0,
  VA_EXIT_INTERNAL = 1, /* a library call failed or an invariant broke: MPI_Abort */
  VA_EXIT_USAGE = 2,    /* bad command line or configuration */
  VA_EXIT_INPUT = 3,    /* input file/dataset missing, malformed or holding bad values */
  VA_EXIT_OUTPUT = 4,   /* the output cannot be written */
  VA_EXIT_RESOURCE = 5, /* not enough memory for the requested job */
  VA_EXIT_STOPPED =
      75, /* stopped by SIGTERM/SIGUSR1: run again (with --resume when a checkpoint was written) (EX_TEMPFAIL) */
};

typedef struct {
  int rank, nranks;
  int local_rank, local_nranks; /* within the node (MPI_COMM_TYPE_SHARED) */
  char host[64];
  double start_time; /* seconds since the epoch (UTC) when the process started its command */
} va_proc_t;
extern va_proc_t va_proc;

/* va_proc from MPI (rank, size, node rank) and the host name, then HDF5's automatic error printing off (we
 * report HDF5 errors ourselves). vecanneal's main() runs the two halves apart, with its start-up room check
 * between them: HDF5's first call allocates, and HDF5 can crash when that fails. */
void va_proc_init(void);
void va_proc_init_mpi(void);
void va_proc_init_hdf5(void);
/* The process's command line, kept for the metrics files (cli/main.c hands it over once). */
void va_proc_set_command_line(int argc, char **argv);
char *const *va_proc_command_line(int *argc);

/* Fatal, unexpected failure on this rank: print and MPI_Abort the whole job. */
_Noreturn void va_fatal_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define VA_FATAL(...) va_fatal_at(__FILE__, __LINE__, __VA_ARGS__)
/* An expected failure (output not writable, input damaged, memory exhausted) found by one rank at a
 * point where its peers may already wait inside a collective, so that no agreement is possible: prints
 * the message (with rank and host), removes the job's temporary files and ends every rank through
 * MPI_Abort with `code`, which mpirun and srun return as the job's exit status. */
_Noreturn void va_abort_job(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void va_mpi_fail(int err, const char *call, const char *file, int line);
#define VA_MPI(call)                                                                                                   \
  do {                                                                                                                 \
    int va_e_ = (call);                                                                                                \
    if (va_e_ != MPI_SUCCESS) va_mpi_fail(va_e_, #call, __FILE__, __LINE__);                                           \
  } while (0)

/* HDF5: the error stack's innermost message is quoted. Use for herr_t and hid_t results. A failure
 * inside an I/O scope (va_h5_scope) ends the job with the scope's exit code and names its file (for an
 * output, with the system's reason, "No space left on device"); elsewhere it is an internal failure. */
void va_h5_fail(const char *call, const char *file, int line);
/* Opens (path non-NULL) or closes (NULL) the I/O scope of VA_H5 failures: code VA_EXIT_INPUT for a file
 * read, VA_EXIT_OUTPUT for one written; what names the file's role ("index", "checkpoint"). */
void va_h5_scope(int code, const char *what, const char *path);
/* The message of a failed write in the open output scope ("cannot write the index 'F': reason (call at
 * file:line)"), into out: what va_h5_fail prints there, for a failure that is agreed before the job ends. */
void va_h5_write_failure(const char *call, const char *file, int line, char *out, size_t len);
/* The operating system's reason for the failed write of path: the errno quoted in HDF5's error stack,
 * else errno, else "No space left on device" when the file system holding path is full. */
const char *va_write_failure_reason(const char *path);
#define VA_H5(call)                                                                                                    \
  ({                                                                                                                   \
    __typeof__(call) va_r_ = (call);                                                                                   \
    if (va_r_ < 0) va_h5_fail(#call, __FILE__, __LINE__);                                                              \
    va_r_;                                                                                                             \
  })
/* The innermost HDF5 error message of the current stack, for user-facing messages. */
const char *va_h5_last_error(void);

/* Allocation failures end the job with VA_EXIT_RESOURCE (5), naming the buffer and its size. */
void *va_malloc(size_t bytes, const char *what);
void *va_calloc(size_t count, size_t size, const char *what);
/* Touches one byte per page of fresh memory from `threads` threads. A single thread filling a large
 * buffer spends most of its time in the kernel's page faults (zeroing each page), one at a time;
 * faults on different pages run in parallel, so taking them all first on every thread leaves the
 * filling a plain copy. */
void va_prefault(void *p, size_t bytes, int threads);
/* nrows rows of d floats into rows ld floats apart (ld >= d), the padding zeroed, on up to `threads`
 * threads. */
void va_copy_rows_padded(float *dst, int64_t ld, const float *src, int64_t d, int64_t nrows, int threads);

/* Collective: every rank passes its own status (0 = fine). Returns the largest code. When non-zero,
 * rank 0 prints the message of the lowest failing rank, once. */
int va_agree(int code, const char *msg);
/* The communication layer's clean-up before any exit: aborting 1 from a fatal or aborted exit (one
 * rank, local: NCCL communicators aborted, so that peers are released), 0 from a collective exit
 * (every rank: communicators finalized). Called once. */
void va_set_exit_hook(void (*hook)(int aborting));
/* Collective exit: finalize MPI and exit with code on every rank (removes the pending temporary file). */
_Noreturn void va_exit_all(int code);
/* From now on va_exit_all leaves with _exit after MPI_Finalize, stdio flushed, without the libraries' exit
 * handlers. Called once the process has picked a CUDA device: the handlers of the CUDA runtime and cuBLAS
 * then take a few hundredths of a second to undo what the device's release at the process's end undoes
 * anyway (docs/performance.md). Every file vecanneal writes is closed before va_exit_all. */
void va_exit_skip_handlers(void);
/* va_exit_all for a start-up check that finds the address space nearly used up, before anything is open:
 * it leaves with _exit, without the libraries' exit handlers. There OpenBLAS's worker threads, started
 * when the library loads, retry the mapping of their buffers forever, and its exit handler waits for
 * them: exit() would hang. */
_Noreturn void va_exit_all_at_start(int code);
/* Shorthand: agree, and if anyone failed, exit everywhere. */
#define VA_AGREE_OR_EXIT(code, msg)                                                                                    \
  do {                                                                                                                 \
    int va_c_ = va_agree((code), (msg));                                                                               \
    if (va_c_) va_exit_all(va_c_);                                                                                     \
  } while (0)

/* Temporary files (a claimed or half-written output) removed by any exit that does not complete them:
 * fatal, aborted or collective. claim: an output's claim (files.h), which a stop signal also removes
 * at once (va_pending_remove_claims), since a rank may be killed before it reaches a stop point.
 * va_pending_drop forgets a file once it has its final name. */
void va_pending_add(const char *path, int claim);
void va_pending_drop(const char *path);
/* Removes every pending file now. */
void va_pending_remove_all(void);
/* Removes the pending claims now (async-signal-safe: unlink only). */
void va_pending_remove_claims(void);

/* Rank-0 logging to stdout, flushed. */
void va_log0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* va_log0 for a line that is not progress (the heartbeat's): va_log_quiet_seconds goes on counting. */
void va_log0_aside(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Seconds since rank 0 last printed a line with va_log0 (0 before its first); *line_at (if not NULL):
 * when that line was printed, a value that changes with every such line (0 before the first). */
double va_log_quiet_seconds(double *line_at);
double va_now(void);
/* Rank 0 prints progress at least this often during a stage that runs longer (no quiet stretches):
 * 5 s, or $VECANNEAL_PROGRESS_SECONDS (a positive number; the tests use a short one). */
double va_progress_seconds(void);
/* Peak resident set size of this process in bytes. */
size_t va_peak_rss(void);
/* Number of CPU cores this process may run on. */
int va_cpu_count(void);
#endif
