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
  const long step_ns = threshold < 1.0 ? (long)(threshold * 0.25e9) + 1000000L : 250000000L;
  const struct timespec step = {0, step_ns};
  int told = 0;      /* heartbeat lines since the last progress line */
  double seen = 0.0; /* when the last progress line seen was printed */
  while (!stopping) {
    nanosleep(&step, NULL);
    double line_at = 0.0;
    const double quiet = va_log_quiet_seconds(&line_at);
    if (line_at != seen) { /* a progress line since the last look (heartbeat lines are asides: not counted) */
      seen = line_at;
      told = 0;
    }
    if (line_at > 0 && !stopping && quiet >= threshold * (told + 1)) {
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
