/* heartbeat.c: the rank-0 helper thread of heartbeat.h. It looks in steps of a quarter of a second, or
 * of a quarter of the quiet threshold when that is shorter, so that a line comes within a step of being
 * due; it waits on a condition variable, so that stopping it wakes it at once (a job's exit joins it). */
#define _POSIX_C_SOURCE 200809L
#include "util/heartbeat.h"

#include <pthread.h>
#include <time.h>

#include "util/util.h" /* va_proc, va_log0_aside, va_log_quiet_seconds, va_progress_seconds */

static pthread_t thread;
static int running;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake; /* on CLOCK_MONOTONIC; signalled by va_heartbeat_stop */
static int stopping;        /* under lock */

/* Waits one step or until stopped; returns whether to go on. Called and returns with lock held. */
static int wait_step(double step_s) {
  struct timespec due;
  clock_gettime(CLOCK_MONOTONIC, &due);
  long ns = due.tv_nsec + (long)(step_s * 1e9) + 1000000L; /* 1 ms more: never a zero wait */
  due.tv_sec += ns / 1000000000L;
  due.tv_nsec = ns % 1000000000L;
  int rc = 0; /* 0: woken, by the stop or spuriously (then wait on); else the time has come */
  while (!stopping && rc == 0) rc = pthread_cond_timedwait(&wake, &lock, &due);
  return !stopping;
}

static void *heartbeat_main(void *arg) {
  (void)arg;
  const double threshold = va_progress_seconds();
  const double step_s = threshold / 4 < 0.25 ? threshold / 4 : 0.25;
  /* heartbeat lines since the last progress line, and when that line was printed */
  int told = 0;
  double seen = 0.0;
  pthread_mutex_lock(&lock);
  while (wait_step(step_s)) {
    pthread_mutex_unlock(&lock);
    double line_at = 0.0;
    const double quiet = va_log_quiet_seconds(&line_at);
    if (line_at != seen) { /* a progress line since the last look (heartbeat lines are asides: not counted) */
      seen = line_at;
      told = 0;
    }
    if (quiet >= threshold * (told + 1)) { /* quiet is 0 before the first line */
      va_log0_aside("  (still working: %.*f s since the line above)\n", quiet < 10 ? 1 : 0, quiet);
      told++;
    }
    pthread_mutex_lock(&lock);
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

void va_heartbeat_start(void) {
  if (va_proc.rank != 0 || running) return;
  (void)va_progress_seconds(); /* read the environment here, before the thread does */
  pthread_condattr_t attr;
  if (pthread_condattr_init(&attr) != 0) return; /* none to be had: no heartbeat */
  int ok = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&wake, &attr) == 0;
  pthread_condattr_destroy(&attr);
  if (!ok) return;
  stopping = 0;
  running = pthread_create(&thread, NULL, heartbeat_main, NULL) == 0;
  if (!running) pthread_cond_destroy(&wake);
}

void va_heartbeat_stop(void) {
  if (!running) return;
  pthread_mutex_lock(&lock);
  stopping = 1;
  pthread_cond_signal(&wake);
  pthread_mutex_unlock(&lock);
  pthread_join(thread, NULL);
  pthread_cond_destroy(&wake);
  running = 0;
}
