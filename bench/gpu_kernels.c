/* gpu_kernels.c: device times of the CUDA kernels (CUDA events, median of many after warm-up).
 *   gpu_kernels [n d k reps [ncu|tma]]      defaults 1000000 128 1024 30
 * For each product precision: the GEMM path (cuBLAS products + argmin), the cuBLAS products alone,
 * and the fused tensor-core kernel, in ms and TFLOP/s (2 n k d flops per pass); then the statistics
 * reductions (sorted vs atomic), farthest + histogram, and the host->device upload rate.
 * Checks its results on the way: the GEMM path's anchors of sampled rows against the exact nearest
 * ones on the CPU, and each row where a fused configuration's anchor differs from the GEMM path's:
 * anything but a near-tie (tie_bound below) prints "FAILED: ..." at once and, after the timings, exits 1.
 * The last line is the verdict either way, as every benchmark family ends (bench/README.md):
 * "verification: passed (N checks)" or "verification: FAILED (M of N checks: ...)"; the "ncu" mode
 * (a profiler run) checks nothing and says so. Exits 77 without a device. Output: one line per
 * measurement, with the SM clock and board power read through NVML right after its repetitions (the
 * clock under the power limit moves the tensor-core figures between runs), and a table at the end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "cpu/assign.h"
#include "cuda/kernels.h"
#include "cuda/probe.h"
#include "cpu/stats.h"
#include "util/util.h"
#include "bench_data.h" /* bench_clustered_data */
#include "gpu_clock.h"  /* gpu_clock_open, gpu_clock_read */

typedef struct {
  char what[96];
  double ms, min_ms, tflops;
  unsigned sm_mhz; /* the SM clock right after the timed repetitions; 0: not read */
} row_t;
static row_t table[96];
static int nrows;
static gpu_clock_t gpu_clock; /* empty until the first context names its device */

/* The products' rounding bound c_p per precision (fp32, tf32, fp16, bf16; docs/cuda.md): an assign
 * pass's anchor for row x is within c_p ||x|| max_j ||A_j|| of the exact nearest distance. */
static const double tie_c[] = {2e-5, 8.0 / 1024, 8.0 / 2048, 8.0 / 256};

static double norm2(const float *x, int64_t d) {
  double s = 0;
  for (int64_t t = 0; t < d; t++) s += (double)x[t] * x[t];
  return sqrt(s);
}

/* How far apart the exact l2 distances of row x to two anchors may be when each was chosen by an
 * assign pass at precision prec or by the exact CPU reference: every pass is within c_p ||x|| amax of
 * the exact nearest distance of the rows as stored, so `passes` passes (1 against the CPU, 2 against
 * each other) allow passes x c_p ||x|| amax. At fp16/bf16 the host rows here are the float32 ones, not
 * their 16-bit storage, which moves the difference by at most 4 u ||x|| amax = c_p / 2 more (u the unit
 * roundoff: 2^-11 fp16, 2^-8 bf16). */
static double tie_bound(int prec, int passes, const float *x, int64_t d, double amax) {
  return (passes + (prec >= 2 ? 0.5 : 0.0)) * tie_c[prec] * norm2(x, d) * amax;
}

/* Rows whose anchors a1 and a2 (two l2 passes at precision prec) differ by more than a near-tie, or
 * where either names no anchor. *worst: the largest difference over its bound. */
static int64_t ties_beyond(const float *X, const float *A, int64_t n, int64_t d, int64_t k, int prec, double amax,
                           const uint32_t *a1, const uint32_t *a2, double *worst) {
  int64_t beyond = 0;
  *worst = 0;
  for (int64_t i = 0; i < n; i++) {
    if (a1[i] == a2[i]) continue;
    if (a1[i] >= (uint32_t)k || a2[i] >= (uint32_t)k) {
      beyond++;
      continue;
    }
    const float *x = X + i * d;
    double gap = fabs((double)va_row_distance(x, A + (int64_t)a1[i] * d, d, 0) -
                      (double)va_row_distance(x, A + (int64_t)a2[i] * d, d, 0)),
           bound = tie_bound(prec, 2, x, d, amax);
    if (gap / bound > *worst) *worst = gap / bound;
    beyond += !(gap <= bound);
  }
  return beyond;
}

