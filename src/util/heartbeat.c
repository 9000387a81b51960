/* heartbeat.c: the rank-0 helper thread of heartbeat.h. It sleeps in steps of a quarter of a second
 * so that stopping it never waits long. */
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
  const struct timespec step = {0, 250000000L};
  int told = 0; /* heartbeat lines since the last progress line */
  while (!stopping) {
    nanosleep(&step, NULL);
    double quiet = va_log_quiet_seconds();
    if (quiet < va_progress_seconds()) told = 0;
    else if (!stopping && quiet >= va_progress_seconds() * (told + 1)) {
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
