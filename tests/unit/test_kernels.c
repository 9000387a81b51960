/* test_kernels.c: CPU kernels against plain references on small random data.
 * - assign: both CPU kernels (tiled sgemm + argmin scan; fused AVX2, and its AVX-512 block bit for bit the AVX2 one
 * where the processor has it) vs the double-precision reference; identical assignments except near-ties (|r_fast -
 * r_ref| <= 1e-5 relative for any differing row), r within 1e-5 relative; bitwise identical for any tile size / thread
 * count;
 * - stats: plain mean (1e-12 relative), Huber mean (1e-12), trimmed mean by histogram (whole bins only,
 *   never more than asked, kept mean = naive mean of the kept members);
 * - update: the step rule, clamp and momentum against the formula.
 * Exits non-zero on any failure. Deterministic counter-based data. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/anneal.h"
#include "core/config.h"
#include "cpu/assign.h"
#include "cpu/stats.h"
#include "util/rng.h"

#include "../check.h" /* failures, CHECK */

static float *random_matrix(int64_t m, int64_t d, uint64_t seed, double offset) {
  float *M = malloc((size_t)(m * d) * sizeof(float));
  for (int64_t i = 0; i < m * d; i++) M[i] = (float)(offset + va_rand_normal(seed, 99, (uint64_t)i, 0));
  return M;
}

static void normalise_rows(float *M, int64_t m, int64_t d) {
  for (int64_t i = 0; i < m; i++) {
    double s = 0;
    for (int64_t t = 0; t < d; t++) s += (double)M[i * d + t] * M[i * d + t];
    for (int64_t t = 0; t < d; t++) M[i * d + t] = (float)(M[i * d + t] / sqrt(s));
  }
}

static void test_assign(int cosine, int kernel) {
  const int64_t n = 1531, d = 37, k = 53;
  float *X = random_matrix(n, d, 1, 0.3), *A = random_matrix(k, d, 2, 0.3);
  if (cosine) {
    normalise_rows(X, n, d);
    normalise_rows(A, k, d);
  }
  float *an = malloc(k * sizeof(float)), *r_ref = malloc(n * sizeof(float)), *r = malloc(n * sizeof(float)),
        *r2 = malloc(n * sizeof(float));
  uint32_t *a_ref = malloc(n * 4), *a = malloc(n * 4), *a2 = malloc(n * 4);
  va_row_norms(A, k, d, an);
  va_assign_ref(X, n, d, A, k, cosine, a_ref, r_ref);
  va_assign_opts_t o1 = {1, 0, kernel};
  va_assign_cpu(X, n, d, A, an, k, cosine, &o1, a, r);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; i++) {
    double tol = 1e-5 * fabs(r_ref[i]) + 1e-6;
    if (a[i] != a_ref[i]) {
      differ++;
      CHECK(fabs(r[i] - r_ref[i]) <= tol, "row %lld: near-tie expected, r %g vs %g", (long long)i, r[i], r_ref[i]);
    } else CHECK(fabs(r[i] - r_ref[i]) <= tol, "row %lld: r %g vs ref %g", (long long)i, r[i], r_ref[i]);
  }
  CHECK(differ * 100 < n, "%lld of %lld assignments differ from the reference", (long long)differ, (long long)n);
  const int64_t tiles[] = {1, 7, 64, 5000};
  for (int t = 0; t < 4; t++)
    for (int th = 1; th <= 2; th++) {
      va_assign_opts_t o = {th, tiles[t], kernel};
      va_assign_cpu(X, n, d, A, an, k, cosine, &o, a2, r2);
      CHECK(!memcmp(a, a2, n * 4) && !memcmp(r, r2, n * 4), "tile %lld threads %d not bitwise identical",
            (long long)tiles[t], th);
    }
  printf("assign (%s, %s kernel): %lld/%lld rows differ from the double reference (near-ties)\n",
         cosine ? "cosine" : "l2", kernel == VA_CPU_ASSIGN_FUSED ? "fused" : "sgemm", (long long)differ, (long long)n);
  free(X);
  free(A);
  free(an);
  free(r_ref);
  free(r);
  free(r2);
  free(a_ref);
  free(a);
  free(a2);
}

/* The fused kernel against the sgemm kernel on shapes that exercise its edges: rows not a multiple of
 * its 6-row blocks or 240-row work items, anchors not a multiple of 16 and more than one anchor chunk
 * (k x d beyond 192 KiB), d from 1 up. Same assignments except near-ties, r as computed for the winner. */
