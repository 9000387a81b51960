/* fuzz_common.h: shared helpers of the libFuzzer harnesses (tests/fuzz/fuzz_*.c).
 * The code under test reads files by path, so each harness keeps one private temporary file per
 * process (created once, rewritten for every input) and passes its path. */
#ifndef VECANNEAL_FUZZ_COMMON_H
#define VECANNEAL_FUZZ_COMMON_H
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

/* Creates (once) the temporary file $TMPDIR/vecanneal-fuzz-<pid><suffix> (TMPDIR default /tmp) and
 * returns its path. It is removed at a normal exit; a finding aborts the process without running atexit
 * handlers, so files of processes that no longer exist are removed here, when the next one starts.
 * (A /proc/self/fd/N path to an unlinked file would leave nothing behind, but HDF5 resolves the real
 * path of what it opens and rejects it.) */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
static char fz_path_[4096];
static int fz_fd_ = -1;
static void fz_cleanup_(void) {
  if (fz_path_[0]) unlink(fz_path_);
}
__attribute__((unused)) static const char *fz_temp_path(const char *suffix) {
  if (fz_fd_ >= 0) return fz_path_;
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    int pid;
    if (sscanf(e->d_name, "vecanneal-fuzz-%d", &pid) == 1 && pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
      char stale[4096];
      snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name);
      unlink(stale);
    }
  }
  if (d) closedir(d);
  snprintf(fz_path_, sizeof fz_path_, "%s/vecanneal-fuzz-%d%s", dir, (int)getpid(), suffix);
  fz_fd_ = open(fz_path_, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fz_fd_ < 0) {
    perror(fz_path_);
    abort();
  }
  atexit(fz_cleanup_);
  return fz_path_;
}

/* Replaces the temporary file's content with data[0..size). */
__attribute__((unused)) static void fz_write(const uint8_t *data, size_t size) {
  if (ftruncate(fz_fd_, 0) != 0) {
    perror("fuzz: ftruncate");
    abort();
  }
  size_t done = 0;
  while (done < size) {
    ssize_t w = pwrite(fz_fd_, data + done, size - done, (off_t)done);
    if (w <= 0) {
      perror("fuzz: pwrite");
      abort();
    }
    done += (size_t)w;
  }
}

/* A harness-detected violation of the code's own contract: print and abort (libFuzzer saves the input). */
#define FZ_CHECK(cond, ...)                                                                                            \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      fprintf(stderr, "fuzz invariant failed: %s: ", #cond);                                                           \
      fprintf(stderr, __VA_ARGS__);                                                                                    \
      fputc('\n', stderr);                                                                                             \
      abort();                                                                                                         \
    }                                                                                                                  \
  } while (0)
#endif