/* The same for one l2 pass's anchors a[] against the exact nearest anchor on the CPU (va_row_distance,
 * ties to the lowest anchor), on every step-th row (the whole search costs n k d on the host). *differ:
 * sampled rows whose anchor is not the CPU's; *rows: rows sampled. */
static int64_t cpu_beyond(const float *X, const float *A, int64_t n, int64_t d, int64_t k, int prec, double amax,
                          const uint32_t *a, int64_t step, int64_t *differ, int64_t *rows, double *worst) {
  int64_t beyond = 0, ndiffer = 0, sampled = 0;
  double wmax = 0;
  /* rows are independent: one thread each (the search is n / step x k x d multiply-adds) */
#pragma omp parallel for schedule(dynamic, 8) reduction(+ : beyond, ndiffer, sampled) reduction(max : wmax)
  for (int64_t i = 0; i < n; i += step) {
    const float *x = X + i * d;
    float best = INFINITY;
    uint32_t bj = 0;
    for (int64_t j = 0; j < k; j++) {
      float r = va_row_distance(x, A + j * d, d, 0);
      if (r < best) {
        best = r;
        bj = (uint32_t)j;
      }
    }
    sampled++;
    if (a[i] == bj) continue;
    ndiffer++;
    if (a[i] >= (uint32_t)k) {
      beyond++;
      continue;
    }
    double gap = (double)va_row_distance(x, A + (int64_t)a[i] * d, d, 0) - (double)best,
           bound = tie_bound(prec, 1, x, d, amax);
    if (gap / bound > wmax) wmax = gap / bound;
    beyond += !(gap <= bound);
  }
  *differ = ndiffer;
  *rows = sampled;
  *worst = wmax;
  return beyond;
}

static void report(const char *what, double ms, double min_ms, double flops) {
  row_t *r = &table[nrows < 96 ? nrows++ : 95];
  snprintf(r->what, sizeof r->what, "%s", what);
  r->ms = ms;
  r->min_ms = min_ms;
  r->tflops = flops > 0 && ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0;
  double watts = 0;
  r->sm_mhz = 0;
  printf("%-44s median %8.3f ms  min %8.3f ms", what, ms, min_ms);
  if (flops > 0) printf("  %7.1f TFLOP/s", r->tflops);
  if (ms > 0 && gpu_clock_read(&gpu_clock, &r->sm_mhz, &watts)) printf("  SM %u MHz, %.0f W", r->sm_mhz, watts);
  printf("\n");
  fflush(stdout);
}

/* Configuration 4 (the TMA kernel) with its anchor tiles split over 1, 2, 3, 4 and 6 blocks per row block
 * (docs/cuda.md; fewer where k has fewer 256-anchor tiles) and the automatic count. Each count's anchors are
 * checked twice: against the GEMM path's a_gemm (near-ties only) and, split, against the unsplit pass's bit
 * for bit (every product is the same sum in the same order; only which block finds a row's best changes).
 * Then the argmin kernel alone is timed in TMA_ROUNDS rounds that take the counts in turn, so that the
 * board's clock, which falls as it nears its power limit, weighs on every count alike: the median of the
 * rounds' medians, the least minimum. Leaves the context on the automatic count. */
