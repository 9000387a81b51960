/* stop.c: the stop-request flag and the collective stop points (see stop.h). */
#define _POSIX_C_SOURCE 200809L /* sigaction, SA_RESTART */
#include "core/stop.h"

#include <signal.h> /* sigaction, raise */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h" /* va_proc, va_exit_all, VA_MPI */

static volatile sig_atomic_t stop_flag, finishing;
/* Records the request. Until the job finishes, the outputs' claims go at once: a rank blocked in a
 * collective whose peer died never reaches a stop point, and the launcher kills it after this signal;
 * a job that stops removes them anyway. The claim that becomes the index while finishing stays. */
static void on_stop(int sig) {
  if (stop_flag) {
    /* A second request before the job acted on the first (a read stuck inside HDF5 never reaches a stop
     * point): the default action, after the temporary files are gone. */
    va_pending_remove_all();
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  stop_flag = 1;
  if (!finishing) va_pending_remove_claims();
}

void va_stop_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART; /* reads and writes in progress go on; the job stops at its next stop point */
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
  /* A write past a file-size limit (ulimit -f) then fails with EFBIG, reported as an output that cannot
   * be written (exit 4), instead of killing the process with a core dump. */
  signal(SIGXFSZ, SIG_IGN);
}

int va_stop_requested(void) {
  static int64_t after = -2, calls;
  if (after == -2) {
    const char *e = getenv("VECANNEAL_FAULT_STOP_AFTER");
    after = e ? atoll(e) : -1;
  }
  if (after >= 0 && calls++ >= after) return 1;
  return stop_flag != 0;
}

void va_stop_fault_point(const char *phase) {
  const char *e = getenv("VECANNEAL_FAULT_SIGNAL_AT");
  if (e && !strcmp(e, phase)) raise(SIGUSR1);
}

static char advice_text[2048] = "nothing was written: run the command again";

void va_stop_advice(const char *advice) { snprintf(advice_text, sizeof advice_text, "%s", advice); }

void va_stop_point(const char *phase) {
  va_stop_fault_point(phase);
  int stop = stop_flag != 0;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (!stop) return;
  va_log0("stopped by a signal during the %s: %s\n", phase, advice_text);
  va_exit_all(VA_EXIT_STOPPED);
}

void va_stop_finishing(void) {
  finishing = 1;
  va_stop_fault_point("finish");
}
