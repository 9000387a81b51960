/* cpu_assign.c: CPU assignment kernels: the plain reference, the portable path (tiled sgemm, then an
 * argmin scan of each tile's distances) and, on x86-64 CPUs with AVX2 and FMA, a fused kernel that keeps
 * a 6-row x 16-anchor block of dot products in registers (6 x 32 with AVX-512) and folds it straight
 * into a running argmin, so no distance is ever written to memory (like the CUDA fused kernel). */
#include "cpu/assign.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#ifdef VECANNEAL_OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define VA_FUSED_X86 1
#endif

#include "util/util.h"

/* Eight partial sums over t mod 8, combined in a fixed order: the same value on every rank, thread
 * and call (hence bitwise reproducible results), and no chain of d dependent double additions, whose
 * latency would make this exact recomputation a noticeable share of a CPU iteration at d = 128
 * (docs/performance.md). The compiler vectorises the inner loop without reassociating anything. */
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

void va_assign_ref(const float *X, int64_t n, int64_t d, const float *A, int64_t k, int cosine, uint32_t *assign,
                   float *r) {
  for (int64_t i = 0; i < n; i++) {
    double best = DBL_MAX;
    int64_t bj = 0;
    for (int64_t j = 0; j < k; j++) {
      double s = 0;
      for (int64_t t = 0; t < d; t++) {
        if (cosine) s -= (double)X[i * d + t] * (double)A[j * d + t];
        else {
          double diff = (double)X[i * d + t] - (double)A[j * d + t];
          s += diff * diff;
        }
      }
      if (s < best) {
        best = s;
        bj = j;
      }
    }
    assign[i] = (uint32_t)bj;
    r[i] = va_row_distance(X + i * d, A + bj * d, d, cosine);
  }
}

/* The thread-count calls of the BLAS libraries a build may link (BLA_VENDOR): weak, so that whichever the
 * linked library defines is called and the others resolve to NULL. A BLAS with none of them takes its
 * threads from its own environment variable (docs/architecture.md). */
#pragma weak openblas_set_num_threads /* declared by OpenBLAS's cblas.h */
extern void flexiblas_set_num_threads(int) __attribute__((weak));
extern void MKL_Set_Num_Threads(int) __attribute__((weak));

void va_blas_threads(int threads) {
  int t = threads > 0 ? threads : 1;
  if (openblas_set_num_threads) openblas_set_num_threads(t);
  else if (flexiblas_set_num_threads) flexiblas_set_num_threads(t);
  else if (MKL_Set_Num_Threads) MKL_Set_Num_Threads(t);
}

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

