/* fixture.h: shared helpers of the embed tests: locating the model (with the "run scripts/fetch-model"
 * message when it is absent), reading gzip'd or plain fixture files whole, splitting lines, the
 * reference embeddings (embed_ref.f32) and the cosine the tolerances are stated in. */
#ifndef VECANNEAL_TESTS_EMBED_FIXTURE_H
#define VECANNEAL_TESTS_EMBED_FIXTURE_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

/* Whole file (gunzipped when it is gzip), NUL-terminated; exits with a message on failure. */
static inline char *fx_read(const char *path, size_t *len) {
  gzFile g = gzopen(path, "rb");
  if (!g) {
    fprintf(stderr, "FAIL: cannot open fixture %s\n", path);
    exit(1);
  }
  size_t cap = 1 << 20, n = 0;
  char *buf = malloc(cap + 1);
  if (!buf) {
    fprintf(stderr, "FAIL: out of memory reading %s\n", path);
    exit(1);
  }
  for (;;) {
    if (n == cap) {
      char *nb = realloc(buf, 2 * cap + 1);
      if (!nb) {
        fprintf(stderr, "FAIL: out of memory reading %s\n", path);
        exit(1);
      }
      buf = nb;
      cap *= 2;
    }
    int r = gzread(g, buf + n, (unsigned)(cap - n));
    if (r < 0) {
      fprintf(stderr, "FAIL: cannot read fixture %s\n", path);
      exit(1);
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  gzclose(g);
  buf[n] = 0;
  *len = n;
  return buf;
}

/* n little-endian float32 values at p, copied into fresh (aligned) memory. */
static inline float *fx_floats(const char *p, size_t n) {
  float *f = malloc(n * sizeof *f + 1);
  if (!f) {
    fprintf(stderr, "FAIL: out of memory\n");
    exit(1);
  }
  memcpy(f, p, n * sizeof *f);
  return f;
}

/* Splits buf at '\n' (a final '\n' ends the last line); returns the line count, fills starts/lens. */
static inline size_t fx_lines(char *buf, size_t len, char ***starts, size_t **lens) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++) n += buf[i] == '\n';
  if (len && buf[len - 1] != '\n') n++;
  *starts = malloc((n + 1) * sizeof **starts);
  *lens = malloc((n + 1) * sizeof **lens);
  size_t k = 0, s = 0;
  for (size_t i = 0; i <= len && k < n; i++)
    if (i == len || buf[i] == '\n') {
      (*starts)[k] = buf + s;
      (*lens)[k] = i - s;
      k++;
      s = i + 1;
    }
  return n;
}

/* cosine(a, b) in double */
static inline double fx_cosine(const float *a, const float *b, int d) {
  double ab = 0, aa = 0, bb = 0;
  for (int j = 0; j < d; j++) {
    ab += (double)a[j] * b[j];
    aa += (double)a[j] * a[j];
    bb += (double)b[j] * b[j];
  }
  return ab / sqrt(aa * bb + 1e-300);
}

/* The reference embeddings file ("VAEMBF32", rows, dim, then rows x dim little-endian float32): exits
 * with a message unless it holds exactly rows x dim. */
static inline float *fx_reference(const char *path, uint32_t rows, uint32_t dim) {
  size_t len;
  char *buf = fx_read(path, &len);
  uint32_t r, d;
  memcpy(&r, buf + 8, 4);
  memcpy(&d, buf + 12, 4);
  if (len < 16 || memcmp(buf, "VAEMBF32", 8) || r != rows || d != dim || len != 16 + (size_t)r * d * 4) {
    fprintf(stderr, "FAIL: reference embeddings %s do not match the fixture (%u x %u, expected %u x %u)\n", path, r, d,
            rows, dim);
    exit(1);
  }
  float *f = fx_floats(buf + 16, (size_t)r * d);
  free(buf);
  return f;
}

/* The model directory: argv value, or fails with the fetch-model hint when its files are missing. */
static inline void fx_need_model(const char *dir, const char *file) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  if (stat(path, &st) != 0) {
    fprintf(stderr,
            "FAIL: model file %s is missing: run scripts/fetch-model first (it installs "
            "all-MiniLM-L6-v2 under models/)\n",
            path);
    exit(1);
  }
}
#endif
