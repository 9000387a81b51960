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
#include <unistd.h>

/* Creates (once) a temporary file named vecanneal-fuzz-XXXXXX<suffix> under $TMPDIR (or /tmp) and
 * returns its path; the file is removed at exit. */
static char fz_path_[4096];
static int fz_fd_ = -1;
static void fz_cleanup_(void) { if (fz_path_[0]) unlink(fz_path_); }
static const char *fz_temp_path(const char *suffix) {
  if (fz_fd_ >= 0) return fz_path_;
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  snprintf(fz_path_, sizeof fz_path_, "%s/vecanneal-fuzz-XXXXXX%s", dir, suffix);
  fz_fd_ = mkstemps(fz_path_, (int)strlen(suffix));
  if (fz_fd_ < 0) { perror("fuzz: mkstemps"); abort(); }
  atexit(fz_cleanup_);
  return fz_path_;
}

/* Replaces the temporary file's content with data[0..size). */
static void fz_write(const uint8_t *data, size_t size) {
  if (ftruncate(fz_fd_, 0) != 0) { perror("fuzz: ftruncate"); abort(); }
  size_t done = 0;
  while (done < size) {
    ssize_t w = pwrite(fz_fd_, data + done, size - done, (off_t)done);
    if (w <= 0) { perror("fuzz: pwrite"); abort(); }
    done += (size_t)w;
  }
}

/* A harness-detected violation of the code's own contract: print and abort (libFuzzer saves the input). */
#define FZ_CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "fuzz invariant failed: %s: ", #cond); \
  fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } } while (0)
#endif
