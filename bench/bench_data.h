/* bench_data.h: the clustered test data of the GPU benchmarks (gpu_kernels.c, gpu_stream.c), so that
 * both measure the same rows and anchors: 256 centres uniform in [-1,1]^d, each row a random centre
 * plus the sum of two uniform(-0.15, 0.15) draws per coordinate, each anchor a random row plus
 * uniform(-0.02, 0.02) noise (anchors near rows, as after a few iterations). A fixed xorshift64 stream:
 * the same data on every run. */
#ifndef VECANNEAL_BENCH_DATA_H
#define VECANNEAL_BENCH_DATA_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t bench_rng = 0x2545F4914F6CDD1Dull;
static inline uint64_t bench_xs(void) {
  bench_rng ^= bench_rng << 13;
  bench_rng ^= bench_rng >> 7;
  bench_rng ^= bench_rng << 17;
  return bench_rng;
}
static inline float bench_u11(void) { return (float)((double)(bench_xs() >> 11) * (2.0 / 9007199254740992.0) - 1.0); }

/* Rows X (n x d) and anchors A (k x d), malloc'ed; the caller frees both. */
static inline void bench_clustered_data(int64_t n, int64_t d, int64_t k, float **Xp, float **Ap) {
  const int64_t nc = 256;
  float *C = malloc((size_t)(nc * d) * 4), *X = malloc((size_t)(n * d) * 4), *A = malloc((size_t)(k * d) * 4);
  if (!C || !X || !A) {
    fprintf(stderr, "out of memory for the benchmark data\n");
    exit(1);
  }
  for (int64_t e = 0; e < nc * d; e++) C[e] = bench_u11();
  for (int64_t i = 0; i < n; i++) {
    const float *c = C + (int64_t)(bench_xs() % (uint64_t)nc) * d;
    for (int64_t t = 0; t < d; t++) X[i * d + t] = c[t] + 0.15f * (bench_u11() + bench_u11());
  }
  for (int64_t j = 0; j < k; j++) {
    int64_t i = (int64_t)(bench_xs() % (uint64_t)n);
    for (int64_t t = 0; t < d; t++) A[j * d + t] = X[i * d + t] + 0.02f * bench_u11();
  }
  free(C);
  *Xp = X;
  *Ap = A;
}
#endif
