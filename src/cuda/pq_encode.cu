/* pq_encode.cu: residual product-quantization codes of a CUDA context's resident rows (cuda/kernels.h:
 * va_cuda_pq_encode), with the bits of the host path (job/codes.c: the rows fetched by get_rows, less
 * their anchors, encoded by va_pq_encode of cpu/pq.c).
 *
 * Work. The codes: one block per 256 rows and subspace (grid y); the subspace's codebook (ksub x width
 * floats) and the 256 rows' residual columns (x - a, rounded once to float32, as the host subtracts) sit
 * in shared memory; each thread measures its row against every centroid, the squared differences
 * rounded and summed in float32 in column order (__fsub_rn, __fmul_rn, __fadd_rn: the host's recipe
 * without FMA), and keeps the first smallest (ties to the lower code). The per-row figures: one thread a
 * row, in double, columns in order: |x|^2, |x - a|^2, and the error of its codes, each subspace's squared
 * error summed over its columns and added subspace by subspace. The column sums: one thread a column,
 * rows in order, continuing the caller's running sums. Every sum has the host loop's order, so the
 * figures are the host's bits too. This file is compiled with -ftz=false (cmake/cuda.cmake). */
#include <stdlib.h>

#include <type_traits>

#include "cuda/elem.cuh"     /* elem_to_float */
#include "cuda/internal.cuh" /* va_cuda_t, VA_CUDA, dalloc, dfree */
#include "cuda/pq.cuh"       /* pq_subspace */

static const int ROWS = 256; /* rows a block of the encoder; one a thread */
/* The widest subspace the device encoder takes: its 256 rows' residual columns in shared memory. */
static const int MAX_WIDTH = 64;

template <typename T>
__global__ void __launch_bounds__(ROWS)
    encode_kernel(const T *__restrict__ X, int64_t dp, int64_t d, const uint32_t *__restrict__ assign,
                  const float *__restrict__ A, int64_t r0, int64_t m, int64_t M, int64_t ksub, int64_t dmax,
                  const float *__restrict__ codebooks, uint8_t *__restrict__ codes) {
  extern __shared__ __align__(16) float sh[];
  const int64_t sub = blockIdx.y;
  int col0, width;
  pq_subspace(d, (int)M, (int)sub, &col0, &width);
  float *C = sh;                /* ksub x width */
  float *R = sh + ksub * width; /* width x ROWS: column t of the block's rows at R + t ROWS */
  const float *cb = codebooks + sub * ksub * dmax;
  for (int64_t e = threadIdx.x; e < ksub * width; e += ROWS) C[e] = cb[(e / width) * dmax + e % width];
  const int64_t i = (int64_t)blockIdx.x * ROWS + threadIdx.x, row = r0 + i;
  if (i < m) {
    const float *a = A + (int64_t)assign[i] * d + col0;
    for (int t = 0; t < width; t++) R[t * ROWS + threadIdx.x] = __fsub_rn(elem_to_float(X[row * dp + col0 + t]), a[t]);
  }
  __syncthreads();
  if (i >= m) return;
  int best = 0;
  float best_s = 0.0f;
  for (int c = 0; c < ksub; c++) {
    float s = 0.0f;
    for (int t = 0; t < width; t++) {
      const float e = __fsub_rn(R[t * ROWS + threadIdx.x], C[c * width + t]);
      s = __fadd_rn(s, __fmul_rn(e, e));
    }
    if (c == 0 || s < best_s) {
      best = c;
      best_s = s;
    }
  }
  codes[i * M + sub] = (uint8_t)best;
}

/* x2[i], r2[i], err[i] of row r0 + i: see the file's comment. */
template <typename T>
__global__ void row_figures_kernel(const T *__restrict__ X, int64_t dp, int64_t d, const uint32_t *__restrict__ assign,
                                   const float *__restrict__ A, int64_t r0, int64_t m, int64_t M, int64_t ksub,
                                   int64_t dmax, const float *__restrict__ codebooks, const uint8_t *__restrict__ codes,
                                   double *__restrict__ x2, double *__restrict__ r2, double *__restrict__ err) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= m) return;
  const int64_t row = r0 + i;
  const float *a = A + (int64_t)assign[i] * d;
  double sx = 0, sr = 0, se = 0;
  for (int64_t sub = 0; sub < M; sub++) {
    int col0, width;
    pq_subspace(d, (int)M, (int)sub, &col0, &width);
    const float *c = codebooks + (sub * ksub + codes[i * M + sub]) * dmax;
    double e_sub = 0;
    for (int t = 0; t < width; t++) {
      const float x = elem_to_float(X[row * dp + col0 + t]), r = __fsub_rn(x, a[col0 + t]);
      sx = __dadd_rn(sx, __dmul_rn((double)x, (double)x));
      sr = __dadd_rn(sr, __dmul_rn((double)r, (double)r));
      const double e = __dsub_rn((double)r, (double)c[t]);
      e_sub = __dadd_rn(e_sub, __dmul_rn(e, e));
    }
    se = __dadd_rn(se, e_sub);
  }
  x2[i] = sx;
  r2[i] = sr;
  err[i] = se;
}