enum { TMA_ROUNDS = 3 }; /* the median below is of 3 */
static void tma_slices(va_cuda_t *ctx, const char *pname, const float *X, const float *A, int64_t n, int64_t d,
                       int64_t k, int prec, double amax, const uint32_t *a_gemm, uint32_t *a_fused, int reps,
                       double flops, int *checks, int *failed) {
  static const int counts[] = {1, 2, 3, 4, 6};
  enum { NC = sizeof counts / sizeof counts[0] };
  uint32_t *a_one = malloc((size_t)n * 4);
  const int automatic = va_cuda_set_tma_splits(ctx, 0);
  int runs[NC] = {0};
  for (int q = 0; q < NC; q++) {
    if (va_cuda_set_tma_splits(ctx, counts[q]) != counts[q]) continue;
    runs[q] = 1;
    va_cuda_assign(ctx, 0);
    va_cuda_download(ctx, q == 0 ? a_one : a_fused, NULL);
    const uint32_t *a = q == 0 ? a_one : a_fused;
    double worst;
    const int64_t beyond = ties_beyond(X, A, n, d, k, prec, amax, a, a_gemm, &worst);
    int64_t unlike = 0;
    for (int64_t i = 0; q > 0 && i < n; i++) unlike += a[i] != a_one[i];
    *checks += 1 + (q > 0);
    if (beyond) {
      ++*failed;
      printf("FAILED: tma %s, %d slices vs gemm: %lld differing rows beyond the near-tie bound (worst %.3g)\n", pname,
             counts[q], (long long)beyond, worst);
    }
    if (unlike) {
      ++*failed;
      printf("FAILED: tma %s, %d slices: %lld rows' anchors differ from the unsplit pass's\n", pname, counts[q],
             (long long)unlike);
    }
  }
  double med[NC][TMA_ROUNDS], least[NC];
  for (int r = 0; r < TMA_ROUNDS; r++)
    for (int q = 0; q < NC; q++) {
      if (!runs[q]) continue;
      va_cuda_set_tma_splits(ctx, counts[q]);
      double mn;
      med[q][r] = va_cuda_bench_assign(ctx, 0, 1, reps, 2, &mn);
      least[q] = r == 0 || mn < least[q] ? mn : least[q];
    }
  for (int q = 0; q < NC; q++) {
    if (!runs[q]) continue;
    const double *m = med[q], mid = fmax(fmin(m[0], m[1]), fmin(fmax(m[0], m[1]), m[2])); /* median of 3 */
    char what[96];
    snprintf(what, sizeof what, "  argmin alone %s tma, %d slice%s%s", pname, counts[q], counts[q] > 1 ? "s" : "",
             counts[q] == automatic ? " (auto)" : "");
    report(what, mid, least[q], flops);
  }
  va_cuda_set_tma_splits(ctx, 0);
  free(a_one);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  va_proc_init();
  int64_t n = argc > 1 ? atoll(argv[1]) : 1000000, d = argc > 2 ? atoll(argv[2]) : 128,
          k = argc > 3 ? atoll(argv[3]) : 1024;
  int reps = argc > 4 ? atoi(argv[4]) : 30;
  /* "ncu": two fused passes (the automatic kernel) per precision, tf32, fp16, bf16, and nothing else, for a
   * profiler run: the argmin kernel's launches 1, 3 and 5 (from 0) are each precision's second.
   * "tma": per precision the GEMM path's pass (the reference) and tma_slices alone. */
  int ncu_mode = argc > 5 && strcmp(argv[5], "ncu") == 0, tma_mode = argc > 5 && strcmp(argv[5], "tma") == 0;
  if (va_cuda_device_count() == 0) {
    printf("SKIP: no CUDA device\n");
    MPI_Finalize();
    return 77;
  }
  float *X, *A;
  bench_clustered_data(n, d, k, &X, &A);
  double flops = 2.0 * (double)n * (double)k * (double)d;
  double amax = 0;
  for (int64_t j = 0; j < k; j++) amax = fmax(amax, norm2(A + j * d, d));
  int checks = 0, failed = 0; /* comparisons made, and those beyond their tolerance */
  char desc[256], what[96];
  static const char *pname[] = {"fp32", "tf32", "fp16", "bf16"};
  uint32_t *a_gemm = malloc((size_t)n * 4), *a_fused = malloc((size_t)n * 4);
  for (int prec = ncu_mode || tma_mode ? 1 : 0; prec < 4; prec++) {
    va_cuda_t *ctx = va_cuda_create(0, n, d, k, prec);
    if (ncu_mode) {
      int64_t chunk1 = 1 << 16;
      for (int64_t r0 = 0; r0 < n; r0 += chunk1)
        va_cuda_upload_rows(ctx, X + r0 * d, r0, n - r0 < chunk1 ? n - r0 : chunk1);
      va_cuda_set_anchors(ctx, A, NULL, k);
      va_cuda_assign(ctx, 0);
      printf("ncu: %s fused cfg %d\n", pname[prec], va_cuda_set_fused_config(ctx, 0));
      va_cuda_assign(ctx, 0);
      va_cuda_destroy(ctx);
      continue;
    }
    if (prec == 0 || (tma_mode && prec == 1)) {
      va_cuda_describe(ctx, desc, sizeof desc);
      char bus[32];
      va_cuda_pci_bus_id(ctx, bus, sizeof bus);
      gpu_clock = gpu_clock_open(bus);
      printf("device: %s\nshape: n %lld d %lld k %lld, %d timed reps after warm-up\n", desc, (long long)n, (long long)d,
             (long long)k, reps);
      for (int p = 1; p < 4 && !tma_mode; p++)
        for (int bps = 1; bps <= 2; bps++) {
          char w2[96];
          double tf = va_cuda_bench_mma_peak(ctx, p, bps);
          snprintf(w2, sizeof w2, "mma.sync ceiling %s, %d x 8 warps/SM", pname[p], bps);
          report(w2, 0, 0, 0);
          table[nrows - 1].tflops = tf;
          printf("  -> %.1f TFLOP/s\n", tf);
        }
    }
    double t0 = va_now();
    int64_t chunk = 1 << 16;
    for (int64_t r0 = 0; r0 < n; r0 += chunk) va_cuda_upload_rows(ctx, X + r0 * d, r0, n - r0 < chunk ? n - r0 : chunk);
    va_cuda_set_anchors(ctx, A, NULL, k); /* synchronises the stream */
    double up = va_now() - t0;
    printf("upload %s: %.1f ms for %.0f MB (%.2f GB/s incl. host memcpy)\n", pname[prec], up * 1e3, n * d * 4 / 1e6,
           n * d * 4 / up / 1e9);
    double mn;
    va_cuda_set_assign_variant(ctx, VA_CUDA_ASSIGN_GEMM);
    va_cuda_assign(ctx, 0);
    va_cuda_download(ctx, a_gemm, NULL);
    {
      int64_t differ, rows;
      double worst;
      const int64_t beyond =
          cpu_beyond(X, A, n, d, k, prec, amax, a_gemm, n > 4096 ? n / 4096 : 1, &differ, &rows, &worst);
      printf("  gemm %s vs CPU on %lld sampled rows: %lld anchors differ (near-ties)\n", pname[prec], (long long)rows,
             (long long)differ);
      checks++;
      if (beyond) {
        failed++;
        printf("FAILED: gemm %s vs CPU: %lld sampled rows beyond the near-tie bound (worst gap/bound %.3g)\n",
               pname[prec], (long long)beyond, worst);
      }
    }
    if (tma_mode) {
      if (va_cuda_set_fused_config(ctx, 4) == 4) {
        va_cuda_set_assign_variant(ctx, VA_CUDA_ASSIGN_FUSED);
        tma_slices(ctx, pname[prec], X, A, n, d, k, prec, amax, a_gemm, a_fused, reps, flops, &checks, &failed);
      } else printf("  tma %s: configuration 4 does not apply here\n", pname[prec]);
      va_cuda_destroy(ctx);
      continue;
    }
    snprintf(what, sizeof what, "assign %s gemm (cuBLAS + argmin)", pname[prec]);
    double ms = va_cuda_bench_assign(ctx, 0, 3, reps, 0, &mn);
    report(what, ms, mn, flops);
    snprintf(what, sizeof what, "  cuBLAS products alone %s", pname[prec]);
    ms = va_cuda_bench_assign(ctx, 0, 3, reps, 1, &mn);
    report(what, ms, mn, flops);
    if (prec == 2) { /* the GEMM path's chunk size */
      static const int64_t rows[] = {2048, 16384, 65536};
      for (int q = 0; q < 3; q++) {
        va_cuda_set_gemm_rows(ctx, rows[q]);
        snprintf(what, sizeof what, "assign %s gemm, %lld-row chunks", pname[prec], (long long)rows[q]);
        ms = va_cuda_bench_assign(ctx, 0, 3, reps, 0, &mn);
        report(what, ms, mn, flops);
        snprintf(what, sizeof what, "  cuBLAS alone, %lld-row chunks", (long long)rows[q]);
        ms = va_cuda_bench_assign(ctx, 0, 3, reps, 1, &mn);
        report(what, ms, mn, flops);
      }
      va_cuda_set_gemm_rows(ctx, 0);
    }
    /* configurations (cuda_assign.cu): 1 rows in shared memory; 2 rows in registers (d <= 128); 3 the same
     * on wgmma (sm_90); 4 rows and anchors through the TMA, wgmma (sm_90) */
    static const char *cfg16[] = {"", "smem 128x64", "reg 128x64 2/SM", "wgmma", "tma"};
    static const char *cfg32[] = {"", "smem 128x64", "reg 128x32 2/SM", "wgmma", "tma"};
    const char *const *cfgname = prec == 1 ? cfg32 : cfg16;
    const int cfg_auto = va_cuda_set_fused_config(ctx, 0);
    if (prec > 0) printf("  automatic fused configuration %s: %d (%s)\n", pname[prec], cfg_auto, cfgname[cfg_auto]);
    for (int cfg = 1; cfg <= VA_CUDA_FUSED_CONFIGS && prec > 0; cfg++) {
      if (va_cuda_set_fused_config(ctx, cfg) != cfg) continue;
      va_cuda_set_assign_variant(ctx, VA_CUDA_ASSIGN_FUSED);
      va_cuda_assign(ctx, 0);
      va_cuda_download(ctx, a_fused, NULL);
      int64_t diff = 0;
      for (int64_t i = 0; i < n; i++) diff += a_fused[i] != a_gemm[i];
      printf("  fused %s vs gemm %s: %lld of %lld rows differ (near-ties)\n", cfgname[cfg], pname[prec],
             (long long)diff, (long long)n);
      double worst;
      const int64_t beyond = ties_beyond(X, A, n, d, k, prec, amax, a_fused, a_gemm, &worst);
      checks++;
      if (beyond) {
        failed++;
        printf("FAILED: fused %s vs gemm %s: %lld differing rows beyond the near-tie bound (worst gap/bound %.3g)\n",
               cfgname[cfg], pname[prec], (long long)beyond, worst);
      }
      snprintf(what, sizeof what, "assign %s fused %s", pname[prec], cfgname[cfg]);
      ms = va_cuda_bench_assign(ctx, 0, 3, reps, 0, &mn);
      report(what, ms, mn, flops);
      snprintf(what, sizeof what, "  argmin kernel alone %s %s", pname[prec], cfgname[cfg]);
      ms = va_cuda_bench_assign(ctx, 0, 3, reps, 2, &mn); /* 2: the fused argmin kernel, without r */
      report(what, ms, mn, flops);
      if (cfg == 4)
        tma_slices(ctx, pname[prec], X, A, n, d, k, prec, amax, a_gemm, a_fused, reps, flops, &checks, &failed);
      if (cfg == 1) {
        snprintf(what, sizeof what, "  r kernel alone %s", pname[prec]);
        ms = va_cuda_bench_assign(ctx, 0, 3, reps, 3, &mn); /* 3: r for the rows' anchors, alone */
        report(what, ms, mn, 0);
      }
      if (cfg == 1 || cfg == cfg_auto) {
        snprintf(what, sizeof what, "assign %s fused %s cosine", pname[prec], cfgname[cfg]);
        ms = va_cuda_bench_assign(ctx, 1, 3, reps, 0, &mn);
        report(what, ms, mn, flops);
      }
    }
    va_cuda_set_fused_config(ctx, 0);
    va_cuda_set_assign_variant(ctx, VA_CUDA_ASSIGN_AUTO);
    if (prec == 1 || prec == 2) { /* the reductions on float32 rows (tf32) and on 16-bit rows (fp16) */
      va_cuda_assign(ctx, 0);
      float *rmax = malloc((size_t)k * 4);
      int64_t *rarg = malloc((size_t)k * 8);
      va_cuda_farthest(ctx, rmax, rarg);
      int64_t bins = 256;
      double *hist = calloc((size_t)(k * bins), 8);
      va_cuda_hist(ctx, rmax, bins, hist);
      int32_t *lo = malloc((size_t)k * 4), *hi = malloc((size_t)k * 4);
      va_trim_bins(hist, k, bins, 0.1, 0.1, lo, hi);
      double *delta = malloc((size_t)k * 8);
      for (int64_t j = 0; j < k; j++) delta[j] = 0.3;
      va_stats_rule_t none = {.mode = VA_ROBUST_NONE};
      va_stats_rule_t trim = {.mode = VA_ROBUST_TRIM, .bin_lo = lo, .bin_hi = hi, .rmax = rmax, .bins = bins};
      va_stats_rule_t hub = {.mode = VA_ROBUST_HUBER, .huber_delta = delta};
      const va_stats_rule_t *rules[3] = {&none, &trim, &hub};
      const char *rn[3] = {"none", "trim", "huber"};
      for (int v = 0; v < 2; v++) {
        va_cuda_set_stats_variant(ctx, v);
        for (int ri = 0; ri < 3; ri++) {
          snprintf(what, sizeof what, "stats %s %s %s", pname[prec], rn[ri], v ? "atomic" : "sorted");
          ms = va_cuda_bench_stats(ctx, rules[ri], 0, 2, reps, &mn);
          report(what, ms, mn, 0);
        }
      }
      va_cuda_set_stats_variant(ctx, VA_CUDA_STATS_SORT);
      for (int ri = 0; ri < 3; ri += 2) {
        snprintf(what, sizeof what, "stats %s %s sorted, r computed in the pass", pname[prec], rn[ri]);
        ms = va_cuda_bench_stats(ctx, rules[ri], 1, 2, reps, &mn);
        report(what, ms, mn, 0);
      }
      /* the rows grouped by cub's radix sort instead of the counting sort (where that applies) */
      va_cuda_set_segment_way(ctx, 2);
      for (int cr = 0; cr < 2; cr++) {
        snprintf(what, sizeof what, "stats %s none sorted%s, radix-sorted rows", pname[prec],
                 cr ? ", r computed in the pass" : "");
        ms = va_cuda_bench_stats(ctx, &none, cr, 2, reps, &mn);
        report(what, ms, mn, 0);
      }
      va_cuda_set_segment_way(ctx, 0);
      if (prec == 1) {
        ms = va_cuda_bench_farthest_hist(ctx, rmax, 0, 2, reps, &mn);
        report("farthest (2 passes)", ms, mn, 0);
        ms = va_cuda_bench_farthest_hist(ctx, rmax, bins, 2, reps, &mn);
        report("farthest + hist 256 bins", ms, mn, 0);
      }
      /* the device's share of a loop iteration, per precision (the anchors move: last) */
      for (int p = 1; p < 4 && prec == 1; p++) {
        va_cuda_t *it = va_cuda_create(0, n, d, k, p);
        va_cuda_upload_rows(it, X, 0, n);
        va_cuda_set_anchors(it, A, NULL, k);
        snprintf(what, sizeof what, "loop iteration %s on the device (none)", pname[p]);
        ms = va_cuda_bench_iteration(it, &none, 0, 3, reps, &mn);
        report(what, ms, mn, 0);
        va_cuda_destroy(it);
      }
      double th = va_now();
      va_cuda_download(ctx, a_gemm, NULL);
      printf("download a[]: %.2f ms\n", (va_now() - th) * 1e3);
      free(rmax);
      free(rarg);
      free(hist);
      free(lo);
      free(hi);
      free(delta);
    }
    va_cuda_destroy(ctx);
  }
  printf("\n== summary: n %lld d %lld k %lld on %s ==\n", (long long)n, (long long)d, (long long)k, desc);
  printf("%-44s %10s %10s %9s %7s\n", "kernel", "median ms", "min ms", "TFLOP/s", "SM MHz");
  for (int i = 0; i < nrows; i++)
    printf("%-44s %10.3f %10.3f %9.1f %7u\n", table[i].what, table[i].ms, table[i].min_ms, table[i].tflops,
           table[i].sm_mhz);
  if (ncu_mode) printf("verification: not run (ncu mode checks nothing)\n");
  else if (failed)
    printf("verification: FAILED (%d of %d checks: assignments beyond the near-tie bound)\n", failed, checks);
  else printf("verification: passed (%d checks)\n", checks);
  free(X);
  free(A);
  free(a_gemm);
  free(a_fused);
  MPI_Finalize();
  return failed ? 1 : 0;
}