static void test_fused_shapes(void) {
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 3, 17}, {241, 128, 256}, {1000, 129, 1500}, {97, 8, 33}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t n = shapes[s][0], d = shapes[s][1], k = shapes[s][2];
    float *X = random_matrix(n, d, 10 + s, 0.0), *A = random_matrix(k, d, 20 + s, 0.0);
    float *an = malloc(k * sizeof(float)), *r1 = malloc(n * sizeof(float)), *r2 = malloc(n * sizeof(float));
    uint32_t *a1 = malloc(n * 4), *a2 = malloc(n * 4);
    va_row_norms(A, k, d, an);
    va_assign_opts_t sg = {2, 0, VA_CPU_ASSIGN_SGEMM}, fu = {2, 0, VA_CPU_ASSIGN_FUSED};
    va_assign_cpu(X, n, d, A, an, k, 0, &sg, a1, r1);
    va_assign_cpu(X, n, d, A, an, k, 0, &fu, a2, r2);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) {
      CHECK(a2[i] < k, "shape %zu row %lld: anchor %u out of range", s, (long long)i, a2[i]);
      if (a1[i] != a2[i]) {
        differ++;
        CHECK(fabs(r1[i] - r2[i]) <= 1e-5 * fabs(r1[i]) + 1e-6, "shape %zu row %lld: not a near-tie", s, (long long)i);
      } else CHECK(r1[i] == r2[i], "shape %zu row %lld: r differs", s, (long long)i);
    }
    CHECK(differ * 100 <= n, "shape %zu: %lld of %lld rows differ", s, (long long)differ, (long long)n);
    printf("fused vs sgemm, n %lld d %lld k %lld: %lld rows differ (near-ties)\n", (long long)n, (long long)d,
           (long long)k, (long long)differ);
    /* FUSED took the AVX-512 block where there is one: the AVX2 block must give the same bits */
    if (va_assign_fused_avx512_available()) {
      va_assign_opts_t f2 = {2, 0, VA_CPU_ASSIGN_FUSED_AVX2};
      va_assign_cpu(X, n, d, A, an, k, 0, &f2, a1, r1);
      CHECK(memcmp(a1, a2, (size_t)n * 4) == 0 && memcmp(r1, r2, (size_t)n * 4) == 0,
            "shape %zu: the AVX-512 and AVX2 blocks differ", s);
      va_assign_cpu(X, n, d, A, an, k, 1, &f2, a1, r1);
      va_assign_cpu(X, n, d, A, an, k, 1, &fu, a2, r2);
      CHECK(memcmp(a1, a2, (size_t)n * 4) == 0 && memcmp(r1, r2, (size_t)n * 4) == 0,
            "shape %zu cosine: the AVX-512 and AVX2 blocks differ", s);
      printf("  AVX-512 block vs AVX2 block: identical (l2, cosine)\n");
    } else if (s == 0) printf("  no AVX-512 here: only the AVX2 block tested\n");
    free(X);
    free(A);
    free(an);
    free(r1);
    free(r2);
    free(a1);
    free(a2);
  }
}

static double rel(double a, double b) { return fabs(a - b) / (fabs(b) > 1e-30 ? fabs(b) : 1.0); }

