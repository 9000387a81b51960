/* test_pq_encode_cuda.c: the device PQ encoder (cuda/pq_encode.cu, va_cuda_pq_encode) against the host
 * path it stands in for (job/codes.c): the rows as the context stores them (va_cuda_get_rows), less
 * their anchors in float32, encoded by va_pq_encode, the figures summed in double in the host loop's
 * order. Tolerance: none; the codes, every row's error, |x|^2 and |x - a|^2, and the column sums must
 * be bitwise equal. Cases: rows stored in float32 and fp16 (the encoder reads them as stored); (d, M) =
 * (8, 8) one column a subspace, (30, 7) d not a multiple of M, (128, 16), (384, 48), (64, 1) the widest
 * subspace the device takes, and (200, 2) wider (the encoder declines: 0, nothing written); 256 and 16
 * centroids; two chunks whose column sums continue the first's; centroids repeated (ties to the lower
 * code) and rows equal to a centroid (error 0). Exits 77 ("SKIP: no CUDA device") without a device, 1 on
 * any failure, 0 when all pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/pq.h"       /* va_pq_encode, va_pq_subspace */
#include "cuda/kernels.h" /* va_cuda_create, va_cuda_pq_encode */
#include "util/rng.h"     /* va_rand_normal, va_rand_u64 */
#include "util/util.h"

static int failures, checked;
static uint64_t draws;
static double normal(void) { return va_rand_normal(7, 1, 0, draws++); }
static uint64_t bits(void) { return va_rand_u64(7, 2, 0, draws++); }

static void expect_same(const char *what, const char *name, const void *a, const void *b, size_t bytes) {
  checked++;
  if (memcmp(a, b, bytes)) {
    failures++;
    printf("FAIL %s: %s differ from the host path's\n", what, name);
  }
}

static void run_case(int64_t n, int64_t d, int64_t M, int64_t ksub, int precision) {
  const int64_t k = 20, dmax = va_pq_dsub_max(d, M);
  char what[160];
  snprintf(what, sizeof what, "n %lld, d %lld, M %lld, ksub %lld, %s rows", (long long)n, (long long)d, (long long)M,
           (long long)ksub, precision == VA_CUDA_FP16 ? "fp16" : "fp32");
  float *X = malloc((size_t)(n * d) * sizeof(float)), *A = malloc((size_t)(k * d) * sizeof(float));
  float *cb = calloc((size_t)(M * ksub * dmax), sizeof(float));
  uint32_t *assign = malloc((size_t)n * sizeof(uint32_t));
  for (int64_t i = 0; i < k * d; i++) A[i] = (float)normal();
  for (int64_t m = 0; m < M; m++) {
    int64_t col0, width;
    va_pq_subspace(d, M, m, &col0, &width);
    for (int64_t c = 0; c < ksub; c++)
      for (int64_t t = 0; t < width; t++) /* every 9th centroid repeats the one before: a tie */
        cb[(m * ksub + c) * dmax + t] = c % 9 == 8 ? cb[(m * ksub + c - 1) * dmax + t] : (float)(0.3 * normal());
  }
  for (int64_t i = 0; i < n; i++) {
    assign[i] = (uint32_t)(bits() % (uint64_t)k);
    for (int64_t t = 0; t < d; t++) X[i * d + t] = A[assign[i] * d + t] + (float)(0.3 * normal());
    if (i % 11 == 5) /* a row at its anchor plus centroid 3 of every subspace: codes 3 (or a tie below) */
      for (int64_t m = 0; m < M; m++) {
        int64_t col0, width;
        va_pq_subspace(d, M, m, &col0, &width);
        for (int64_t t = 0; t < width; t++)
          X[i * d + col0 + t] = A[assign[i] * d + col0 + t] + cb[(m * ksub + 3) * dmax + t];
      }
  }
  va_cuda_t *ctx = va_cuda_create(0, n, d, k, precision);
  va_cuda_upload_rows(ctx, X, 0, n);
  /* the host path: the rows as stored, less their anchors, encoded; the figures in its order */
  int64_t *local = malloc((size_t)n * sizeof(int64_t));
  for (int64_t i = 0; i < n; i++) local[i] = i;
  float *R = malloc((size_t)(n * d) * sizeof(float));
  va_cuda_get_rows(ctx, local, n, R);
  double *hx2 = calloc((size_t)n, sizeof(double)), *hr2 = calloc((size_t)n, sizeof(double));
  double *hcol = calloc((size_t)d, sizeof(double)), *herr = malloc((size_t)n * sizeof(double));
  for (int64_t i = 0; i < n; i++)
    for (int64_t t = 0; t < d; t++) {
      float *x = R + i * d;
      hcol[t] += x[t];
      hx2[i] += (double)x[t] * x[t];
      x[t] = x[t] - A[assign[i] * d + t];
      hr2[i] += (double)x[t] * x[t];
    }
  uint8_t *hcodes = malloc((size_t)(n * M)), *gcodes = malloc((size_t)(n * M));
  va_pq_encode(R, n, d, M, ksub, cb, 2, hcodes, herr);
  /* the device, in two chunks */
  double *gx2 = malloc((size_t)n * sizeof(double)), *gr2 = malloc((size_t)n * sizeof(double));
  double *gerr = malloc((size_t)n * sizeof(double)), *gcol = calloc((size_t)d, sizeof(double));
  const int64_t cut = n / 3;
  int done = va_cuda_pq_encode(ctx, A, k, assign, 0, cut, M, ksub, cb, gcodes, gerr, gx2, gr2, gcol);
  if (done)
    done = va_cuda_pq_encode(ctx, A, k, assign + cut, cut, n - cut, M, ksub, cb, gcodes + cut * M, gerr + cut,
                             gx2 + cut, gr2 + cut, gcol);
  checked++;
  if (done != (dmax <= 64)) {
    failures++;
    printf("FAIL %s: the device encoder %s a widest subspace of %lld columns\n", what, done ? "took" : "declined",
           (long long)dmax);
  } else if (done) {
    expect_same(what, "codes", hcodes, gcodes, (size_t)(n * M));
    expect_same(what, "errors", herr, gerr, (size_t)n * sizeof(double));
    expect_same(what, "|x|^2", hx2, gx2, (size_t)n * sizeof(double));
    expect_same(what, "|x - a|^2", hr2, gr2, (size_t)n * sizeof(double));
    expect_same(what, "column sums", hcol, gcol, (size_t)d * sizeof(double));
  }
  printf("%s: %s\n", what, done ? "compared" : "declined (host path)");
  va_cuda_destroy(ctx);
  free(X), free(A), free(cb), free(assign), free(local), free(R), free(hx2), free(hr2), free(hcol), free(herr);
  free(hcodes), free(gcodes), free(gx2), free(gr2), free(gerr), free(gcol);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  va_proc_init();
  if (va_cuda_device_count() == 0) {
    printf("SKIP: no CUDA device\n");
    MPI_Finalize();
    return 77;
  }
  const int64_t shapes[][2] = {{8, 8}, {30, 7}, {128, 16}, {384, 48}, {64, 1}, {200, 2}};
  for (int s = 0; s < 6; s++)
    for (int prec = 0; prec < 2; prec++)
      run_case(3000, shapes[s][0], shapes[s][1], 256, prec ? VA_CUDA_FP16 : VA_CUDA_FP32);
  run_case(5000, 32, 8, 16, VA_CUDA_FP32);
  printf("%s: %d comparison(s), %d failure(s)\n", failures ? "FAILED" : "PASSED", checked, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
