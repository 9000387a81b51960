/* stall.c: the stall guard of collective transfers (see stall.h). */
#define _GNU_SOURCE
#include "util/stall.h"

#include <errno.h> /* ENOSPC */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h> /* _exit, sleep */

#include "util/util.h" /* va_proc, va_pending_remove_all */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int started, up, code;
static double last_progress, limit_seconds;
static char message[4200], dir[4096];

/* What the file system holding the file says (without HDF5, which this thread must not call). */
static const char *file_system_note(void) {
  static char note[256];
  struct statvfs fs;
  note[0] = 0;
  if (code == VA_EXIT_OUTPUT && statvfs(dir, &fs) == 0 && (double)fs.f_bavail * (double)fs.f_frsize < 1048576.0)
    snprintf(note, sizeof note, ": %s (%.0f bytes free there)", strerror(ENOSPC),
             (double)fs.f_bavail * (double)fs.f_frsize);
  return note;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *watch(void *arg) {
  (void)arg;
  for (;;) {
    sleep(1);
    pthread_mutex_lock(&lock);
    const int stalled = up && now() - last_progress > limit_seconds;
    pthread_mutex_unlock(&lock);
    if (stalled) {
      fprintf(stderr,
              "vecanneal: error: %s%s; no progress for %.0f s inside a collective transfer (a rank failed inside HDF5) "
              "(rank %d on %s)\n",
              message, file_system_note(), limit_seconds, va_proc.rank, va_proc.host);
      fflush(stderr);
      va_pending_remove_all();
      _exit(code);
    }
  }
  return NULL;
}

void va_stall_guard_begin(int exit_code, const char *what, const char *path) {
  pthread_mutex_lock(&lock);
  if (!started) {
    const char *e = getenv("VECANNEAL_STALL_SECONDS");
    limit_seconds = e && atof(e) > 0 ? atof(e) : 600.0;
    pthread_t t;
    started = pthread_create(&t, NULL, watch, NULL) == 0;
    if (started) pthread_detach(t);
  }
  code = exit_code;
  snprintf(message, sizeof message, "%s the %s '%s'", exit_code == VA_EXIT_INPUT ? "cannot read" : "cannot write", what,
           path);
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == dir) dir[1] = 0;
  else *slash = 0;
  last_progress = now();
  up = 1;
  pthread_mutex_unlock(&lock);
}

void va_stall_guard_progress(void) {
  pthread_mutex_lock(&lock);
  last_progress = now();
  pthread_mutex_unlock(&lock);
}

void va_stall_guard_end(void) {
  pthread_mutex_lock(&lock);
  up = 0;
  pthread_mutex_unlock(&lock);
}
