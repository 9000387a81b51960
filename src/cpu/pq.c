/* pq.c: the CPU kernels of residual product quantization (cpu/pq.h). The encoder holds each subspace's
 * codebook transposed (width x ksub) so that the innermost loop runs over the centroids, one float32
 * distance per lane: every lane adds its squared differences in column order, so the AVX2 body and the
 * portable one give the same bits (no FMA: the products are rounded before the sums, as without it). */
#include "cpu/pq.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h" /* va_malloc */

void va_pq_subspace(int64_t d, int64_t M, int64_t m, int64_t *col0, int64_t *width) {
  const int64_t base = d / M, longer = d % M;
  *width = base + (m < longer);
  *col0 = m * base + (m < longer ? m : longer);
}

int64_t va_pq_dsub_max(int64_t d, int64_t M) { return (d + M - 1) / M; }

/* The squared error of a residual's columns against one centroid, in double, columns in order: the
 * value both encoders report for the code they chose. */
static double centroid_error(const float *x, const float *c, int64_t width) {
  double s = 0;
  for (int64_t t = 0; t < width; t++) {
    double e = (double)x[t] - (double)c[t];
    s += e * e;
  }
  return s;
}

/* Rows [i0, i1) of R: codes and errors. T holds every subspace's codebook transposed: subspace m's at
 * T + col0(m) ksub, column t of it (the t-th value of every centroid) at + t ksub. */
static inline __attribute__((always_inline)) void encode_rows_body(const float *R, int64_t i0, int64_t i1, int64_t d,
                                                                   int64_t M, int64_t ksub, const float *codebooks,
                                                                   const float *T, uint8_t *codes, double *err) {
  float dist[256];
  const int64_t dmax = va_pq_dsub_max(d, M);
  for (int64_t i = i0; i < i1; i++) {
    const float *x = R + i * d;
    double row_err = 0;
    for (int64_t m = 0; m < M; m++) {
      int64_t col0, width;
      va_pq_subspace(d, M, m, &col0, &width);
      const float *Tm = T + col0 * ksub;
      for (int64_t j = 0; j < ksub; j++) dist[j] = 0.0f;
      for (int64_t t = 0; t < width; t++) {
        const float xt = x[col0 + t];
        const float *col = Tm + t * ksub;
        for (int64_t j = 0; j < ksub; j++) {
          const float e = xt - col[j];
          const float e2 = e * e;
          dist[j] = dist[j] + e2;
        }
      }
      int64_t best = 0;
      for (int64_t j = 1; j < ksub; j++)
        if (dist[j] < dist[best]) best = j;
      codes[i * M + m] = (uint8_t)best;
      if (err) row_err += centroid_error(x + col0, codebooks + (m * ksub + best) * dmax, width);
    }
    if (err) err[i] = row_err;
  }
}

__attribute__((target("avx2"))) static void encode_rows_avx2(const float *R, int64_t i0, int64_t i1, int64_t d,
                                                             int64_t M, int64_t ksub, const float *codebooks,
                                                             const float *T, uint8_t *codes, double *err) {
  encode_rows_body(R, i0, i1, d, M, ksub, codebooks, T, codes, err);
}

static void encode_rows_portable(const float *R, int64_t i0, int64_t i1, int64_t d, int64_t M, int64_t ksub,
                                 const float *codebooks, const float *T, uint8_t *codes, double *err) {
  encode_rows_body(R, i0, i1, d, M, ksub, codebooks, T, codes, err);
}

typedef void (*encode_rows_fn)(const float *, int64_t, int64_t, int64_t, int64_t, int64_t, const float *, const float *,
                               uint8_t *, double *);

static encode_rows_fn pick_encoder(void) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) return encode_rows_avx2;
#endif
  return encode_rows_portable;
}

float *va_pq_transpose(const float *codebooks, int64_t d, int64_t M, int64_t ksub) {
  const int64_t dmax = va_pq_dsub_max(d, M);
  float *T = va_malloc((size_t)(d * ksub) * sizeof(float), "pq transposed codebooks");
  for (int64_t m = 0; m < M; m++) {
    int64_t col0, width;
    va_pq_subspace(d, M, m, &col0, &width);
    for (int64_t t = 0; t < width; t++)
      for (int64_t j = 0; j < ksub; j++) T[(col0 + t) * ksub + j] = codebooks[(m * ksub + j) * dmax + t];
  }
  return T;
}

void va_pq_encode(const float *R, int64_t n, int64_t d, int64_t M, int64_t ksub, const float *codebooks, int threads,
                  uint8_t *codes, double *err) {
  float *T = va_pq_transpose(codebooks, d, M, ksub);
  const encode_rows_fn encode_rows = pick_encoder();
  const int64_t block = 256, nblocks = (n + block - 1) / block;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(dynamic, 4)
#else
  (void)threads;
#endif
  for (int64_t b = 0; b < nblocks; b++) {
    const int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
    encode_rows(R, i0, i1, d, M, ksub, codebooks, T, codes, err);
  }
  free(T);
}

void va_pq_encode_ref(const float *R, int64_t n, int64_t d, int64_t M, int64_t ksub, const float *codebooks,
                      uint8_t *codes, double *err) {
  const int64_t dmax = va_pq_dsub_max(d, M);
  for (int64_t i = 0; i < n; i++) {
    double row_err = 0;
    for (int64_t m = 0; m < M; m++) {
      int64_t col0, width;
      va_pq_subspace(d, M, m, &col0, &width);
      int64_t best = 0;
      double best_s = 0;
      for (int64_t j = 0; j < ksub; j++) {
        const double s = centroid_error(R + i * d + col0, codebooks + (m * ksub + j) * dmax, width);
        if (j == 0 || s < best_s) {
          best = j;
          best_s = s;
        }
      }
      codes[i * M + m] = (uint8_t)best;
      row_err += best_s;
    }
    if (err) err[i] = row_err;
  }
}

void va_pq_decode(const uint8_t *code, int64_t d, int64_t M, int64_t ksub, const float *codebooks, float *out) {
  const int64_t dmax = va_pq_dsub_max(d, M);
  for (int64_t m = 0; m < M; m++) {
    int64_t col0, width;
    va_pq_subspace(d, M, m, &col0, &width);
    memcpy(out + col0, codebooks + (m * ksub + code[m]) * dmax, (size_t)width * sizeof(float));
  }
}
