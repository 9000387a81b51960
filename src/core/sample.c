/* sample.c: evenly spread samples of the rows (core/sample.h). Products i n are taken in
 * 128 bits: both factors reach 2^33 and more at a billion rows. */
#include "core/sample.h"

#include <string.h>

typedef unsigned __int128 u128;

int64_t va_sample_row(int64_t n, int64_t N, int64_t i) { return (int64_t)((u128)i * (u128)n / (u128)N); }

/* The first sample row whose source row is >= r: ceil(r N / n). */
static int64_t first_at_or_after(int64_t n, int64_t N, int64_t r) {
  return (int64_t)(((u128)r * (u128)N + (u128)n - 1) / (u128)n);
}

void va_sample_range(int64_t n, int64_t N, int64_t row0, int64_t count, int64_t *s0, int64_t *scount) {
  *s0 = first_at_or_after(n, N, row0);
  *scount = first_at_or_after(n, N, row0 + count) - *s0;
}

void va_sample_gather(float *out, const float *X, int64_t d, int64_t n, int64_t N, int64_t row0, int64_t s0,
                      int64_t scount) {
  for (int64_t q = 0; q < scount; q++)
    memcpy(out + q * d, X + (va_sample_row(n, N, s0 + q) - row0) * d, (size_t)d * sizeof(float));
}
