/* cpu_assign.c: CPU assignment kernels: the plain reference and the tiled sgemm + fused argmin path. */
#include "kernels/assign.h"

#include <cblas.h>
#include <float.h>
#include <stdlib.h>
#ifdef VECANNEAL_OPENMP
#include <omp.h>
#endif

#include "util.h"

/* Eight partial sums over t mod 8, combined in a fixed order: the same value on every rank, thread
 * and call (hence bitwise reproducible results), and no chain of d dependent double additions, which
 * had made this exact recomputation about a seventh of a CPU iteration at d = 128. The compiler
 * vectorises the inner loop without reassociating anything. */
float va_row_distance(const float *x, const float *a, int64_t d, int cosine) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t t = 0;
  if (cosine) {
    for (; t + 8 <= d; t += 8)
      for (int u = 0; u < 8; u++) acc[u] += (double)x[t + u] * (double)a[t + u];
    for (int u = 0; t < d; t++, u++) acc[u] += (double)x[t] * (double)a[t];
  } else {
    for (; t + 8 <= d; t += 8)
      for (int u = 0; u < 8; u++) {
        double diff = (double)x[t + u] - (double)a[t + u];
        acc[u] += diff * diff;
      }
    for (int u = 0; t < d; t++, u++) {
      double diff = (double)x[t] - (double)a[t];
      acc[u] += diff * diff;
    }
  }
  double s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
  if (cosine) {
    s = 1.0 - s;
    return (float)(s > 0 ? s : 0);
  }
  return (float)s;
}

void va_row_norms(const float *M, int64_t m, int64_t d, float *out) {
  for (int64_t i = 0; i < m; i++) {
    double s = 0;
    for (int64_t t = 0; t < d; t++) s += (double)M[i * d + t] * (double)M[i * d + t];
    out[i] = (float)s;
  }
}

void va_assign_ref(const float *X, int64_t n, int64_t d, const float *A, int64_t k, int cosine,
                   uint32_t *assign, float *r) {
  for (int64_t i = 0; i < n; i++) {
    double best = DBL_MAX;
    int64_t bj = 0;
    for (int64_t j = 0; j < k; j++) {
      double s = 0;
      for (int64_t t = 0; t < d; t++) {
        if (cosine) s -= (double)X[i * d + t] * (double)A[j * d + t];
        else { double diff = (double)X[i * d + t] - (double)A[j * d + t]; s += diff * diff; }
      }
      if (s < best) { best = s; bj = j; }
    }
    assign[i] = (uint32_t)bj;
    r[i] = va_row_distance(X + i * d, A + bj * d, d, cosine);
  }
}

void va_blas_threads(int threads) { openblas_set_num_threads(threads > 0 ? threads : 1); }

/* Rows per tile such that the tile's distances (rows x k floats) stay within about 512 KiB of cache. */
static int64_t auto_tile_rows(int64_t k) {
  int64_t rows = (512 * 1024 / 4) / (k > 0 ? k : 1);
  if (rows < 64) rows = 64;
  if (rows > 4096) rows = 4096;
  return rows;
}

static void scan_tile(const float *C, int64_t rows, int64_t k, const float *bias, uint32_t *assign) {
  for (int64_t i = 0; i < rows; i++) {
    const float *c = C + i * k;
    float best = FLT_MAX;
    /* Pass 1 finds the minimum (vectorises); pass 2 its first index, so ties go to the lowest j. */
#ifdef VECANNEAL_OPENMP
#pragma omp simd reduction(min : best)
#endif
    for (int64_t j = 0; j < k; j++) {
      float v = c[j] + bias[j];
      best = v < best ? v : best;
    }
    int64_t bj = 0;
    while (bj < k - 1 && !(c[bj] + bias[bj] == best)) bj++;
    assign[i] = (uint32_t)bj;
  }
}

void va_assign_cpu(const float *X, int64_t n, int64_t d, const float *A, const float *anorm, int64_t k,
                   int cosine, const va_assign_opts_t *opts, uint32_t *assign, float *r) {
  if (n <= 0) return;
  int64_t tile = opts && opts->tile_rows > 0 ? opts->tile_rows : auto_tile_rows(k);
  int64_t ntiles = (n + tile - 1) / tile;
  int threads = opts && opts->threads > 0 ? opts->threads : 1;
  if (threads > ntiles) threads = (int)ntiles;
  float *zero_bias = NULL;
  const float *bias = anorm;
  if (cosine) { zero_bias = va_calloc((size_t)k, sizeof(float), "assign bias"); bias = zero_bias; }
  float *work = va_malloc((size_t)threads * (size_t)(tile * k) * sizeof(float), "assign tile buffers");
  /* l2: argmin ||a||^2 - 2 x.a ; cosine: argmin -x.a. Each tile is one single-threaded sgemm, so the
   * result does not depend on how tiles are spread over threads. */
  const float alpha = cosine ? -1.0f : -2.0f;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
#endif
  for (int64_t t = 0; t < ntiles; t++) {
    int slot = 0;
#ifdef VECANNEAL_OPENMP
    slot = omp_get_thread_num();
#endif
    float *C = work + (size_t)slot * (size_t)(tile * k);
    int64_t r0 = t * tile, rows = n - r0 < tile ? n - r0 : tile;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)k, (int)d, alpha, X + r0 * d, (int)d, A,
                (int)d, 0.0f, C, (int)k);
    scan_tile(C, rows, k, bias, assign + r0);
    for (int64_t i = 0; i < rows; i++) r[r0 + i] = va_row_distance(X + (r0 + i) * d, A + (int64_t)assign[r0 + i] * d, d, cosine);
  }
  free(work);
  free(zero_bias);
}