static void test_stats(void) {
  const int64_t n = 4000, d = 37, k = 5, bins = 64; /* d: 4 vectors of 8 doubles and a tail */
  float *X = random_matrix(n, d, 3, 0.0), *r = malloc(n * sizeof(float));
  uint32_t *a = malloc(n * 4);
  for (int64_t i = 0; i < n; i++) {
    a[i] = (uint32_t)(va_rand_u64(4, 1, (uint64_t)i, 0) % k);
    r[i] = (float)(va_rand_unit(4, 2, (uint64_t)i, 0) * (1 + a[i]));
  }
  const int64_t W = VA_STATS_W(d);
  double *acc = calloc((size_t)(k * W), sizeof(double)), *mean = malloc(d * sizeof(double));
  int64_t *members = malloc(n * sizeof(int64_t));
  /* none */
  va_stats_rule_t none = {.mode = VA_ROBUST_NONE};
  va_stats_accumulate(X, n, d, a, r, k, &none, acc);
  for (int64_t j = 0; j < k; j++) {
    int64_t m = 0;
    double rs = 0;
    for (int64_t i = 0; i < n; i++)
      if (a[i] == j) {
        members[m++] = i;
        rs += r[i];
      }
    CHECK(acc[j * W + VA_ST_COUNT(d)] == m, "count");
    CHECK(rel(acc[j * W + VA_ST_RSUM(d)], rs) < 1e-12, "rsum");
    for (int64_t t = 0; t < d; t++) {
      double s = 0;
      for (int64_t q = 0; q < m; q++) s += X[members[q] * d + t];
      CHECK(rel(acc[j * W + t] / acc[j * W + VA_ST_WEIGHT(d)], s / m) < 1e-12, "mean anchor %lld dim %lld",
            (long long)j, (long long)t);
      /* the rows added in order, whatever vector width the inner loop ran at: the same bits */
      CHECK(acc[j * W + t] == s, "sum anchor %lld dim %lld: %.17g, in order %.17g", (long long)j, (long long)t,
            acc[j * W + t], s);
    }
  }
  /* huber */
  double delta[5] = {0.3, 0.5, 0.7, 0.9, 1.1};
  va_stats_rule_t hub = {.mode = VA_ROBUST_HUBER, .huber_delta = delta};
  memset(acc, 0, (size_t)(k * W) * sizeof(double));
  va_stats_accumulate(X, n, d, a, r, k, &hub, acc);
  for (int64_t j = 0; j < k; j++) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
      if (a[i] == j) members[m++] = i;
    va_huber_mean_ref(X, r, members, m, d, delta[j], mean);
    for (int64_t t = 0; t < d; t++)
      CHECK(rel(acc[j * W + t] / acc[j * W + VA_ST_WEIGHT(d)], mean[t]) < 1e-10, "huber anchor %lld", (long long)j);
  }
  /* trim */
  float rmax[5];
  int64_t rarg[5];
  va_farthest_local(a, r, n, k, rmax, rarg);
  for (int64_t j = 0; j < k; j++) CHECK(rarg[j] >= 0 && r[rarg[j]] == rmax[j], "farthest");
  double *hist = calloc((size_t)(k * bins), sizeof(double));
  int32_t lo[5], hi[5];
  va_hist_accumulate(a, r, n, k, rmax, bins, hist);
  va_trim_bins(hist, k, bins, 0.1, 0.2, lo, hi);
  va_stats_rule_t trim = {.mode = VA_ROBUST_TRIM, .bin_lo = lo, .bin_hi = hi, .rmax = rmax, .bins = bins};
  memset(acc, 0, (size_t)(k * W) * sizeof(double));
  va_stats_accumulate(X, n, d, a, r, k, &trim, acc);
  for (int64_t j = 0; j < k; j++) {
    int64_t m = 0, near = 0, far = 0, kept = 0;
    for (int64_t i = 0; i < n; i++)
      if (a[i] == j) members[m++] = i;
    double kept_sum0 = 0;
    for (int64_t q = 0; q < m; q++) {
      int64_t b = va_hist_bin(r[members[q]], rmax[j], bins);
      if (b < lo[j]) near++;
      else if (b > hi[j]) far++;
      else {
        kept++;
        kept_sum0 += X[members[q] * d];
      }
    }
    CHECK(near <= (int64_t)floor(0.1 * m) && far <= (int64_t)floor(0.2 * m), "trim drops more than asked");
    CHECK(near + hist[j * bins + lo[j]] > floor(0.1 * m), "trim near: the next whole bin would have fit");
    CHECK(far + hist[j * bins + hi[j]] > floor(0.2 * m), "trim far: the next whole bin would have fit");
    CHECK(acc[j * W + VA_ST_WEIGHT(d)] == kept, "trim weight");
    CHECK(rel(acc[j * W] / kept, kept_sum0 / kept) < 1e-12, "trim mean");
    va_trimmed_mean_ref(X, r, members, m, d, 0.1, 0.2, mean);
    /* Bins are 1/64 of the range: the histogram mean stays close to the exact trimmed mean. */
    CHECK(fabs(acc[j * W] / kept - mean[0]) < 0.05, "trim mean %g far from exact %g", acc[j * W] / kept, mean[0]);
  }
  printf("stats: none, huber and trim checked on %lld rows, %lld anchors\n", (long long)n, (long long)k);
  free(X);
  free(r);
  free(a);
  free(acc);
  free(mean);
  free(members);
  free(hist);
}

static void test_update(void) {
  float a[3] = {0, 1, 2};
  double v[3] = {0, 0, 0}, sum[3] = {10, 10, 10};
  double eta = va_eta(0.1, 1.0);
  CHECK(eta == 0.05, "eta(T=1, lr=0.1) = %g", eta);
  va_update_anchor(a, v, sum, 2.0, 3, eta, 0.1, 0.0); /* mu = 5: steps 0.25, 0.2, 0.15 clamp to 0.1 */
  CHECK(fabsf(a[0] - 0.1f) < 1e-7 && fabsf(a[1] - 1.1f) < 1e-7 && fabsf(a[2] - 2.1f) < 1e-7, "clamp: %g %g %g", a[0],
        a[1], a[2]);
  float b[1] = {0};
  double vb[1] = {1.0}, sb[1] = {4.0};
  va_update_anchor(b, vb, sb, 1.0, 1, 0.5, 0, 0.5); /* step 2, v = 0.5*1 + 0.5*2 = 1.5 */
  CHECK(fabs(vb[0] - 1.5) < 1e-15 && fabsf(b[0] - 1.5f) < 1e-7, "momentum: v %g a %g", vb[0], b[0]);
  printf("update: eta, clamp and momentum checked\n");
}

int main(void) {
  for (int kernel = VA_CPU_ASSIGN_SGEMM; kernel <= VA_CPU_ASSIGN_FUSED; kernel++) {
    if (kernel == VA_CPU_ASSIGN_FUSED && !va_assign_fused_available()) {
      printf("assign: no AVX2/FMA here, fused kernel not tested\n");
      continue;
    }
    test_assign(0, kernel);
    test_assign(1, kernel);
  }
  if (va_assign_fused_available()) test_fused_shapes();
  test_stats();
  test_update();
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
  return failures ? 1 : 0;
}