/* colsum[t] += the rows' column t, rows in order. */
template <typename T>
__global__ void column_sums_kernel(const T *__restrict__ X, int64_t dp, int64_t d, int64_t r0, int64_t m,
                                   double *__restrict__ colsum) {
  const int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (t >= d) return;
  double s = colsum[t];
  for (int64_t i = 0; i < m; i++) s = __dadd_rn(s, (double)elem_to_float(X[(r0 + i) * dp + t]));
  colsum[t] = s;
}

static size_t encode_smem(int64_t ksub, int64_t width) { return (size_t)(ksub + ROWS) * (size_t)width * sizeof(float); }

extern "C" int va_cuda_pq_encode(va_cuda_t *c, const float *A, int64_t k, const uint32_t *assign, int64_t r0, int64_t m,
                                 int64_t M, int64_t ksub, const float *codebooks, uint8_t *codes, double *err,
                                 double *x2, double *r2, double *colsum) {
  const int64_t d = c->d, dmax = (d + M - 1) / M;
  int optin = 0;
  VA_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->device));
  /* the rows must be resident, and the widest subspace's encoder block must fit */
  if (c->chunk_rows || c->defer_convert || dmax > MAX_WIDTH || ksub > 256 || encode_smem(ksub, dmax) > (size_t)optin)
    return 0;
  if (r0 < 0 || m < 0 || r0 + m > c->n)
    VA_FATAL("va_cuda_pq_encode: rows [%lld, %lld) outside [0, %lld)", (long long)r0, (long long)(r0 + m),
             (long long)c->n);
  if (m == 0) return 1;
  va_cuda_enter(c);
  float *dA = NULL, *dcb = NULL;
  uint32_t *dassign = NULL;
  uint8_t *dcodes = NULL;
  double *dfig = NULL, *dcol = NULL;
  dalloc(&dA, (size_t)(k * d) * sizeof(float), "pq anchors");
  dalloc(&dcb, (size_t)(M * ksub * dmax) * sizeof(float), "pq codebooks");
  dalloc(&dassign, (size_t)m * sizeof(uint32_t), "pq row anchors");
  dalloc(&dcodes, (size_t)(m * M), "pq codes");
  dalloc(&dfig, (size_t)(3 * m) * sizeof(double), "pq row figures");
  dalloc(&dcol, (size_t)d * sizeof(double), "pq column sums");
  VA_CUDA(cudaMemcpyAsync(dA, A, (size_t)(k * d) * sizeof(float), cudaMemcpyHostToDevice, c->stream));
  VA_CUDA(
      cudaMemcpyAsync(dcb, codebooks, (size_t)(M * ksub * dmax) * sizeof(float), cudaMemcpyHostToDevice, c->stream));
  VA_CUDA(cudaMemcpyAsync(dassign, assign, (size_t)m * sizeof(uint32_t), cudaMemcpyHostToDevice, c->stream));
  VA_CUDA(cudaMemcpyAsync(dcol, colsum, (size_t)d * sizeof(double), cudaMemcpyHostToDevice, c->stream));
  const va_cuda_rows_t v = va_cuda_resident_rows(c);
  const size_t smem = encode_smem(ksub, dmax);
  va_cuda_with_rows(c, &v, [&](auto X) {
    auto kernel = encode_kernel<std::remove_cv_t<std::remove_pointer_t<decltype(X)>>>;
    VA_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kernel<<<dim3((unsigned)((m + ROWS - 1) / ROWS), (unsigned)M), ROWS, smem, c->stream>>>(
        X, c->dp, d, dassign, dA, r0, m, M, ksub, dmax, dcb, dcodes);
    VA_LAUNCHED();
    row_figures_kernel<<<(unsigned)((m + 255) / 256), 256, 0, c->stream>>>(
        X, c->dp, d, dassign, dA, r0, m, M, ksub, dmax, dcb, dcodes, dfig, dfig + m, dfig + 2 * m);
    VA_LAUNCHED();
    column_sums_kernel<<<(unsigned)((d + 127) / 128), 128, 0, c->stream>>>(X, c->dp, d, r0, m, dcol);
    VA_LAUNCHED();
  });
  VA_CUDA(cudaMemcpyAsync(codes, dcodes, (size_t)(m * M), cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaMemcpyAsync(x2, dfig, (size_t)m * sizeof(double), cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaMemcpyAsync(r2, dfig + m, (size_t)m * sizeof(double), cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaMemcpyAsync(err, dfig + 2 * m, (size_t)m * sizeof(double), cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaMemcpyAsync(colsum, dcol, (size_t)d * sizeof(double), cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  dfree(&dcol);
  dfree(&dfig);
  dfree(&dcodes);
  dfree(&dassign);
  dfree(&dcb);
  dfree(&dA);
  return 1;
}
