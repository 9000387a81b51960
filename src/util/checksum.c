/* checksum.c: the row checksum of checksum.h, on several threads. */
#include "util/checksum.h"

uint64_t va_rows_checksum(const void *rows, size_t row_bytes, int64_t row0, int64_t nrows, int threads) {
  const unsigned char *p = rows;
  uint64_t sum = 0;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads > 1 && nrows * (int64_t)row_bytes >= (1 << 22) ? threads : 1) schedule(static) \
    reduction(+ : sum)
#endif
  for (int64_t i = 0; i < nrows; i++) sum += va_hash_bytes(p + (size_t)i * row_bytes, row_bytes, (uint64_t)(row0 + i));
  (void)threads;
  return sum;
}