/* This thread's index inside the parallel loop (its own scratch), 0 without OpenMP. */
static int thread_slot(void) {
#ifdef VECANNEAL_OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

/* --- fused x86 kernel ------------------------------------------------------------------------- */
#define VA_FUSED_MR          6   /* rows per register block: 12 accumulators + 2 anchor vectors + 1 broadcast */
#define VA_FUSED_NR          16  /* anchors per panel with AVX2: two 8-float vectors */
#define VA_FUSED_NR512       32  /* anchors per panel with AVX-512: two 16-float vectors */
#define VA_FUSED_ROWS        240 /* rows per work item (a multiple of MR): their running best stays in L1/L2 */
#define VA_FUSED_CHUNK_BYTES (192 * 1024) /* anchor panels swept per pass over a work item: fits L2 */

int va_assign_fused_available(void) {
#ifdef VA_FUSED_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return 0;
#endif
}

int va_assign_fused_avx512_available(void) {
#ifdef VA_FUSED_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return 0;
#endif
}

#ifdef VA_FUSED_X86
/* Rows x[0..MR) (pointers; a short last block repeats a row, its results are ignored) against panels
 * [p0, p1): P holds each panel as d x 16 floats (anchor j of panel p in lane j - 16 p), bias its 16
 * offsets (+inf for padding). Value of anchor j: bias_j + scale * (x . a_j), the dot product as one FMA
 * chain over t = 0..d-1, so every row gets the same value wherever it sits. best/bidx: per row, the
 * smallest value each lane has seen and its anchor (strict <: the lowest j of the lane on ties). */
__attribute__((target("avx2,fma"))) static void fused_block(const float *const *x, int64_t d, const float *P,
                                                            const float *bias, int64_t p0, int64_t p1, float scale,
                                                            float *best, int32_t *bidx) {
  const __m256 sc = _mm256_set1_ps(scale);
  for (int64_t p = p0; p < p1; p++) {
    const float *pp = P + p * d * VA_FUSED_NR;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t t = 0; t < d; t++) {
      __m256 b0 = _mm256_loadu_ps(pp + t * VA_FUSED_NR), b1 = _mm256_loadu_ps(pp + t * VA_FUSED_NR + 8), a;
      a = _mm256_broadcast_ss(x[0] + t);
      c00 = _mm256_fmadd_ps(a, b0, c00);
      c01 = _mm256_fmadd_ps(a, b1, c01);
      a = _mm256_broadcast_ss(x[1] + t);
      c10 = _mm256_fmadd_ps(a, b0, c10);
      c11 = _mm256_fmadd_ps(a, b1, c11);
      a = _mm256_broadcast_ss(x[2] + t);
      c20 = _mm256_fmadd_ps(a, b0, c20);
      c21 = _mm256_fmadd_ps(a, b1, c21);
      a = _mm256_broadcast_ss(x[3] + t);
      c30 = _mm256_fmadd_ps(a, b0, c30);
      c31 = _mm256_fmadd_ps(a, b1, c31);
      a = _mm256_broadcast_ss(x[4] + t);
      c40 = _mm256_fmadd_ps(a, b0, c40);
      c41 = _mm256_fmadd_ps(a, b1, c41);
      a = _mm256_broadcast_ss(x[5] + t);
      c50 = _mm256_fmadd_ps(a, b0, c50);
      c51 = _mm256_fmadd_ps(a, b1, c51);
    }
    const __m256 bb0 = _mm256_loadu_ps(bias + p * VA_FUSED_NR), bb1 = _mm256_loadu_ps(bias + p * VA_FUSED_NR + 8);
    const __m256i j0 =
        _mm256_add_epi32(_mm256_set1_epi32((int)(p * VA_FUSED_NR)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i j1 = _mm256_add_epi32(j0, _mm256_set1_epi32(8));
    const __m256 c[VA_FUSED_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < VA_FUSED_MR; r++) {
      float *bv = best + r * VA_FUSED_NR;
      int32_t *bi = bidx + r * VA_FUSED_NR;
      __m256 v0 = _mm256_fmadd_ps(sc, c[r][0], bb0), v1 = _mm256_fmadd_ps(sc, c[r][1], bb1);
      __m256 o0 = _mm256_loadu_ps(bv), o1 = _mm256_loadu_ps(bv + 8);
      __m256 m0 = _mm256_cmp_ps(v0, o0, _CMP_LT_OQ), m1 = _mm256_cmp_ps(v1, o1, _CMP_LT_OQ);
      _mm256_storeu_ps(bv, _mm256_blendv_ps(o0, v0, m0));
      _mm256_storeu_ps(bv + 8, _mm256_blendv_ps(o1, v1, m1));
      __m256 i0 = _mm256_loadu_ps((const float *)bi), i1 = _mm256_loadu_ps((const float *)(bi + 8));
      _mm256_storeu_ps((float *)bi, _mm256_blendv_ps(i0, _mm256_castsi256_ps(j0), m0));
      _mm256_storeu_ps((float *)(bi + 8), _mm256_blendv_ps(i1, _mm256_castsi256_ps(j1), m1));
    }
  }
}

/* fused_block on 16-float vectors: panels of 32 anchors (d x 32 floats). Each dot product is the same
 * FMA chain over t, and the epilogue the same FMA and strict compare, so every value and every lane's
 * winner are fused_block's, and the row's anchor after the lanes' minimum is too: twice the anchors per
 * instruction, the same answers bit for bit (tested). */
__attribute__((target("avx512f"))) static void fused_block512(const float *const *x, int64_t d, const float *P,
                                                              const float *bias, int64_t p0, int64_t p1, float scale,
                                                              float *best, int32_t *bidx) {
  const __m512 sc = _mm512_set1_ps(scale);
  for (int64_t p = p0; p < p1; p++) {
    const float *pp = P + p * d * VA_FUSED_NR512;
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t t = 0; t < d; t++) {
      __m512 b0 = _mm512_loadu_ps(pp + t * VA_FUSED_NR512), b1 = _mm512_loadu_ps(pp + t * VA_FUSED_NR512 + 16), a;
      a = _mm512_set1_ps(x[0][t]);
      c00 = _mm512_fmadd_ps(a, b0, c00);
      c01 = _mm512_fmadd_ps(a, b1, c01);
      a = _mm512_set1_ps(x[1][t]);
      c10 = _mm512_fmadd_ps(a, b0, c10);
      c11 = _mm512_fmadd_ps(a, b1, c11);
      a = _mm512_set1_ps(x[2][t]);
      c20 = _mm512_fmadd_ps(a, b0, c20);
      c21 = _mm512_fmadd_ps(a, b1, c21);
      a = _mm512_set1_ps(x[3][t]);
      c30 = _mm512_fmadd_ps(a, b0, c30);
      c31 = _mm512_fmadd_ps(a, b1, c31);
      a = _mm512_set1_ps(x[4][t]);
      c40 = _mm512_fmadd_ps(a, b0, c40);
      c41 = _mm512_fmadd_ps(a, b1, c41);
      a = _mm512_set1_ps(x[5][t]);
      c50 = _mm512_fmadd_ps(a, b0, c50);
      c51 = _mm512_fmadd_ps(a, b1, c51);
    }
    const __m512 bb0 = _mm512_loadu_ps(bias + p * VA_FUSED_NR512),
                 bb1 = _mm512_loadu_ps(bias + p * VA_FUSED_NR512 + 16);
    const __m512i j0 = _mm512_add_epi32(_mm512_set1_epi32((int)(p * VA_FUSED_NR512)),
                                        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __m512i j1 = _mm512_add_epi32(j0, _mm512_set1_epi32(16));
    const __m512 c[VA_FUSED_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < VA_FUSED_MR; r++) {
      float *bv = best + r * VA_FUSED_NR512;
      int32_t *bi = bidx + r * VA_FUSED_NR512;
      __m512 v0 = _mm512_fmadd_ps(sc, c[r][0], bb0), v1 = _mm512_fmadd_ps(sc, c[r][1], bb1);
      __m512 o0 = _mm512_loadu_ps(bv), o1 = _mm512_loadu_ps(bv + 16);
      __mmask16 m0 = _mm512_cmp_ps_mask(v0, o0, _CMP_LT_OQ), m1 = _mm512_cmp_ps_mask(v1, o1, _CMP_LT_OQ);
      _mm512_storeu_ps(bv, _mm512_mask_blend_ps(m0, o0, v0));
      _mm512_storeu_ps(bv + 16, _mm512_mask_blend_ps(m1, o1, v1));
      __m512i i0 = _mm512_loadu_si512(bi), i1 = _mm512_loadu_si512(bi + 16);
      _mm512_storeu_si512(bi, _mm512_mask_blend_epi32(m0, i0, j0));
      _mm512_storeu_si512(bi + 16, _mm512_mask_blend_epi32(m1, i1, j1));
    }
  }
}
#endif

/* The fused path: anchors packed once into panels, then work items of VA_FUSED_ROWS rows spread over the
 * threads; each item sweeps the panels in cache-sized chunks, block of MR rows by block. wide: the
 * AVX-512 block (panels of 32 anchors), else AVX2 (16). */
static void assign_fused(const float *X, int64_t n, int64_t d, const float *A, const float *anorm, int64_t k,
                         int cosine, int threads, int wide, uint32_t *assign, float *r) {
#ifdef VA_FUSED_X86
  const int64_t NR = wide ? VA_FUSED_NR512 : VA_FUSED_NR, np = (k + NR - 1) / NR, MR = VA_FUSED_MR, R = VA_FUSED_ROWS;
  void (*block)(const float *const *, int64_t, const float *, const float *, int64_t, int64_t, float, float *,
                int32_t *) = wide ? fused_block512 : fused_block;
  float *P = va_calloc((size_t)(np * NR * d), sizeof(float), "assign anchor panels");
  float *bias = va_malloc((size_t)(np * NR) * sizeof(float), "assign anchor panels");
  for (int64_t j = 0; j < np * NR; j++) {
    bias[j] = j < k ? (cosine ? 0.0f : anorm[j]) : INFINITY;
    if (j < k)
      for (int64_t t = 0; t < d; t++) P[(j / NR) * d * NR + t * NR + j % NR] = A[j * d + t];
  }
  int64_t chunk = VA_FUSED_CHUNK_BYTES / (d * NR * (int64_t)sizeof(float));
  if (chunk < 1) chunk = 1;
  const float scale = cosine ? -1.0f : -2.0f;
  const int64_t items = (n + R - 1) / R;
  if (threads > items) threads = (int)items;
  float *best_all = va_malloc((size_t)threads * (size_t)(R * NR) * sizeof(float), "assign running best");
  int32_t *bidx_all = va_malloc((size_t)threads * (size_t)(R * NR) * sizeof(int32_t), "assign running best");
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
#endif
  for (int64_t it = 0; it < items; it++) {
    const int slot = thread_slot();
    float *best = best_all + (size_t)slot * (size_t)(R * NR);
    int32_t *bidx = bidx_all + (size_t)slot * (size_t)(R * NR);
    const int64_t r0 = it * R, rows = n - r0 < R ? n - r0 : R;
    for (int64_t q = 0; q < R * NR; q++) {
      best[q] = INFINITY;
      bidx[q] = 0;
    }
    for (int64_t p0 = 0; p0 < np; p0 += chunk) {
      const int64_t p1 = p0 + chunk < np ? p0 + chunk : np;
      for (int64_t b = 0; b < rows; b += MR) {
        const float *x[VA_FUSED_MR];
        for (int64_t u = 0; u < MR; u++) x[u] = X + (r0 + (b + u < rows ? b + u : rows - 1)) * d;
        block(x, d, P, bias, p0, p1, scale, best + b * NR, bidx + b * NR);
      }
    }
    /* The lanes' minima, ties to the lowest anchor: the first index of the row's minimum. */
    for (int64_t i = 0; i < rows; i++) {
      const float *bv = best + i * NR;
      const int32_t *bi = bidx + i * NR;
      float m = bv[0];
      int32_t j = bi[0];
      for (int64_t u = 1; u < NR; u++)
        if (bv[u] < m || (bv[u] == m && bi[u] < j)) {
          m = bv[u];
          j = bi[u];
        }
      assign[r0 + i] = (uint32_t)j;
      r[r0 + i] = va_row_distance(X + (r0 + i) * d, A + (int64_t)j * d, d, cosine);
    }
  }
  free(bidx_all);
  free(best_all);
  free(bias);
  free(P);
#else
  (void)X;
  (void)n;
  (void)d;
  (void)A;
  (void)anorm;
  (void)k;
  (void)cosine;
  (void)threads;
  (void)wide;
  (void)assign;
  (void)r;
  VA_FATAL("the fused CPU assign kernel is not built for this processor");
#endif
}

void va_assign_cpu(const float *X, int64_t n, int64_t d, const float *A, const float *anorm, int64_t k, int cosine,
                   const va_assign_opts_t *opts, uint32_t *assign, float *r) {
  if (n <= 0) return;
  int kernel = opts ? opts->kernel : VA_CPU_ASSIGN_AUTO;
  if (kernel == VA_CPU_ASSIGN_AUTO) kernel = va_assign_fused_available() ? VA_CPU_ASSIGN_FUSED : VA_CPU_ASSIGN_SGEMM;
  if (kernel == VA_CPU_ASSIGN_FUSED || kernel == VA_CPU_ASSIGN_FUSED_AVX2) {
    const int wide = kernel == VA_CPU_ASSIGN_FUSED && va_assign_fused_avx512_available();
    assign_fused(X, n, d, A, anorm, k, cosine, opts && opts->threads > 0 ? opts->threads : 1, wide, assign, r);
    return;
  }
  int64_t tile = opts && opts->tile_rows > 0 ? opts->tile_rows : auto_tile_rows(k);
  int64_t ntiles = (n + tile - 1) / tile;
  int threads = opts && opts->threads > 0 ? opts->threads : 1;
  if (threads > ntiles) threads = (int)ntiles;
  float *zero_bias = NULL;
  const float *bias = anorm;
  if (cosine) {
    zero_bias = va_calloc((size_t)k, sizeof(float), "assign bias");
    bias = zero_bias;
  }
  float *work = va_malloc((size_t)threads * (size_t)(tile * k) * sizeof(float), "assign tile buffers");
  /* l2: argmin ||a||^2 - 2 x.a ; cosine: argmin -x.a. Each tile is one single-threaded sgemm, so the
   * result does not depend on how tiles are spread over threads. */
  const float alpha = cosine ? -1.0f : -2.0f;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
#endif
  for (int64_t t = 0; t < ntiles; t++) {
    const int slot = thread_slot();
    float *C = work + (size_t)slot * (size_t)(tile * k);
    int64_t r0 = t * tile, rows = n - r0 < tile ? n - r0 : tile;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)k, (int)d, alpha, X + r0 * d, (int)d, A,
                (int)d, 0.0f, C, (int)k);
    scan_tile(C, rows, k, bias, assign + r0);
    for (int64_t i = 0; i < rows; i++)
      r[r0 + i] = va_row_distance(X + (r0 + i) * d, A + (int64_t)assign[r0 + i] * d, d, cosine);
  }
  free(work);
  free(zero_bias);
}
