/* assign.h: nearest-anchor assignment, a(x) = argmin_j ||x - A_j||^2 (ties to the lowest j) and
 * r(x) = that squared distance; with cosine (unit rows and anchors), a(x) = argmax_j x.A_j and
 * r(x) = 1 - x.A_j. The fast path never holds an n x k matrix: it multiplies a tile of rows by all
 * anchors (sgemm), scans the tile for the running argmin, and recomputes r for the winner exactly in
 * double (the expanded form ||x||^2 - 2x.a + ||a||^2 loses digits when r is small next to ||x||^2). */
#ifndef VECANNEAL_ASSIGN_H
#define VECANNEAL_ASSIGN_H
#include <stdint.h>

/* CPU kernels: AUTO = FUSED where the processor has it (x86-64 with AVX2 and FMA), else SGEMM. FUSED
 * takes the AVX-512 block where the processor has AVX-512 (the same answers bit for bit);
 * FUSED_AVX2 forces the AVX2 one (tests and benchmarks). */
enum { VA_CPU_ASSIGN_AUTO = 0, VA_CPU_ASSIGN_SGEMM = 1, VA_CPU_ASSIGN_FUSED = 2, VA_CPU_ASSIGN_FUSED_AVX2 = 3 };

typedef struct {
  int threads;       /* worker threads for the tiles */
  int64_t tile_rows; /* rows per tile of the SGEMM kernel; 0 = auto */
  int kernel;        /* VA_CPU_ASSIGN_* */
} va_assign_opts_t;

/* Plain reference: every distance in double, ties to the lowest j. */
void va_assign_ref(const float *X, int64_t n, int64_t d, const float *A, int64_t k, int cosine, uint32_t *assign,
                   float *r);
/* Fast path. anorm[j] = ||A_j||^2 (ignored for cosine). Either kernel gives a result that does not
 * depend on the thread count or tile size; the two kernels round the dot products differently, so they
 * may differ on near-ties. */
void va_assign_cpu(const float *X, int64_t n, int64_t d, const float *A, const float *anorm, int64_t k, int cosine,
                   const va_assign_opts_t *opts, uint32_t *assign, float *r);
/* Exact distance of one row to one anchor (double accumulation), as the assign pass reports it. */
float va_row_distance(const float *x, const float *a, int64_t d, int cosine);
/* 1 when this processor runs the fused kernel (x86-64 with AVX2 and FMA); its AVX-512 block. */
int va_assign_fused_available(void);
int va_assign_fused_avx512_available(void);
/* Squared norms of m rows of length d. */
void va_row_norms(const float *M, int64_t m, int64_t d, float *out);
/* Sets the BLAS library's own thread count (OpenBLAS). */
void va_blas_threads(int threads);
#endif
