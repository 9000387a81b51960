/* cpu_stats.c: per-anchor statistics on the CPU (see stats.h), plus plain references for the tests. */
#include "cpu/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "util/util.h"

void va_farthest_local(const uint32_t *assign, const float *r, int64_t n, int64_t k, float *rmax, int64_t *rarg) {
  for (int64_t j = 0; j < k; j++) {
    rmax[j] = 0;
    rarg[j] = -1;
  }
  for (int64_t i = 0; i < n; i++) {
    uint32_t j = assign[i];
    if (rarg[j] < 0 || r[i] > rmax[j]) {
      rmax[j] = r[i];
      rarg[j] = i;
    }
  }
}

void va_hist_accumulate(const uint32_t *assign, const float *r, int64_t n, int64_t k, const float *rmax, int64_t bins,
                        double *hist) {
  (void)k;
  for (int64_t i = 0; i < n; i++) {
    uint32_t j = assign[i];
    hist[(int64_t)j * bins + va_hist_bin(r[i], rmax[j], bins)] += 1.0;
  }
}

void va_trim_bins(const double *hist, int64_t k, int64_t bins, double trim_near, double trim_far, int32_t *bin_lo,
                  int32_t *bin_hi) {
  for (int64_t j = 0; j < k; j++) {
    const double *h = hist + j * bins;
    double count = 0;
    for (int64_t b = 0; b < bins; b++) count += h[b];
    double drop_near = floor(trim_near * count), drop_far = floor(trim_far * count);
    /* Lowest bin kept: drop whole leading bins while their total stays within drop_near. */
    int64_t lo = 0;
    double cum = 0;
    while (lo < bins - 1 && cum + h[lo] <= drop_near) cum += h[lo++];
    int64_t hi = bins - 1;
    cum = 0;
    while (hi > lo && cum + h[hi] <= drop_far) cum += h[hi--];
    bin_lo[j] = (int32_t)lo;
    bin_hi[j] = (int32_t)hi;
  }
}

/* a[t] += w x[t] (or x[t] when w is 1) for t < d, in double: the statistics pass's inner loop, built for
 * the widest vector unit the processor has. The columns are independent, so vectors change no order of
 * additions, and ISO C mode fuses no multiply-add: every build gives the same sums bit for bit. The
 * default x86-64 build vectorises it 2 doubles at a time. */
#define VA_ADD_ROW_BODY                                                                                                \
  if (w == 1.0)                                                                                                        \
    for (int64_t t = 0; t < d; t++) a[t] += x[t];                                                                      \
  else                                                                                                                 \
    for (int64_t t = 0; t < d; t++) a[t] += w * x[t];
static void add_row_plain(double *restrict a, const float *restrict x, int64_t d, double w) { VA_ADD_ROW_BODY }
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void add_row_avx2(double *restrict a, const float *restrict x, int64_t d,
                                                         double w) {
  VA_ADD_ROW_BODY
}
__attribute__((target("avx512f"))) static void add_row_avx512(double *restrict a, const float *restrict x, int64_t d,
                                                              double w) {
  VA_ADD_ROW_BODY
}
#endif
typedef void (*add_row_fn)(double *restrict, const float *restrict, int64_t, double);
static add_row_fn add_row_pick(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return add_row_avx512;
  if (__builtin_cpu_supports("avx2")) return add_row_avx2;
#endif
  return add_row_plain;
}

void va_stats_accumulate(const float *X, int64_t n, int64_t d, const uint32_t *assign, const float *r, int64_t k,
                         const va_stats_rule_t *rule, double *acc) {
  (void)k;
  const int64_t W = VA_STATS_W(d);
  const add_row_fn add_row = add_row_pick();
  for (int64_t i = 0; i < n; i++) {
    uint32_t j = assign[i];
    double *a = acc + (int64_t)j * W;
    a[VA_ST_COUNT(d)] += 1.0;
    a[VA_ST_RSUM(d)] += r[i];
    double w = 1.0;
    if (rule->mode == VA_ROBUST_TRIM) {
      int64_t b = va_hist_bin(r[i], rule->rmax[j], rule->bins);
      if (b < rule->bin_lo[j] || b > rule->bin_hi[j]) continue;
    } else if (rule->mode == VA_ROBUST_HUBER) {
      double delta = rule->huber_delta[j], dist = sqrt((double)r[i]);
      if (delta > 0 && dist > delta) w = delta / dist;
    }
    a[VA_ST_WEIGHT(d)] += w;
    add_row(a, X + i * d, d, w);
  }
}

void va_stats_accumulate_mt(const float *X, int64_t n, int64_t d, const uint32_t *assign, const float *r, int64_t k,
                            const va_stats_rule_t *rule, double *acc, int threads) {
  const int64_t W = VA_STATS_W(d);
  if (threads <= 1 || n < 4096) {
    va_stats_accumulate(X, n, d, assign, r, k, rule, acc);
    return;
  }
  /* Thread t sums rows [t n / T, (t + 1) n / T) into its own buffer; buffers are added in thread order. */
  double *part = va_calloc((size_t)(threads - 1) * (size_t)(k * W), sizeof(double), "per-thread statistics");
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static, 1)
#endif
  for (int t = 0; t < threads; t++) {
    int64_t lo = n * t / threads, hi = n * (t + 1) / threads;
    double *dst = t == 0 ? acc : part + (size_t)(t - 1) * (size_t)(k * W);
    va_stats_accumulate(X + lo * d, hi - lo, d, assign + lo, r + lo, k, rule, dst);
  }
  for (int t = 1; t < threads; t++) {
    const double *src = part + (size_t)(t - 1) * (size_t)(k * W);
    for (int64_t i = 0; i < k * W; i++) acc[i] += src[i];
  }
  free(part);
}

static const float *sort_r;
static int cmp_by_r(const void *pa, const void *pb) {
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  return sort_r[a] < sort_r[b] ? -1 : sort_r[a] > sort_r[b] ? 1 : (a > b) - (a < b);
}

void va_trimmed_mean_ref(const float *X, const float *r, const int64_t *members, int64_t m, int64_t d, double trim_near,
                         double trim_far, double *mean) {
  int64_t *idx = va_malloc((size_t)m * sizeof *idx, "trim reference");
  memcpy(idx, members, (size_t)m * sizeof *idx);
  sort_r = r;
  qsort(idx, (size_t)m, sizeof *idx, cmp_by_r);
  int64_t lo = (int64_t)floor(trim_near * (double)m), hi = m - (int64_t)floor(trim_far * (double)m);
  for (int64_t t = 0; t < d; t++) mean[t] = 0;
  for (int64_t q = lo; q < hi; q++)
    for (int64_t t = 0; t < d; t++) mean[t] += X[idx[q] * d + t];
  for (int64_t t = 0; t < d; t++) mean[t] /= (double)(hi - lo);
  free(idx);
}

void va_huber_mean_ref(const float *X, const float *r, const int64_t *members, int64_t m, int64_t d, double delta,
                       double *mean) {
  double wsum = 0;
  for (int64_t t = 0; t < d; t++) mean[t] = 0;
  for (int64_t q = 0; q < m; q++) {
    double dist = sqrt((double)r[members[q]]);
    double w = dist > delta ? delta / dist : 1.0;
    wsum += w;
    for (int64_t t = 0; t < d; t++) mean[t] += w * X[members[q] * d + t];
  }
  for (int64_t t = 0; t < d; t++) mean[t] /= wsum;
}
