/* heartbeat.c: the rank-0 helper thread of heartbeat.h. It sleeps in steps of a quarter of a second,
 * or of a quarter of the quiet threshold when that is shorter, so that stopping it never waits long
 * and a line comes within a step of being due. */
#define _POSIX_C_SOURCE 200809L
#include "util/heartbeat.h"

#include <pthread.h>
#include <time.h>

#include "util/util.h" /* va_proc, va_log0_aside, va_log_quiet_seconds, va_progress_seconds */

static pthread_t thread;
static int running;
static volatile int stopping;

static void *heartbeat_main(void *arg) {
  (void)arg;
  const double threshold = va_progress_seconds();
  const double step_s = threshold / 4 < 0.25 ? threshold / 4 : 0.25;
  const struct timespec step = {0, (long)(step_s * 1e9) + 1000000L}; /* 1 ms more: never a zero sleep */
  /* heartbeat lines since the last progress line, and when that line was printed */
  int told = 0;
  double seen = 0.0;
  while (!stopping) {
    nanosleep(&step, NULL);
    double line_at = 0.0;
    const double quiet = va_log_quiet_seconds(&line_at);
    if (line_at != seen) { /* a progress line since the last look (heartbeat lines are asides: not counted) */
      seen = line_at;
      told = 0;
    }
    if (!stopping && quiet >= threshold * (told + 1)) { /* quiet is 0 before the first line */
      va_log0_aside("  (still working: %.*f s since the line above)\n", quiet < 10 ? 1 : 0, quiet);
      told++;
    }
  }
  return NULL;
}

void va_heartbeat_start(void) {
  if (va_proc.rank != 0 || running) return;
  (void)va_progress_seconds(); /* read the environment here, before the thread does */
  stopping = 0;
  running = pthread_create(&thread, NULL, heartbeat_main, NULL) == 0; /* none to be had: no heartbeat */
}

void va_heartbeat_stop(void) {
  if (!running) return;
  stopping = 1;
  pthread_join(thread, NULL);
  running = 0;
}
