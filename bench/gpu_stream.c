/* gpu_stream.c: the out-of-core CUDA backend against the pinned host-to-device bandwidth, in one run.
 *   gpu_stream_bench [n d k chunk_mb reps]      defaults 8000000 128 1024 256 5
 * Measures (1) the pinned host-to-device copy rate with copies of one chunk (cudaMemcpyAsync, CUDA
 * events, median), then for tf32 and fp16 products (2) an assign pass and a statistics pass over rows
 * resident on the GPU and over the same rows streamed from pinned host memory in chunks (the copies
 * included: va_cuda_bench_assign / va_cuda_bench_stats time from the first launch to the last kernel),
 * and the loop's iteration (deferred assign + statistics + update: streamed, one pass over the rows),
 * and reports the streaming rate (row bytes as stored per pass / pass time: float32 at tf32, 16 bits at
 * fp16, whose pinned copy holds the 16-bit rows) against (1). It checks the
 * agreement on the way: the streamed assignment equals the resident one row for row, the statistics
 * agree within 1e-12 (|resident| + count max|x|), one check per precision: a disagreement prints
 * "FAILED: ..." at once, and after the timings the program exits 1. The last line is the verdict either
 * way (bench/README.md): "verification: passed (N checks)" or "verification: FAILED (M of N checks: ...)".
 * Exits 77 without a device.
 * Prints one CSV line per measurement after "csv:" (the header first). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "cuda/kernels.h"
#include "cuda/probe.h"
#include "cpu/stats.h"
#include "util/util.h"
#include "bench_data.h"

#define CK(call)                                                                                                       \
  do {                                                                                                                 \
    cudaError_t e_ = (call);                                                                                           \
    if (e_ != cudaSuccess) va_fatal_at(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(e_));                   \
  } while (0)

static int cmp_f(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Pinned host -> device, `bytes` per copy, the median of reps copies (after one warm-up), GB/s. */
static double h2d_rate(size_t bytes, int reps) {
  void *h = NULL, *dv = NULL;
  CK(cudaMallocHost(&h, bytes));
  memset(h, 1, bytes);
  CK(cudaMalloc(&dv, bytes));
  cudaStream_t s;
  cudaEvent_t e0, e1;
  CK(cudaStreamCreate(&s));
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float *ms = malloc((size_t)reps * sizeof(float));
  for (int r = -1; r < reps; r++) {
    CK(cudaEventRecord(e0, s));
    CK(cudaMemcpyAsync(dv, h, bytes, cudaMemcpyHostToDevice, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    if (r >= 0) CK(cudaEventElapsedTime(&ms[r], e0, e1));
  }
  qsort(ms, (size_t)reps, sizeof(float), cmp_f);
  double gbs = (double)bytes / (ms[reps / 2] * 1e-3) / 1e9;
  free(ms);
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaStreamDestroy(s));
  CK(cudaFree(dv));
  CK(cudaFreeHost(h));
  return gbs;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  va_proc_init();
  int64_t n = argc > 1 ? atoll(argv[1]) : 8000000, d = argc > 2 ? atoll(argv[2]) : 128,
          k = argc > 3 ? atoll(argv[3]) : 1024;
  double chunk_mb = argc > 4 ? atof(argv[4]) : 256;
  int reps = argc > 5 ? atoi(argv[5]) : 5;
  if (va_cuda_device_count() == 0) {
    printf("SKIP: no CUDA device\n");
    MPI_Finalize();
    return 77;
  }
  int64_t chunk = va_cuda_stream_chunk_rows(d, chunk_mb * 1048576.0);
  double row_bytes = (double)va_cuda_stream_host_bytes(n, d); /* float32 rows, d padded */
  double chunk_bytes = (double)va_cuda_stream_host_bytes(chunk, d);
  double h2d = h2d_rate((size_t)chunk_bytes, 2 * reps + 1);
  printf("n %lld d %lld k %lld: %.2f GB of rows, chunks of %lld rows (%.0f MB); pinned host-to-device copy of one "
         "chunk: %.2f GB/s\n",
         (long long)n, (long long)d, (long long)k, row_bytes / 1e9, (long long)chunk, chunk_bytes / 1e6, h2d);
  float *X, *A;
  bench_clustered_data(n, d, k, &X, &A);
  double xmax = 0;
  for (int64_t e = 0; e < n * d; e++)
    if (fabs(X[e]) > xmax) xmax = fabs(X[e]);
  int64_t W = VA_STATS_W(d);
  uint32_t *ar = malloc((size_t)n * 4), *as = malloc((size_t)n * 4);
  double *sr = malloc((size_t)(k * W) * 8), *ss = malloc((size_t)(k * W) * 8);
  static const char *pname[] = {"fp32", "tf32", "fp16", "bf16"};
  const int precs[2] = {VA_CUDA_TF32, VA_CUDA_FP16};
  const int64_t up = 1 << 18;
  int checks = 0, bad = 0; /* precisions compared, and those whose streamed passes disagree */
  printf("csv:precision,mode,pass,ms,rows_GB_per_s,h2d_GB_per_s,fraction_of_h2d\n");
  for (int q = 0; q < 2; q++) {
    int prec = precs[q];
    va_cuda_t *ctx[2] = {va_cuda_create(0, n, d, k, prec),
                         va_cuda_create_streamed(0, n, d, k, prec, chunk, va_cpu_count())};
    for (int m = 0; m < 2; m++) {
      for (int64_t r0 = 0; r0 < n; r0 += up) va_cuda_upload_rows(ctx[m], X + r0 * d, r0, n - r0 < up ? n - r0 : up);
      va_cuda_finish_rows(ctx[m]);
      va_cuda_set_anchors(ctx[m], A, NULL, k);
      va_cuda_assign(ctx[m], 0);
    }
    va_cuda_download(ctx[0], ar, NULL);
    va_cuda_download(ctx[1], as, NULL);
    int64_t diff = 0;
    for (int64_t i = 0; i < n; i++) diff += ar[i] != as[i];
    va_stats_rule_t none = {.mode = VA_ROBUST_NONE};
    va_cuda_fetch_f64(ctx[0], va_cuda_stats_device(ctx[0], &none, NULL, 0), k * W, sr);
    va_cuda_fetch_f64(ctx[1], va_cuda_stats_device(ctx[1], &none, NULL, 0), k * W, ss);
    int64_t sbad = 0;
    for (int64_t j = 0; j < k; j++) {
      double cnt = sr[j * W + VA_ST_COUNT(d)];
      for (int64_t t = 0; t < W; t++) {
        double tol = t == VA_ST_COUNT(d) ? 0 : 1e-12 * (fabs(sr[j * W + t]) + (t < d ? cnt * xmax : 0));
        sbad += !(fabs(ss[j * W + t] - sr[j * W + t]) <= tol);
      }
    }
    printf("%s: streamed vs resident: %lld of %lld assignments differ, %lld statistics entries beyond 1e-12\n",
           pname[prec], (long long)diff, (long long)n, (long long)sbad);
    checks++;
    if (diff != 0 || sbad != 0) {
      bad++;
      printf("FAILED: %s: streamed and resident disagree\n", pname[prec]);
    }
    for (int m = 0; m < 2; m++) {
      double mn = 0, ta = va_cuda_bench_assign(ctx[m], 0, 1, reps, 0, &mn),
             ts = va_cuda_bench_stats(ctx[m], &none, 0, 1, reps, &mn);
      /* the loop's iteration (deferred assign, statistics, update): streamed, the assign pass runs
       * inside the statistics pass, one copy of the rows */
      double ti = va_cuda_bench_iteration(ctx[m], &none, 0, 1, reps, &mn);
      const char *mode = m ? "streamed" : "resident";
      const double stored = prec >= VA_CUDA_FP16 ? row_bytes / 2 : row_bytes;
      double ga = stored / (ta * 1e-3) / 1e9, gs = stored / (ts * 1e-3) / 1e9, gi = stored / (ti * 1e-3) / 1e9;
      printf("%s %-8s assign pass %9.3f ms (%6.2f GB/s of rows, %.2f of the copy rate), statistics pass %9.3f ms "
             "(%6.2f GB/s, %.2f), "
             "iteration %9.3f ms (%6.2f GB/s, %.2f); %.2f GB copied\n",
             pname[prec], mode, ta, ga, ga / h2d, ts, gs, gs / h2d, ti, gi, gi / h2d,
             va_cuda_streamed_bytes(ctx[m]) / 1e9);
      printf("csv:%s,%s,assign,%.3f,%.2f,%.2f,%.3f\n", pname[prec], mode, ta, ga, h2d, ga / h2d);
      printf("csv:%s,%s,statistics,%.3f,%.2f,%.2f,%.3f\n", pname[prec], mode, ts, gs, h2d, gs / h2d);
      printf("csv:%s,%s,iteration,%.3f,%.2f,%.2f,%.3f\n", pname[prec], mode, ti, gi, h2d, gi / h2d);
    }
    va_cuda_destroy(ctx[0]);
    va_cuda_destroy(ctx[1]);
  }
  printf("%s\n", bad ? "FAILED: streamed and resident disagree" : "streamed and resident agree");
  if (bad) printf("verification: FAILED (%d of %d checks: streamed and resident disagree)\n", bad, checks);
  else printf("verification: passed (%d checks)\n", checks);
  free(X);
  free(A);
  free(ar);
  free(as);
  free(sr);
  free(ss);
  MPI_Finalize();
  return bad ? 1 : 0;
}
