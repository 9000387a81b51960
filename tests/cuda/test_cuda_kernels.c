/* test_cuda_kernels.c: every CUDA kernel against the CPU kernels (kernels/assign.h, kernels/stats.h).
 * Exits 77 ("SKIP: no CUDA device") without a device, 1 on any failure, 0 when all pass.
 * Tolerances (docs/cuda.md):
 *  - assign: a row's anchor equals the CPU's (va_assign_cpu) except near-ties; for a row
 *    that differs, the exact distances to the two anchors may differ by at most
 *    c_p * ||x|| * max_j ||A_j|| (the rounding bound of the product: c = 2e-5 fp32, 8 * 2^-10 tf32,
 *    8 * 2^-11 fp16, 8 * 2^-8 bf16), and the share of such rows is capped (0.5% fp32, 20% tf32 and
 *    fp16, 60% bf16 on this clustered data: a sanity cap; the bound is the real criterion). The DIRECT
 *    path computes the CPU fused kernel's values: where the CPU runs that kernel, every row equal.
 *  - r: the exact distance to the GPU's anchor: |r - va_row_distance| <= 1e-6 |r| + 1e-12 for every
 *    precision (r is recomputed from the rows in double, whatever the product precision).
 *  - fp16/bf16 are the rows' storage precision: every CPU reference runs on the rows rounded to 16 bits
 *    on the host (rows_as_stored), and rows fetched back are those values bit for bit.
 *  - changed count, farthest (rmax bits and row), histogram: exactly the CPU's on the GPU's a and r.
 *  - the TMA kernel with its anchor tiles split over several blocks a row block: a and r bit for bit
 *    the unsplit pass's.
 *  - rows grouped by segment (the sorted statistics' first step), counting and radix sort: the rows in a stable
 *    sort's order bit for bit, segment bounds exact.
 *  - statistics and split sums: |gpu - cpu| <= 1e-9 (|cpu| + count_j * max|x|); counts exact; the
 *    SORT reduction is bit-for-bit the same on a second run; values appended to the statistics come
 *    back exactly.
 *  - fetched rows: bit-for-bit. Anchor norms computed on the device: bit-for-bit va_row_norms.
 *  - out-of-core (rows streamed from pinned host memory in chunks) against a resident context on the
 *    same data: a[], r[], changed counts, farthest, histogram bit-for-bit on the fused path (the same
 *    kernels see each row; the GEMM path: near-ties only, checked against the CPU as above);
 *    statistics and split sums within 1e-12 (|resident| + count_j * max|x|) (the chunks' sums are
 *    added in chunk order), counts exact; and every CPU check above on the streamed context. */
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/anneal.h"
#include "core/config.h"
#include "cpu/assign.h"
#include "cuda/kernels.h"
#include "cuda/probe.h"
#include "cpu/stats.h"
#include "util/util.h"

#include "../check.h" /* failures, CHECK */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double unif(void) { return ((double)(rnd() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
static double normal(void) { return sqrt(-2.0 * log(unif())) * cos(6.283185307179586 * unif()); }

static void normalise(float *a, int64_t d) {
  double s = 0;
  for (int64_t t = 0; t < d; t++) s += (double)a[t] * a[t];
  if (s > 0)
    for (int64_t t = 0; t < d; t++) a[t] = (float)(a[t] / sqrt(s));
}

/* Clustered rows: 40 centres ~ N(0,1), members at 0.35 N(0,1) around them. */
static float *make_rows(int64_t n, int64_t d, int cosine) {
  int64_t nc = 40;
  float *C = malloc((size_t)(nc * d) * sizeof(float)), *X = malloc((size_t)(n * d) * sizeof(float));
  for (int64_t e = 0; e < nc * d; e++) C[e] = (float)normal();
  for (int64_t i = 0; i < n; i++) {
    int64_t c = (int64_t)(rnd() % (uint64_t)nc);
    for (int64_t t = 0; t < d; t++) X[i * d + t] = C[c * d + t] + 0.35f * (float)normal();
    if (cosine) normalise(X + i * d, d);
  }
  free(C);
  return X;
}
/* Anchors near rows: a random row plus 0.05 N(0,1). */
static float *make_anchors(const float *X, int64_t n, int64_t d, int64_t k, int cosine, double noise) {
  float *A = malloc((size_t)(k * d) * sizeof(float));
  for (int64_t j = 0; j < k; j++) {
    int64_t i = (int64_t)(rnd() % (uint64_t)n);
    for (int64_t t = 0; t < d; t++) A[j * d + t] = X[i * d + t] + (float)(noise * normal());
    if (cosine) normalise(A + j * d, d);
  }
  return A;
}

static const char *pname[] = {"fp32", "tf32", "fp16", "bf16"};

/* The rows as a context of precision prec holds them: fp16/bf16 are the rows' storage precision, so
 * their values rounded to nearest (ties to even) in 16 bits (cuda_context.cu convert_rows); float32
 * otherwise. Written out bit by bit here so that the host reference does not borrow CUDA's conversion. */
/* x with its low `drop` mantissa bits rounded away, to nearest, ties to even (a carry into the exponent
 * is the right result). */
static float round_low_bits(float x, int drop) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u += (1u << (drop - 1)) - 1u + ((u >> drop) & 1u);
  u &= ~((1u << drop) - 1u);
  memcpy(&x, &u, 4);
  return x;
}
static float round_fp16(float x) {
  float ax = fabsf(x);
  if (!(ax >= 6.103515625e-05f)) return rintf(x * 16777216.0f) / 16777216.0f; /* fp16 subnormal range: steps of 2^-24 */
  if (ax >= 65520.0f) return x > 0 ? INFINITY : -INFINITY;
  return round_low_bits(x, 13);
}
static float *rows_as_stored(const float *X, int64_t count, int prec) {
  float *Y = malloc((size_t)count * 4);
  for (int64_t e = 0; e < count; e++) Y[e] = prec == 2 ? round_fp16(X[e]) : prec == 3 ? round_low_bits(X[e], 16) : X[e];
  return Y;
}
static const double tie_c[] = {2e-5, 8.0 / 1024, 8.0 / 2048, 8.0 / 256};
static const double tie_frac[] = {0.005, 0.20, 0.20, 0.60};

static double norm2(const float *x, int64_t d) {
  double s = 0;
  for (int64_t t = 0; t < d; t++) s += (double)x[t] * x[t];
  return sqrt(s);
}

/* One assign pass checked against the CPU's a/r. Returns the GPU assignment in ga/gr. */
static void check_assign(va_cuda_t *ctx, const float *X, int64_t n, int64_t d, const float *A, int64_t k, int cosine,
                         int prec, const uint32_t *ca, const float *cr, uint32_t *ga, float *gr, const char *tag) {
  va_cuda_debug_poison(ctx);
  int64_t changed = va_cuda_assign(ctx, cosine);
  CHECK(changed == n, "%s: changed %lld after poisoning, want every row (%lld)", tag, (long long)changed, (long long)n);
  va_cuda_download(ctx, ga, gr);
  double amax = 0;
  for (int64_t j = 0; j < k; j++) {
    double a = norm2(A + j * d, d);
    if (a > amax) amax = a;
  }
  int64_t mism = 0, bad_r = 0, bad_tie = 0, unwritten = 0;
  double worst_tie = 0, worst_r = 0;
  for (int64_t i = 0; i < n; i++) {
    if (ga[i] >= (uint32_t)k || !(gr[i] == gr[i])) {
      unwritten++;
      continue;
    }
    float rg = va_row_distance(X + i * d, A + (int64_t)ga[i] * d, d, cosine);
    double er = fabs((double)gr[i] - rg);
    if (er > 1e-6 * fabs(rg) + 1e-12) bad_r++;
    if (er / (fabs(rg) + 1e-30) > worst_r) worst_r = er / (fabs(rg) + 1e-30);
    if (ga[i] != ca[i]) {
      mism++;
      double bound = tie_c[prec] * norm2(X + i * d, d) * amax;
      double gap = fabs((double)rg - (double)cr[i]);
      if (gap / bound > worst_tie) worst_tie = gap / bound;
      if (gap > bound) {
        if (bad_tie < 5)
          printf("  %s row %lld: gpu anchor %u (r %.9g) vs cpu %u (r %.9g): gap %.3g > bound %.3g\n", tag, (long long)i,
                 ga[i], rg, ca[i], cr[i], gap, bound);
        bad_tie++;
      }
    }
  }
  double frac = n ? (double)mism / (double)n : 0;
  printf("  %-34s mismatches %6lld (%.4f%%, cap %.1f%%), worst gap/bound %.3f, worst r rel err %.2g\n", tag,
         (long long)mism, 100 * frac, 100 * tie_frac[prec], worst_tie, worst_r);
  CHECK(unwritten == 0, "%s: %lld rows not written", tag, (long long)unwritten);
  CHECK(bad_r == 0, "%s: %lld rows with r off the exact distance", tag, (long long)bad_r);
  CHECK(bad_tie == 0, "%s: %lld differing rows beyond the near-tie bound", tag, (long long)bad_tie);
  CHECK(frac <= tie_frac[prec], "%s: %.3f%% of rows differ (cap %.1f%%)", tag, 100 * frac, 100 * tie_frac[prec]);
}

/* The statistics as the backend gets them on one rank: computed on the device, then fetched. */
/* The side pass over listed rows (unsorted, a repeat, the last row; n / 4 of them, the most it takes)
 * against the full pass just run (ga, gr): each listed row's anchor and distance bit for bit, the
 * rows' own a[] and r[] left as they were; a list of more than n / 4 rows declined. On the GEMM path
 * (gemm) cuBLAS may take another algorithm for another row count, so there a listed row may name
 * another anchor at a near-tie, held to check_assign's rules against the CPU's distance cr: a real
 * anchor, its exact distance, within the rounding bound of the nearest, and no more such rows than
 * the pass's cap. */
static void check_assign_listed(va_cuda_t *ctx, const float *X, int64_t n, int64_t d, const float *A, int64_t k,
                                int cosine, int prec, int gemm, const float *cr, const uint32_t *ga, const float *gr,
                                const char *tag) {
  const int64_t m = n / 4;
  if (m < 2) return;
  int64_t *rows = malloc((size_t)(m + 1) * 8);
  uint32_t *la = malloc((size_t)(m + 1) * 4), *after = malloc((size_t)n * 4);
  float *lr = malloc((size_t)(m + 1) * 4), *rafter = malloc((size_t)n * 4);
  for (int64_t q = 0; q < m; q++) rows[q] = (q * 7919 + 13) % n;
  rows[1] = rows[0];
  rows[m - 1] = n - 1;
  CHECK(va_cuda_assign_listed(ctx, cosine, rows, m, la, lr) == 1, "%s: listed pass of %lld rows declined", tag,
        (long long)m);
  double amax = 0;
  for (int64_t j = 0; j < k; j++) amax = fmax(amax, norm2(A + j * d, d));
  int64_t bad = 0, ties = 0;
  for (int64_t q = 0; q < m; q++) {
    const int64_t i = rows[q];
    if (la[q] == ga[i]) {
      bad += memcmp(&lr[q], &gr[i], 4) != 0;
      continue;
    }
    int tie = gemm && la[q] < (uint32_t)k;
    if (tie) {
      const float rl = va_row_distance(X + i * d, A + (int64_t)la[q] * d, d, cosine);
      tie = fabs((double)lr[q] - rl) <= 1e-6 * fabs(rl) + 1e-12 &&
            fabs((double)rl - (double)cr[i]) <= tie_c[prec] * norm2(X + i * d, d) * amax;
    }
    ties += tie;
    bad += !tie;
  }
  CHECK(bad == 0, "%s: %lld of %lld listed rows differ from the full pass (%lld near-ties allowed)", tag,
        (long long)bad, (long long)m, (long long)ties);
  CHECK(ties <= tie_frac[prec] * (double)m, "%s: %lld of %lld listed rows at near-ties (cap %.1f%%)", tag,
        (long long)ties, (long long)m, 100 * tie_frac[prec]);
  if (ties) printf("  %s: %lld listed rows name another anchor at a near-tie\n", tag, (long long)ties);
  va_cuda_download(ctx, after, rafter);
  CHECK(memcmp(after, ga, (size_t)n * 4) == 0 && memcmp(rafter, gr, (size_t)n * 4) == 0,
        "%s: the listed pass changed the rows' own a[] or r[]", tag);
  rows[m] = 0;
  CHECK(n < 8 || va_cuda_assign_listed(ctx, cosine, rows, n / 4 + 1, la, lr) == 0,
        "%s: a list of more than n / 4 rows taken", tag);
  free(rows);
  free(la);
  free(lr);
  free(after);
  free(rafter);
}

static void gpu_stats(va_cuda_t *ctx, const va_stats_rule_t *rule, int64_t k, int64_t d, double *out) {
  va_cuda_fetch_f64(ctx, va_cuda_stats_device(ctx, rule, NULL, 0), k * VA_STATS_W(d), out);
}

/* rel: 1e-9 against the CPU, 1e-12 between a streamed and a resident context. */
static void check_acc_tol(const double *g, const double *c, int64_t k, int64_t d, double xmax, double rel,
                          const char *tag) {
  int64_t W = VA_STATS_W(d), bad = 0;
  double worst = 0;
  for (int64_t j = 0; j < k; j++) {
    double cnt = c[j * W + VA_ST_COUNT(d)];
    for (int64_t t = 0; t < W; t++) {
      double gv = g[j * W + t], cv = c[j * W + t];
      double tol;
      if (t == VA_ST_COUNT(d)) tol = 0;
      else if (t < d) tol = rel * (fabs(cv) + cnt * xmax);
      else tol = rel * fabs(cv) + 1e-300;
      double e = fabs(gv - cv);
      if (!(e <= tol)) {
        if (bad < 5)
          printf("  %s: anchor %lld field %lld: gpu %.17g cpu %.17g\n", tag, (long long)j, (long long)t, gv, cv);
        bad++;
      }
      if (tol > 0 && e / tol > worst) worst = e / tol;
    }
  }
  printf("  %-34s worst err/tol %.3g\n", tag, worst);
  CHECK(bad == 0, "%s: %lld statistics entries off", tag, (long long)bad);
}
static void check_acc(const double *g, const double *c, int64_t k, int64_t d, double xmax, const char *tag) {
  check_acc_tol(g, c, k, d, xmax, 1e-9, tag);
}

/* The split's 2-means sums as anneal.c computes them. */
static void split_ref(const float *X, int64_t n, int64_t d, const uint32_t *a, const int64_t *slot, const float *cent,
                      int64_t m, double *sums) {
  int64_t SW = d + 1;
  memset(sums, 0, (size_t)(2 * m * SW) * sizeof(double));
  for (int64_t i = 0; i < n; i++) {
    int64_t q = slot[a[i]];
    if (q < 0) continue;
    const float *x = X + i * d;
    double d0 = 0, d1 = 0;
    for (int64_t u = 0; u < d; u++) {
      double e0 = (double)x[u] - cent[2 * q * d + u], e1 = (double)x[u] - cent[(2 * q + 1) * d + u];
      d0 += e0 * e0;
      d1 += e1 * e1;
    }
    double *s = sums + (2 * q + (d1 < d0)) * SW;
    for (int64_t u = 0; u < d; u++) s[u] += x[u];
    s[d] += 1;
  }
}

static void check_deferred_and_update(va_cuda_t *ctx, const float *X, int64_t n, int64_t d, int64_t k, int cosine,
                                      const uint32_t *ga, const float *gr, const va_stats_rule_t *rules, double xmax,
                                      const char *tag);

static void check_reductions(va_cuda_t *ctx, const float *X, int64_t n, int64_t d, int64_t k, int cosine,
                             const uint32_t *ga, const float *gr, const char *tag) {
  char t2[160];
  int64_t W = VA_STATS_W(d), bins = 64;
  double xmax = 0;
  for (int64_t e = 0; e < n * d; e++)
    if (fabs(X[e]) > xmax) xmax = fabs(X[e]);
  /* farthest */
  float *rmax_g = malloc((size_t)k * 4), *rmax_c = malloc((size_t)k * 4);
  int64_t *rarg_g = malloc((size_t)k * 8), *rarg_c = malloc((size_t)k * 8);
  va_cuda_farthest(ctx, rmax_g, rarg_g);
  va_farthest_local(ga, gr, n, k, rmax_c, rarg_c);
  int64_t bad = 0;
  for (int64_t j = 0; j < k; j++)
    if (memcmp(&rmax_g[j], &rmax_c[j], 4) != 0 || rarg_g[j] != rarg_c[j]) {
      if (bad < 5)
        printf("  farthest anchor %lld: gpu %.9g row %lld, cpu %.9g row %lld\n", (long long)j, rmax_g[j],
               (long long)rarg_g[j], rmax_c[j], (long long)rarg_c[j]);
      bad++;
    }
  CHECK(bad == 0, "%s farthest: %lld anchors differ", tag, (long long)bad);
  /* histogram */
  double *hg = calloc((size_t)(k * bins), 8), *hc = calloc((size_t)(k * bins), 8);
  va_cuda_hist(ctx, rmax_c, bins, hg);
  va_hist_accumulate(ga, gr, n, k, rmax_c, bins, hc);
  bad = 0;
  for (int64_t e = 0; e < k * bins; e++) bad += hg[e] != hc[e];
  CHECK(bad == 0, "%s hist: %lld bins differ", tag, (long long)bad);
  /* statistics: none, trim, huber; both reductions */
  int32_t *lo = malloc((size_t)k * 4), *hi = malloc((size_t)k * 4);
  va_trim_bins(hc, k, bins, 0.1, 0.1, lo, hi);
  double *delta = malloc((size_t)k * 8);
  double *cg = malloc((size_t)(k * W) * 8), *cc = malloc((size_t)(k * W) * 8), *cg2 = malloc((size_t)(k * W) * 8);
  memset(cc, 0, (size_t)(k * W) * 8);
  va_stats_rule_t none = {.mode = VA_ROBUST_NONE};
  va_stats_accumulate(X, n, d, ga, gr, k, &none, cc);
  for (int64_t j = 0; j < k; j++) {
    double cnt = cc[j * W + VA_ST_COUNT(d)];
    delta[j] = (j % 5 == 4 || cnt == 0) ? 0.0 : 1.0 * sqrt(cc[j * W + VA_ST_RSUM(d)] / cnt);
  }
  va_stats_rule_t rules[3] = {{.mode = VA_ROBUST_NONE},
                              {.mode = VA_ROBUST_TRIM, .bin_lo = lo, .bin_hi = hi, .rmax = rmax_c, .bins = bins},
                              {.mode = VA_ROBUST_HUBER, .huber_delta = delta}};
  const char *rname[3] = {"none", "trim", "huber"};
  for (int ri = 0; ri < 3; ri++) {
    memset(cc, 0, (size_t)(k * W) * 8);
    va_stats_accumulate(X, n, d, ga, gr, k, &rules[ri], cc);
    for (int v = 0; v < 2; v++) {
      va_cuda_set_stats_variant(ctx, v);
      gpu_stats(ctx, &rules[ri], k, d, cg);
      snprintf(t2, sizeof t2, "%s stats %s %s", tag, rname[ri], v ? "atomic" : "sort");
      check_acc(cg, cc, k, d, xmax, t2);
      if (v == VA_CUDA_STATS_SORT) {
        gpu_stats(ctx, &rules[ri], k, d, cg2);
        CHECK(memcmp(cg, cg2, (size_t)(k * W) * 8) == 0, "%s: sorted reduction not reproducible bit for bit", t2);
      }
    }
  }
  va_cuda_set_stats_variant(ctx, VA_CUDA_STATS_SORT);
  /* values appended to the statistics (the loop's changed rows and stop flag) */
  {
    const double x[2] = {12345.0, -0.375};
    double *cx = malloc((size_t)(k * W + 2) * 8);
    va_cuda_fetch_f64(ctx, va_cuda_stats_device(ctx, &rules[0], x, 2), k * W + 2, cx);
    gpu_stats(ctx, &rules[0], k, d, cg);
    CHECK(memcmp(cx, cg, (size_t)(k * W) * 8) == 0 && cx[k * W] == x[0] && cx[k * W + 1] == x[1],
          "%s: statistics with appended values", tag);
    free(cx);
  }
  /* split: a quarter of the anchors (at most 40), seeded by two random rows each */
  int64_t m = k / 4 > 40 ? 40 : (k / 4 > 0 ? k / 4 : 1);
  int64_t *slot = malloc((size_t)k * 8);
  for (int64_t j = 0; j < k; j++) slot[j] = -1;
  for (int64_t q = 0; q < m; q++) slot[(q * 7 + 3) % k] = q;
  /* anchors chosen twice keep the last slot; the rest simply get no members */
  float *cent = malloc((size_t)(2 * m * d) * 4);
  for (int64_t h = 0; h < 2 * m; h++) {
    int64_t i = (int64_t)(rnd() % (uint64_t)n);
    memcpy(cent + h * d, X + i * d, (size_t)d * 4);
  }
  double *sg = calloc((size_t)(2 * m * (d + 1)), 8), *sc = malloc((size_t)(2 * m * (d + 1)) * 8);
  va_cuda_split_accumulate(ctx, slot, m, cent, sg);
  split_ref(X, n, d, ga, slot, cent, m, sc);
  bad = 0;
  for (int64_t h = 0; h < 2 * m; h++) {
    double cnt = sc[h * (d + 1) + d];
    if (sg[h * (d + 1) + d] != cnt) bad++;
    for (int64_t u = 0; u < d; u++)
      if (!(fabs(sg[h * (d + 1) + u] - sc[h * (d + 1) + u]) <= 1e-9 * (fabs(sc[h * (d + 1) + u]) + cnt * xmax))) bad++;
  }
  CHECK(bad == 0, "%s split sums: %lld entries off", tag, (long long)bad);
  /* rows back */
  int64_t rows[64];
  for (int q = 0; q < 64; q++) rows[q] = (int64_t)(rnd() % (uint64_t)n);
  rows[0] = 0;
  rows[63] = n - 1;
  float *got = malloc((size_t)(64 * d) * 4);
  va_cuda_get_rows(ctx, rows, 64, got);
  bad = 0;
  for (int q = 0; q < 64; q++) bad += memcmp(got + q * d, X + rows[q] * d, (size_t)d * 4) != 0;
  CHECK(bad == 0, "%s get_rows: %lld rows differ", tag, (long long)bad);
  /* remap: a rotation of the anchor ids, then back */
  int64_t *map = malloc((size_t)k * 8), *inv = malloc((size_t)k * 8);
  for (int64_t j = 0; j < k; j++) {
    map[j] = (j + 1) % k;
    inv[(j + 1) % k] = j;
  }
  uint32_t *ra = malloc((size_t)n * 4);
  va_cuda_remap_assign(ctx, map, k);
  va_cuda_download(ctx, ra, NULL);
  bad = 0;
  for (int64_t i = 0; i < n; i++) bad += ra[i] != (uint32_t)map[ga[i]];
  va_cuda_remap_assign(ctx, inv, k);
  va_cuda_download(ctx, ra, NULL);
  for (int64_t i = 0; i < n; i++) bad += ra[i] != ga[i];
  CHECK(bad == 0, "%s remap: %lld rows wrong", tag, (long long)bad);
  printf("  %-34s farthest, hist, split, get_rows, remap checked\n", tag);
  check_deferred_and_update(ctx, X, n, d, k, cosine, ga, gr, rules, xmax, tag);
  free(rmax_g);
  free(rmax_c);
  free(rarg_g);
  free(rarg_c);
  free(hg);
  free(hc);
  free(lo);
  free(hi);
  free(delta);
  free(cg);
  free(cc);
  free(cg2);
  free(slot);
  free(cent);
  free(sg);
  free(sc);
  free(got);
  free(map);
  free(inv);
  free(ra);
}

/* The annealing loop's device path: a deferred assign pass (the changed count arrives with the
 * statistics, r computed by the statistics pass for none and huber, or first when something else reads
 * it) against the synchronous pass's a / r and the CPU statistics; then the device update against
 * va_update_anchor + va_unit_normalise, bit for bit, and the scalars the loop takes back. Leaves the
 * context's anchors as it found them (the caller's, with zero momentum). */
static void check_deferred_and_update(va_cuda_t *ctx, const float *X, int64_t n, int64_t d, int64_t k, int cosine,
                                      const uint32_t *ga, const float *gr, const va_stats_rule_t *rules, double xmax,
                                      const char *tag) {
  char t2[160];
  const int64_t W = VA_STATS_W(d);
  double *cd = malloc((size_t)(k * W + 2) * 8), *cc = malloc((size_t)(k * W) * 8);
  uint32_t *da = malloc((size_t)n * 4);
  float *dr = malloc((size_t)n * 4);
  const double x2[2] = {-1.0, 0.25};
  const char *rname[3] = {"none", "trim", "huber"};
  for (int ri = 0; ri < 3; ri++) {
    /* trim asks for r in the pass (its histogram comes first); none and huber leave it to the statistics */
    va_cuda_debug_poison(ctx);
    va_cuda_assign_deferred(ctx, cosine, ri == 1);
    va_cuda_fetch_f64(ctx, va_cuda_stats_device(ctx, &rules[ri], x2, 2), k * W + 2, cd);
    va_cuda_download(ctx, da, dr);
    memset(cc, 0, (size_t)(k * W) * 8);
    va_stats_accumulate(X, n, d, ga, gr, k, &rules[ri], cc);
    snprintf(t2, sizeof t2, "%s deferred %s", tag, rname[ri]);
    CHECK(cd[k * W] == (double)n && cd[k * W + 1] == x2[1], "%s: appended %g %g, want the count %lld and %g", t2,
          cd[k * W], cd[k * W + 1], (long long)n, x2[1]);
    CHECK(memcmp(da, ga, (size_t)n * 4) == 0, "%s: a[] differs from the synchronous pass", t2);
    int64_t bad_r = 0, diff_r = 0;
    for (int64_t i = 0; i < n; i++) {
      bad_r += !(fabs((double)dr[i] - gr[i]) <= 1e-6 * fabs(gr[i]) + 1e-12);
      diff_r += memcmp(&dr[i], &gr[i], 4) != 0;
    }
    CHECK(bad_r == 0, "%s: %lld rows with r off the synchronous pass's", t2, (long long)bad_r);
    if (ri == 1) CHECK(diff_r == 0, "%s: r from the pass differs from the synchronous one", t2);
    printf("  %-34s count %.0f, r bits differing from the r kernel's: %lld\n", t2, cd[k * W], (long long)diff_r);
    check_acc(cd, cc, k, d, xmax, t2);
  }
  /* a second deferred pass with the same anchors: nothing changed; r owed, then read by the histogram */
  va_cuda_assign_deferred(ctx, cosine, 0);
  va_cuda_fetch_f64(ctx, va_cuda_stats_device(ctx, &rules[0], x2, 2), k * W + 2, cd);
  CHECK(cd[k * W] == 0, "%s deferred: %g rows changed against an identical pass", tag, cd[k * W]);
  va_cuda_assign_deferred(ctx, cosine, 0);
  {
    const int64_t bins = 32;
    float *rmax = malloc((size_t)k * 4);
    for (int64_t j = 0; j < k; j++) rmax[j] = 0;
    for (int64_t i = 0; i < n; i++)
      if (gr[i] > rmax[ga[i]]) rmax[ga[i]] = gr[i];
    double *hg = calloc((size_t)(k * bins), 8), *hc = calloc((size_t)(k * bins), 8);
    va_cuda_hist(ctx, rmax, bins, hg);
    va_hist_accumulate(ga, gr, n, k, rmax, bins, hc);
    int64_t bad = 0;
    for (int64_t e = 0; e < k * bins; e++) bad += hg[e] != hc[e];
    CHECK(bad == 0, "%s deferred: histogram after an owed r: %lld bins differ", tag, (long long)bad);
    free(rmax);
    free(hg);
    free(hc);
  }
  /* the device update: statistics of the current pass, a random momentum, a clamp that bites */
  va_cuda_assign_deferred(ctx, cosine, 0);
  double *dacc = va_cuda_stats_device(ctx, &rules[2], x2, 2);
  va_cuda_fetch_f64(ctx, dacc, k * W + 2, cd);
  float *A0 = malloc((size_t)(k * d) * 4), *A1 = malloc((size_t)(k * d) * 4), *Akeep = malloc((size_t)(k * d) * 4);
  double *v0 = malloc((size_t)(k * d) * 8), *v1 = malloc((size_t)(k * d) * 8);
  va_cuda_get_anchors(ctx, A0, v0);
  memcpy(Akeep, A0, (size_t)(k * d) * 4);
  for (int64_t e = 0; e < k * d; e++) v0[e] = 0.002 * normal();
  va_cuda_set_velocity(ctx, v0, k);
  const double eta = 0.35, beta = 0.6, max_step = 0.004;
  double *sc = calloc((size_t)(k * W + 2), 8);
  va_cuda_queue_scalars(ctx, dacc, 2);
  va_cuda_update_anchors(ctx, eta, beta, max_step, cosine);
  va_cuda_take_scalars(ctx, 2, sc);
  int64_t bad = 0, moved = 0, clamped = 0;
  for (int64_t j = 0; j < k; j++)
    for (int f = 0; f < 3; f++) bad += memcmp(&sc[j * W + d + f], &cd[j * W + d + f], 8) != 0;
  bad += sc[k * W] != cd[k * W] || sc[k * W + 1] != cd[k * W + 1];
  CHECK(bad == 0, "%s: the scalars taken back differ from the statistics (%lld)", tag, (long long)bad);
  va_cuda_get_anchors(ctx, A1, v1);
  for (int64_t j = 0; j < k; j++) {
    double cnt = cd[j * W + VA_ST_COUNT(d)], w = cd[j * W + VA_ST_WEIGHT(d)];
    if (!(cnt > 0 && w > 0)) continue;
    moved++;
    for (int64_t q = 0; q < d; q++) clamped += fabs(0.35 * (cd[j * W + q] / w - A0[j * d + q])) > max_step;
    va_update_anchor(A0 + j * d, v0 + j * d, cd + j * W, w, d, eta, max_step, beta);
    if (cosine) va_unit_normalise(A0 + j * d, d);
  }
  CHECK(memcmp(A0, A1, (size_t)(k * d) * 4) == 0, "%s: device update: anchors differ from va_update_anchor", tag);
  CHECK(memcmp(v0, v1, (size_t)(k * d) * 8) == 0, "%s: device update: momentum differs from va_update_anchor", tag);
  float *gn = malloc((size_t)k * 4), *hn = malloc((size_t)k * 4);
  va_cuda_debug_anchor_norms(ctx, gn);
  va_row_norms(A0, k, d, hn);
  CHECK(memcmp(gn, hn, (size_t)k * 4) == 0, "%s: device update: norms differ from va_row_norms of the new anchors",
        tag);
  printf("  %-34s device update of %lld anchors (%lld steps clamped) bit for bit the host's\n", tag, (long long)moved,
         (long long)clamped);
  CHECK(clamped > 0, "%s: the update test never reached max_step", tag);
  /* reseeding's replacement of a few anchors on the device (every 7th, from the last anchor down, the
   * caller's anchors reversed): those rows and a zero momentum, every other row and momentum kept, the
   * norms and the 16-bit copy of the whole new set (an assign pass as after uploading it whole) */
  {
    int64_t m = 0, *idx = malloc((size_t)k * 8);
    for (int64_t j = k - 1; j >= 0; j -= 7) idx[m++] = j;
    float *Anew = malloc((size_t)(k * d) * 4); /* the new rows at idx, NaN elsewhere: those must not be read */
    for (int64_t e = 0; e < k * d; e++) Anew[e] = NAN;
    for (int64_t q = 0; q < m; q++) {
      memcpy(Anew + idx[q] * d, Akeep + (k - 1 - idx[q]) * d, (size_t)d * 4);
      memcpy(A0 + idx[q] * d, Anew + idx[q] * d, (size_t)d * 4);
      memset(v0 + idx[q] * d, 0, (size_t)d * 8);
    }
    va_cuda_replace_anchor_rows(ctx, idx, m, Anew);
    va_cuda_get_anchors(ctx, A1, v1);
    CHECK(memcmp(A0, A1, (size_t)(k * d) * 4) == 0, "%s: replaced anchor rows: anchors differ", tag);
    CHECK(memcmp(v0, v1, (size_t)(k * d) * 8) == 0, "%s: replaced anchor rows: momentum differs", tag);
    va_cuda_debug_anchor_norms(ctx, gn);
    va_row_norms(A0, k, d, hn);
    CHECK(memcmp(gn, hn, (size_t)k * 4) == 0, "%s: replaced anchor rows: norms differ from va_row_norms", tag);
    uint32_t *a_rep = malloc((size_t)n * 4);
    va_cuda_assign(ctx, cosine);
    va_cuda_download(ctx, a_rep, NULL);
    va_cuda_set_anchors(ctx, A0, NULL, k);
    va_cuda_assign(ctx, cosine);
    va_cuda_download(ctx, da, NULL);
    CHECK(memcmp(a_rep, da, (size_t)n * 4) == 0, "%s: replaced anchor rows: a[] differs from the whole set uploaded",
          tag);
    printf("  %-34s %lld anchor rows replaced on the device: anchors, momentum, norms, a[] as uploaded whole\n", tag,
           (long long)m);
    free(a_rep);
    free(Anew);
    free(idx);
  }
  /* back to the caller's anchors */
  memset(v0, 0, (size_t)(k * d) * 8);
  va_cuda_set_anchors(ctx, Akeep, NULL, k);
  va_cuda_set_velocity(ctx, v0, k);
  va_cuda_assign(ctx, cosine);
  /* the warm-up before the loop moves no anchor and leaves a[] as an assign pass does */
  va_cuda_get_anchors(ctx, A0, v0);
  va_cuda_warm_up(ctx, cosine);
  va_cuda_get_anchors(ctx, A1, v1);
  va_cuda_download(ctx, da, NULL);
  CHECK(memcmp(A0, A1, (size_t)(k * d) * 4) == 0 && memcmp(v0, v1, (size_t)(k * d) * 8) == 0,
        "%s: the warm-up moved the anchors", tag);
  CHECK(memcmp(da, ga, (size_t)n * 4) == 0, "%s: a[] after the warm-up differs from the assign pass", tag);
  free(cd);
  free(cc);
  free(da);
  free(dr);
  free(A0);
  free(A1);
  free(Akeep);
  free(v0);
  free(v1);
  free(sc);
  free(gn);
  free(hn);
}

/* One shape: every precision, both metrics, both assign kernels, then the reductions. */
/* Configuration 4 with its anchor tiles split over 2 and 3 blocks a row block (capped at the tile count; one tile:
 * nothing to split): every check_assign rule, the listed rows' pass, and a[] and r[] bit for bit those of the
 * unsplit pass just run (ga, gr): the products are the same sums in the same order, only which block finds a
 * row's best changes. */
static void tma_slices_case(va_cuda_t *ctx, const float *Xs, int64_t n, int64_t d, const float *A, int64_t k,
                            int cosine, int prec, const uint32_t *ca, const float *cr, const uint32_t *ga,
                            const float *gr, const char *tag) {
  uint32_t *sa = malloc((size_t)n * 4);
  float *sr = malloc((size_t)n * 4);
  char stag[160];
  for (int want = 2; want <= 3; want++) {
    const int got = va_cuda_set_tma_splits(ctx, want);
    if (got < want) continue; /* capped: the count below was run already, or there is one tile */
    snprintf(stag, sizeof stag, "%s, %d slices", tag, got);
    check_assign(ctx, Xs, n, d, A, k, cosine, prec, ca, cr, sa, sr, stag);
    check_assign_listed(ctx, Xs, n, d, A, k, cosine, prec, 0, cr, sa, sr, stag);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) differ += sa[i] != ga[i] || memcmp(sr + i, gr + i, 4) != 0;
    CHECK(differ == 0, "%s: %lld rows' anchor or r differ from the unsplit pass's", stag, (long long)differ);
  }
  va_cuda_set_tma_splits(ctx, 0);
  free(sa);
  free(sr);
}

static void run_case(int64_t n, int64_t d, int64_t k, int64_t k_cap) {
  printf("case n %lld d %lld k %lld (k_cap %lld)\n", (long long)n, (long long)d, (long long)k, (long long)k_cap);
  for (int cosine = 0; cosine <= 1; cosine++) {
    float *X = make_rows(n, d, cosine);
    float *A = make_anchors(X, n, d, k, cosine, 0.05);
    float *anorm = malloc((size_t)k * 4);
    va_row_norms(A, k, d, anorm);
    uint32_t *ca = malloc((size_t)n * 4), *ga = malloc((size_t)n * 4), *ga1 = malloc((size_t)n * 4);
    float *cr = malloc((size_t)n * 4), *gr = malloc((size_t)n * 4);
    va_assign_opts_t opts = {.threads = va_cpu_count(), .tile_rows = 0};
    for (int prec = 0; prec < 4; prec++) {
      float *Xs = rows_as_stored(X, n * d, prec); /* every CPU reference below: on the rows as stored */
      va_assign_cpu(Xs, n, d, A, anorm, k, cosine, &opts, ca, cr);
      va_cuda_t *ctx = va_cuda_create(0, n, d, k_cap, prec);
      /* three uneven pieces, last first */
      int64_t cut1 = n / 3, cut2 = n / 3 + n / 4;
      va_cuda_upload_rows(ctx, X + cut2 * d, cut2, n - cut2);
      va_cuda_upload_rows(ctx, X, 0, cut1);
      va_cuda_upload_rows(ctx, X + cut1 * d, cut1, cut2 - cut1);
      va_cuda_set_anchors(ctx, A, prec == 1 ? NULL : anorm, k);
      if (prec == 1) { /* the norms computed on the device */
        float *gn = malloc((size_t)k * 4);
        va_cuda_debug_anchor_norms(ctx, gn);
        CHECK(memcmp(gn, anorm, (size_t)k * 4) == 0, "%s: device anchor norms differ from va_row_norms",
              cosine ? "cosine" : "l2");
        free(gn);
      }
      char tag[128];
      /* DIRECT (float32 products whatever the precision), GEMM, then each fused tile configuration that fits this shape
       */
      for (int v = -1; v <= VA_CUDA_FUSED_CONFIGS; v++) {
        if (v == -1) {
          va_cuda_set_assign_variant(ctx, VA_CUDA_ASSIGN_DIRECT);
          snprintf(tag, sizeof tag, "%s %s direct", pname[prec], cosine ? "cosine" : "l2");
        } else if (v == 0) {
          va_cuda_set_assign_variant(ctx, VA_CUDA_ASSIGN_GEMM);
          snprintf(tag, sizeof tag, "%s %s gemm", pname[prec], cosine ? "cosine" : "l2");
        } else {
          if (va_cuda_set_fused_config(ctx, v) != v) continue;
          va_cuda_set_assign_variant(ctx, VA_CUDA_ASSIGN_FUSED);
          snprintf(tag, sizeof tag, "%s %s fused cfg %d", pname[prec], cosine ? "cosine" : "l2", v);
        }
        check_assign(ctx, Xs, n, d, A, k, cosine, prec, ca, cr, ga, gr, tag);
        check_assign_listed(ctx, Xs, n, d, A, k, cosine, prec, v == 0, cr, ga, gr, tag);
        /* DIRECT computes the CPU fused kernel's values (cuda_assign.cu): its decisions are the CPU's */
        if (v == -1 && va_assign_fused_available()) {
          int64_t differ = 0;
          for (int64_t i = 0; i < n; i++) differ += ga[i] != ca[i];
          CHECK(differ == 0, "%s: %lld rows' anchors differ from the CPU fused kernel's", tag, (long long)differ);
        }
        if (v == 4) tma_slices_case(ctx, Xs, n, d, A, k, cosine, prec, ca, cr, ga, gr, tag);
      }
      va_cuda_set_fused_config(ctx, 0);
      va_cuda_set_assign_variant(ctx, VA_CUDA_ASSIGN_AUTO);
      /* changed count against the previous pass: move the anchors a little */
      memcpy(ga1, ga, (size_t)n * 4);
      float *A2 = malloc((size_t)(k * d) * 4);
      for (int64_t e = 0; e < k * d; e++) A2[e] = A[e] + (float)(0.02 * normal());
      va_cuda_set_anchors(ctx, A2, NULL, k);
      int64_t changed = va_cuda_assign(ctx, cosine), want = 0;
      va_cuda_download(ctx, ga, gr);
      for (int64_t i = 0; i < n; i++) want += ga[i] != ga1[i];
      CHECK(changed == want, "%s: changed %lld, rows that moved %lld", tag, (long long)changed, (long long)want);
      /* set_assign: the previous pass restored from the host, the same pass again counts the same */
      va_cuda_set_assign(ctx, ga1);
      changed = va_cuda_assign(ctx, cosine);
      CHECK(changed == want, "%s: after set_assign changed %lld, want %lld", tag, (long long)changed, (long long)want);
      va_cuda_set_anchors(ctx, A, anorm, k);
      va_cuda_assign(ctx, cosine);
      va_cuda_download(ctx, ga, gr);
      free(A2);
      if (prec >= 1) {
        snprintf(tag, sizeof tag, "%s %s", pname[prec], cosine ? "cosine" : "l2");
        check_reductions(ctx, Xs, n, d, k, cosine, ga, gr, tag);
      }
      if (prec >= 2) { /* the rows fetched back: their 16-bit values */
        int64_t m = n < 64 ? n : 64, *rows = malloc((size_t)m * 8);
        float *back = malloc((size_t)(m * d) * 4);
        for (int64_t q = 0; q < m; q++) rows[q] = (q * 7919) % n;
        va_cuda_get_rows(ctx, rows, m, back);
        int64_t bad = 0;
        for (int64_t q = 0; q < m; q++) bad += memcmp(back + q * d, Xs + rows[q] * d, (size_t)d * 4) != 0;
        CHECK(bad == 0, "%s %s: %lld fetched rows differ from the rows rounded to 16 bits", pname[prec],
              cosine ? "cosine" : "l2", (long long)bad);
        free(rows);
        free(back);
      }
      va_cuda_destroy(ctx);
      free(Xs);
    }
    free(X);
    free(A);
    free(anorm);
    free(ca);
    free(ga);
    free(ga1);
    free(cr);
    free(gr);
  }
}

/* Out-of-core: a deferred assign pass without r wanted first runs chunk by chunk inside the next
 * statistics pass (the rows copied up once an iteration instead of twice). Against the same pass run
 * on its own first (any other entry into the context does that: here va_cuda_sync), for both
 * statistics variants and rules none and huber: a[], r[] and the changed count bit for bit, the
 * statistics too with the sorted reduction (the atomic one adds in no fixed order: within 1e-12 as
 * streamed against resident), and (more than two chunks) fewer bytes copied. */
static void owed_pass_case(va_cuda_t *S, const float *A, const float *A2, int64_t n, int64_t d, int64_t k, double xmax,
                           const char *tag) {
  const int64_t kw = k * VA_STATS_W(d), chunks = (n + va_cuda_stream_rows(S) - 1) / va_cuda_stream_rows(S);
  double *delta = malloc((size_t)k * 8), *acc[2] = {malloc((size_t)(kw + 1) * 8), malloc((size_t)(kw + 1) * 8)},
         bytes[2];
  uint32_t *a[2] = {malloc((size_t)n * 4), malloc((size_t)n * 4)};
  float *r[2] = {malloc((size_t)n * 4), malloc((size_t)n * 4)};
  for (int64_t j = 0; j < k; j++) delta[j] = j % 5 == 4 ? 0.0 : 0.3;
  va_stats_rule_t none = {.mode = VA_ROBUST_NONE}, huber = {.mode = VA_ROBUST_HUBER, .huber_delta = delta};
  const double x[1] = {-1.0}; /* replaced by the changed count */
  for (int v = 0; v < 2; v++)
    for (int ri = 0; ri < 2; ri++) {
      char t2[160];
      snprintf(t2, sizeof t2, "%s owed pass %s %s", tag, ri ? "huber" : "none", v ? "atomic" : "sort");
      va_cuda_set_stats_variant(S, v);
      for (int inside = 0; inside < 2; inside++) {
        va_cuda_set_anchors(S, A, NULL, k);
        va_cuda_assign(S, 0);
        va_cuda_set_anchors(S, A2, NULL, k);
        const double b0 = va_cuda_streamed_bytes(S);
        va_cuda_assign_deferred(S, 0, 0);
        if (!inside) va_cuda_sync(S);
        va_cuda_fetch_f64(S, va_cuda_stats_device(S, ri ? &huber : &none, x, 1), kw + 1, acc[inside]);
        bytes[inside] = va_cuda_streamed_bytes(S) - b0;
        va_cuda_download(S, a[inside], r[inside]);
      }
      CHECK(acc[0][kw] == acc[1][kw], "%s: changed count %.0f, on its own %.0f", t2, acc[1][kw], acc[0][kw]);
      if (v == VA_CUDA_STATS_SORT)
        CHECK(memcmp(acc[0], acc[1], (size_t)kw * 8) == 0, "%s: statistics differ from the pass run on its own", t2);
      else check_acc_tol(acc[1], acc[0], k, d, xmax, 1e-12, t2);
      CHECK(memcmp(a[0], a[1], (size_t)n * 4) == 0 && memcmp(r[0], r[1], (size_t)n * 4) == 0,
            "%s: a[] or r[] differ from the pass run on its own", t2);
      CHECK(acc[1][kw] > 0, "%s: no row changed its anchor, so the pass was not compared", t2);
      if (chunks > 2)
        CHECK(bytes[1] < 0.75 * bytes[0],
              "%s: %.0f bytes copied up with the pass inside the statistics, %.0f on its own", t2, bytes[1], bytes[0]);
    }
  printf("  %-34s owed assign pass inside the statistics pass: as on its own, %s\n", tag,
         chunks > 2 ? "fewer bytes copied" : "(at most two chunks: copied once)");
  va_cuda_set_stats_variant(S, VA_CUDA_STATS_SORT);
  free(delta);
  free(acc[0]);
  free(acc[1]);
  free(a[0]);
  free(a[1]);
  free(r[0]);
  free(r[1]);
}

/* Out-of-core: a context streaming its rows in chunks of `chunk` rows against a resident one (see the
 * tolerances at the top). fp32 runs the GEMM path, tf32 and fp16 the fused one. */
static void stream_case(int64_t n, int64_t d, int64_t k, int64_t chunk) {
  printf("streamed case n %lld d %lld k %lld, chunks of %lld rows\n", (long long)n, (long long)d, (long long)k,
         (long long)chunk);
  float *X = make_rows(n, d, 0), *A = make_anchors(X, n, d, k, 0, 0.05), *A2 = malloc((size_t)(k * d) * 4);
  for (int64_t e = 0; e < k * d; e++) A2[e] = A[e] + (float)(0.02 * normal());
  float *anorm = malloc((size_t)k * 4), *cr = malloc((size_t)n * 4), *rr = malloc((size_t)n * 4),
        *sr = malloc((size_t)n * 4);
  uint32_t *ca = malloc((size_t)n * 4), *ra = malloc((size_t)n * 4), *sa = malloc((size_t)n * 4);
  va_row_norms(A, k, d, anorm);
  va_assign_opts_t opts = {.threads = va_cpu_count(), .tile_rows = 0};
  double xmax = 0;
  for (int64_t e = 0; e < n * d; e++)
    if (fabs(X[e]) > xmax) xmax = fabs(X[e]);
  int64_t W = VA_STATS_W(d);
  double *gr_acc = malloc((size_t)(k * W) * 8), *gs_acc = malloc((size_t)(k * W) * 8),
         *gs2 = malloc((size_t)(k * W) * 8);
  for (int prec = 0; prec <= 2; prec++) {
    char tag[128];
    snprintf(tag, sizeof tag, "%s streamed", pname[prec]);
    float *Xs = rows_as_stored(X, n * d, prec);
    va_assign_cpu(Xs, n, d, A, anorm, k, 0, &opts, ca, cr);
    va_cuda_t *R = va_cuda_create(0, n, d, k, prec),
              *S = va_cuda_create_streamed(0, n, d, k, prec, chunk, va_cpu_count());
    CHECK(va_cuda_stream_rows(S) > 0 && va_cuda_stream_rows(S) <= chunk && va_cuda_stream_rows(R) == 0,
          "%s: chunk rows %lld", tag, (long long)va_cuda_stream_rows(S));
    va_cuda_upload_rows(R, X, 0, n);
    int64_t cut1 = n / 3, cut2 = n / 3 + n / 4; /* three uneven pieces, last first */
    va_cuda_upload_rows(S, X + cut2 * d, cut2, n - cut2);
    va_cuda_upload_rows(S, X, 0, cut1);
    const int64_t per =
        va_cuda_upload_buffer_rows(S); /* the middle piece as compress reads it: in place (d 128), else staged */
    int64_t ld = 0, bad_rows = 0, in_place = 0, pieces = 0;
    const float *H = va_cuda_stream_host_rows(S, &ld); /* where compress preprocesses streamed rows */
    for (int64_t r0 = cut1; r0 < cut2; r0 += per, pieces++) {
      const int64_t nr = cut2 - r0 < per ? cut2 - r0 : per;
      float *buf = va_cuda_upload_buffer(S, r0);
      in_place += buf == H + r0 * ld;
      memcpy(buf, X + r0 * d, (size_t)(nr * d) * 4);
      va_cuda_upload_buffered(S, r0, nr);
    }
    CHECK(in_place == (ld == d ? pieces : 0),
          "%s: %lld of %lld buffers handed out in the pinned copy (row stride %lld, d %lld)", tag, (long long)in_place,
          (long long)pieces, (long long)ld, (long long)d);
    for (int64_t i = 0; i < n; i++) {
      int bad = memcmp(H + i * ld, X + i * d, (size_t)d * 4) != 0;
      for (int64_t t = d; t < ld; t++) bad |= H[i * ld + t] != 0.0f;
      bad_rows += bad;
    }
    CHECK(ld >= d && bad_rows == 0,
          "%s: %lld rows of the pinned host copy (row stride %lld) are not the rows given, zero padded", tag,
          (long long)bad_rows, (long long)ld);
    va_cuda_set_anchors(R, A, NULL, k);
    va_cuda_set_anchors(S, A, NULL, k);
    check_assign(S, Xs, n, d, A, k, 0, prec, ca, cr, sa, sr, tag); /* poisoned first: every row written */
    int64_t two[2] = {0, n - 1};
    uint32_t la2[2];
    float lr2[2];
    CHECK(va_cuda_assign_listed(S, 0, two, 2, la2, lr2) == 0, "%s: a listed pass taken with streamed rows", tag);
    va_cuda_assign(R, 0);
    va_cuda_download(R, ra, rr);
    int64_t da = 0, dr = 0;
    for (int64_t i = 0; i < n; i++) {
      da += ra[i] != sa[i];
      dr += memcmp(&rr[i], &sr[i], 4) != 0 && ra[i] == sa[i];
    }
    printf("  %-34s %lld rows' anchors and %lld r of the same anchor differ from resident\n", tag, (long long)da,
           (long long)dr);
    CHECK(dr == 0, "%s: r differs from resident for the same anchor", tag);
    const int fused =
        va_cuda_assign_variant(S) != VA_CUDA_ASSIGN_GEMM; /* FUSED or DIRECT: the same kernel sees each row */
    if (fused) CHECK(da == 0, "%s: fused assignment differs from resident", tag);
    /* changed rows against the previous pass, then back */
    va_cuda_set_anchors(R, A2, NULL, k);
    va_cuda_set_anchors(S, A2, NULL, k);
    int64_t chr = va_cuda_assign(R, 0), chs = va_cuda_assign(S, 0);
    if (fused) CHECK(chr == chs, "%s: changed %lld, resident %lld", tag, (long long)chs, (long long)chr);
    va_cuda_set_anchors(R, A, NULL, k);
    va_cuda_set_anchors(S, A, NULL, k);
    va_cuda_assign(R, 0);
    va_cuda_assign(S, 0);
    va_cuda_download(S, sa, sr);
    va_cuda_download(R, ra, rr);
    if (memcmp(ra, sa, (size_t)n * 4) != 0) {
      printf("  %-34s reductions not compared with resident: the (GEMM) assignments differ at near-ties\n", tag);
    } else {
      /* farthest and histogram exact; statistics and split sums within 1e-12 of the resident ones */
      float *rmr = malloc((size_t)k * 4), *rms = malloc((size_t)k * 4);
      int64_t *rar = malloc((size_t)k * 8), *ras = malloc((size_t)k * 8);
      va_cuda_farthest(R, rmr, rar);
      va_cuda_farthest(S, rms, ras);
      CHECK(memcmp(rmr, rms, (size_t)k * 4) == 0 && memcmp(rar, ras, (size_t)k * 8) == 0,
            "%s: farthest differs from resident", tag);
      free(rmr);
      free(rms);
      free(rar);
      free(ras);
      double *delta = malloc((size_t)k * 8);
      va_stats_rule_t none = {.mode = VA_ROBUST_NONE};
      gpu_stats(R, &none, k, d, gr_acc);
      for (int64_t j = 0; j < k; j++) {
        double cnt = gr_acc[j * W + VA_ST_COUNT(d)];
        delta[j] = (j % 5 == 4 || cnt == 0) ? 0.0 : sqrt(gr_acc[j * W + VA_ST_RSUM(d)] / cnt);
      }
      va_stats_rule_t huber = {.mode = VA_ROBUST_HUBER, .huber_delta = delta};
      const va_stats_rule_t *rules[2] = {&none, &huber};
      for (int ri = 0; ri < 2; ri++)
        for (int v = 0; v < 2; v++) {
          char t2[160];
          snprintf(t2, sizeof t2, "%s vs resident %s %s", tag, ri ? "huber" : "none", v ? "atomic" : "sort");
          va_cuda_set_stats_variant(R, v);
          va_cuda_set_stats_variant(S, v);
          gpu_stats(R, rules[ri], k, d, gr_acc);
          gpu_stats(S, rules[ri], k, d, gs_acc);
          check_acc_tol(gs_acc, gr_acc, k, d, xmax, 1e-12, t2);
          if (v == VA_CUDA_STATS_SORT) {
            gpu_stats(S, rules[ri], k, d, gs2);
            CHECK(memcmp(gs_acc, gs2, (size_t)(k * W) * 8) == 0, "%s: not reproducible bit for bit", t2);
          }
        }
      va_cuda_set_stats_variant(R, VA_CUDA_STATS_SORT);
      va_cuda_set_stats_variant(S, VA_CUDA_STATS_SORT);
      int64_t m = k / 4 > 40 ? 40 : (k / 4 > 0 ? k / 4 : 1), *slot = malloc((size_t)k * 8);
      for (int64_t j = 0; j < k; j++) slot[j] = j % 4 == 1 && j / 4 < m ? j / 4 : -1;
      float *cent = malloc((size_t)(2 * m * d) * 4);
      for (int64_t h = 0; h < 2 * m; h++) memcpy(cent + h * d, X + (int64_t)(rnd() % (uint64_t)n) * d, (size_t)d * 4);
      double *sr_s = calloc((size_t)(2 * m * (d + 1)), 8), *ss_s = calloc((size_t)(2 * m * (d + 1)), 8);
      va_cuda_split_accumulate(R, slot, m, cent, sr_s);
      va_cuda_split_accumulate(S, slot, m, cent, ss_s);
      int64_t bad = 0;
      for (int64_t h = 0; h < 2 * m; h++) {
        double cnt = sr_s[h * (d + 1) + d];
        bad += ss_s[h * (d + 1) + d] != cnt;
        for (int64_t u = 0; u < d; u++)
          bad += !(fabs(ss_s[h * (d + 1) + u] - sr_s[h * (d + 1) + u]) <=
                   1e-12 * (fabs(sr_s[h * (d + 1) + u]) + cnt * xmax));
      }
      CHECK(bad == 0, "%s: split sums: %lld entries differ from resident", tag, (long long)bad);
      free(delta);
      free(slot);
      free(cent);
      free(sr_s);
      free(ss_s);
    }
    /* every CPU check (farthest, histogram, statistics, split, get_rows, remap) on the streamed context */
    if (prec != VA_CUDA_FP32) check_reductions(S, Xs, n, d, k, 0, sa, sr, tag);
    printf("  %-34s %.1f MB of rows copied to the device\n", tag, va_cuda_streamed_bytes(S) / 1e6);
    /* more than two chunks: a pass copies every row once, as stored (fp16: the pinned copy holds the
     * 16-bit rows, half the bytes) */
    const int64_t chunk_got = va_cuda_stream_rows(S);
    if ((n + chunk_got - 1) / chunk_got > 2) {
      va_cuda_sync(S); /* an owed pass, if any, runs here */
      const double b0 = va_cuda_streamed_bytes(S),
                   want = (double)n * (double)((d + 31) / 32 * 32) * (prec >= VA_CUDA_FP16 ? 2 : 4);
      va_cuda_assign(S, 0);
      CHECK(va_cuda_streamed_bytes(S) - b0 == want, "%s: a pass copied %.0f bytes, want %.0f (rows as stored)", tag,
            va_cuda_streamed_bytes(S) - b0, want);
    }
    owed_pass_case(S, A, A2, n, d, k, xmax, tag);
    va_cuda_destroy(R);
    va_cuda_destroy(S);
    free(Xs);
  }
  free(X);
  free(A);
  free(A2);
  free(anorm);
  free(cr);
  free(rr);
  free(sr);
  free(ca);
  free(ra);
  free(sa);
  free(gr_acc);
  free(gs_acc);
  free(gs2);
}

/* Tiny shapes against the plain double reference: no ties, so identical. */
/* Farthest-point initialisation on the device (cuda_init.cu) against init.c's loop, here on the host
 * with va_row_distance: the same k rows, in the same order, bit for bit. Once with one context (the
 * one-rank protocol: pick on the device) and once with the rows split over `parts` contexts at their
 * global offsets, reduced on the host as backend_cuda.c does for several ranks (set). Two rows are
 * copied further down, so that where a copy is the farthest the tie must go to the lower row. */
static void farthest_ref(const float *X, int64_t n, int64_t d, int64_t k, int cosine, int64_t *ref) {
  float *mind = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) mind[i] = FLT_MAX;
  int64_t row = 0;
  for (int64_t q = 0; q < k; q++) {
    ref[q] = row;
    float best = -1;
    int64_t arg = 0;
    for (int64_t i = 0; i < n; i++) {
      float v = va_row_distance(X + i * d, X + row * d, d, cosine);
      if (v < mind[i]) mind[i] = v;
      if (mind[i] > best) {
        best = mind[i];
        arg = i;
      }
    }
    row = arg;
  }
  free(mind);
}

static void farthest_init_case(int64_t n, int64_t d, int64_t k, int cosine, int parts) {
  float *X = make_rows(n, d, cosine);
  memcpy(X + (n / 2) * d, X + 3 * d, (size_t)d * 4);
  memcpy(X + (n / 3) * d, X + 7 * d, (size_t)d * 4);
  int64_t *ref = malloc((size_t)k * 8), *got = malloc((size_t)k * 8);
  float *A = malloc((size_t)(k * d) * 4);
  farthest_ref(X, n, d, k, cosine, ref);
  /* one context, no waits */
  va_cuda_t *ctx = va_cuda_create(0, n, d, k, VA_CUDA_TF32);
  va_cuda_upload_rows(ctx, X, 0, n);
  CHECK(va_cuda_farthest_init_begin(ctx, k, 0, n), "farthest init refused a resident context");
  for (int64_t q = 0; q < k; q++) {
    va_cuda_farthest_init_pick(ctx, q);
    va_cuda_farthest_init_step(ctx, q, cosine);
  }
  va_cuda_farthest_init_end(ctx, A);
  int bad = 0;
  for (int64_t q = 0; q < k; q++) bad += memcmp(A + q * d, X + ref[q] * d, (size_t)d * 4) != 0;
  CHECK(bad == 0, "farthest init (%s, one context): %d of %lld anchors differ from init.c's rows",
        cosine ? "cosine" : "l2", bad, (long long)k);
  va_cuda_destroy(ctx);
  /* `parts` contexts as ranks, fp16: the rows they hold are X's fp16 values, so the host loop's reference
   * is taken again on those */
  float *X16 = rows_as_stored(X, n * d, VA_CUDA_FP16);
  farthest_ref(X16, n, d, k, cosine, ref);
  int64_t row;
  va_cuda_t *c[4];
  int64_t r0[5];
  for (int p = 0; p <= parts; p++) r0[p] = n * p / parts;
  for (int p = 0; p < parts; p++) {
    c[p] = va_cuda_create(0, r0[p + 1] - r0[p], d, k, VA_CUDA_FP16);
    va_cuda_upload_rows(c[p], X + r0[p] * d, 0, r0[p + 1] - r0[p]);
    CHECK(va_cuda_farthest_init_begin(c[p], k, r0[p], n), "farthest init refused part %d", p);
  }
  row = 0;
  for (int64_t q = 0; q < k; q++) {
    got[q] = row;
    for (int p = 0; p < parts; p++) {
      va_cuda_farthest_init_set(c[p], q, X16 + row * d);
      va_cuda_farthest_init_step(c[p], q, cosine);
    }
    if (q + 1 == k) break;
    float best = -1.0f;
    row = INT64_MAX;
    for (int p = 0; p < parts; p++) { /* largest distance, then lowest row: what the ranks' two collectives give */
      float dist;
      int64_t cand;
      va_cuda_farthest_init_candidate(c[p], q + 1, &dist, &cand);
      if (dist > best || (dist == best && cand < row)) {
        best = dist;
        row = cand;
      }
    }
  }
  for (int p = 0; p < parts; p++) {
    va_cuda_farthest_init_end(c[p], p == 0 ? A : NULL);
    va_cuda_destroy(c[p]);
  }
  bad = 0;
  for (int64_t q = 0; q < k; q++) bad += got[q] != ref[q] || memcmp(A + q * d, X16 + ref[q] * d, (size_t)d * 4) != 0;
  CHECK(bad == 0, "farthest init (%s, %d contexts): %d of %lld anchors differ from init.c's rows",
        cosine ? "cosine" : "l2", parts, bad, (long long)k);
  /* streamed rows: refused, init.c's loop runs instead */
  ctx = va_cuda_create_streamed(0, n, d, k, VA_CUDA_TF32, 256, va_cpu_count());
  CHECK(!va_cuda_farthest_init_begin(ctx, k, 0, n), "farthest init accepted a streamed context");
  va_cuda_destroy(ctx);
  printf("  farthest init n %lld d %lld k %lld %s: one context and %d parts, same rows as the host loop\n",
         (long long)n, (long long)d, (long long)k, cosine ? "cosine" : "l2", parts);
  free(X);
  free(X16);
  free(ref);
  free(got);
  free(A);
}

/* compress.c's host preprocessing for cosine, in place: unit rows; zero rows stay zero and are
 * counted (the return value). */
static int64_t host_unit_rows(float *X, int64_t n, int64_t d) {
  int64_t zero = 0;
  for (int64_t i = 0; i < n; i++) {
    float *x = X + i * d;
    double s = 0;
    for (int64_t t = 0; t < d; t++) s += (double)x[t] * x[t];
    if (s > 0)
      for (int64_t t = 0; t < d; t++) x[t] = (float)(x[t] / sqrt(s));
    else zero++;
  }
  return zero;
}

/* compress.c's column_sums on the host, in place: per block of `block` rows in row order, each value
 * first replaced by (float)(x - center[t]) with center; part gets nblocks x d sums (x 2d with squares). */
static void host_block_sums(float *X, int64_t n, int64_t d, int64_t block, const double *center, int squares,
                            double *part) {
  const int64_t nblocks = (n + block - 1) / block, w = squares ? 2 * d : d;
  memset(part, 0, (size_t)(nblocks * w) * 8);
  for (int64_t b = 0; b < nblocks; b++)
    for (int64_t i = b * block; i < n && i < (b + 1) * block; i++) {
      float *x = X + i * d;
      if (center)
        for (int64_t t = 0; t < d; t++) x[t] = (float)(x[t] - center[t]);
      for (int64_t t = 0; t < d; t++) part[b * w + t] += x[t];
      if (squares)
        for (int64_t t = 0; t < d; t++) part[b * w + d + t] += (double)(x[t]) * x[t];
    }
}

/* l2 rows read straight to the device (compress: no host shard) and preprocessed there, against
 * compress.c's host preprocessing: block column sums, then centred with squares, bit for bit, and the
 * centred rows (read back in fp16) as the host's, rounded. */
static void direct_case(int64_t n, int64_t d, int64_t block) {
  const int64_t nblocks = (n + block - 1) / block;
  float *X = make_rows(n, d, 0), *H = malloc((size_t)(n * d) * 4), *back = malloc((size_t)(n * d) * 4);
  double *part = calloc((size_t)(nblocks * 2 * d), 8), *gpart = calloc((size_t)(nblocks * 2 * d), 8),
         *center = malloc((size_t)d * 8);
  int64_t *rows = malloc((size_t)n * 8);
  for (int64_t i = 0; i < n; i++) rows[i] = i;
  memcpy(H, X, (size_t)(n * d) * 4);
  host_block_sums(H, n, d, block, NULL, 0, part);
  for (int64_t t = 0; t < d; t++) center[t] = part[t] / (double)block + 0.001 * (double)t;
  va_cuda_t *c = va_cuda_create(0, n, d, 64, VA_CUDA_FP16);
  va_cuda_defer_conversion(c);
  for (int64_t r0 = 0; r0 < n; r0 += 1000) va_cuda_upload_rows(c, X + r0 * d, r0, n - r0 < 1000 ? n - r0 : 1000);
  va_cuda_block_column_sums(c, block, NULL, 0, gpart);
  CHECK(memcmp(gpart, part, (size_t)(nblocks * d) * 8) == 0,
        "direct: block column sums (n %lld d %lld) differ from the host's", (long long)n, (long long)d);
  host_block_sums(H, n, d, block, center, 1, part);
  va_cuda_block_column_sums(c, block, center, 1, gpart);
  CHECK(memcmp(gpart, part, (size_t)(nblocks * 2 * d) * 8) == 0,
        "direct: centred column sums and squares differ from the host's");
  va_cuda_finish_rows(c);
  va_cuda_get_rows(c, rows, n, back);
  float *H16 = rows_as_stored(H, n * d, VA_CUDA_FP16);
  CHECK(memcmp(back, H16, (size_t)(n * d) * 4) == 0, "direct: centred rows (in fp16) differ from the host's");
  free(H16);
  va_cuda_destroy(c);
  printf("  l2 rows read straight to the device n %lld d %lld (%lld blocks): block sums, centred sums and squares, "
         "rows as the host's\n",
         (long long)n, (long long)d, (long long)nblocks);
  free(X);
  free(H);
  free(back);
  free(part);
  free(gpart);
  free(center);
  free(rows);
}

/* Cosine rows preprocessed on the device, read straight there (uploaded) or adopted from device memory
 * (compress --embed's hand-over), against compress.c's host arithmetic: unit rows, zero-row count and
 * block column sums bit for bit, the rows read back in prec as the host's rounded, and an assign pass
 * equal to that of a context uploaded from the host's unit rows. */
static void cosine_case(int64_t n, int64_t d, int64_t block, int adopt, int prec) {
  const int64_t nblocks = (n + block - 1) / block;
  const char *how = adopt ? "adopted" : "uploaded";
  float *X = make_rows(n, d, 0), *H = malloc((size_t)(n * d) * 4), *back = malloc((size_t)(n * d) * 4);
  memset(X + 5 * d, 0, (size_t)d * 4); /* a zero row stays zero and is counted */
  double *part = calloc((size_t)(nblocks * d), 8), *gpart = calloc((size_t)(nblocks * d), 8);
  int64_t *rows = malloc((size_t)n * 8);
  for (int64_t i = 0; i < n; i++) rows[i] = i;
  memcpy(H, X, (size_t)(n * d) * 4);
  const int64_t zero = host_unit_rows(H, n, d);
  host_block_sums(H, n, d, block, NULL, 0, part);
  va_cuda_t *c = va_cuda_create(0, n, d, 64, prec), *ch = va_cuda_create(0, n, d, 64, prec);
  if (adopt) {
    float *dX = NULL;
    CHECK(cudaMalloc((void **)&dX, (size_t)(n * d) * 4) == cudaSuccess, "cudaMalloc");
    CHECK(cudaMemcpy(dX, X, (size_t)(n * d) * 4, cudaMemcpyHostToDevice) == cudaSuccess, "cudaMemcpy");
    va_cuda_adopt_rows(c, dX);
    va_cuda_sync(c);
    va_cuda_free_device(dX);
  } else {
    va_cuda_defer_conversion(c);
    va_cuda_upload_rows(c, X, 0, n);
  }
  const int64_t gz = va_cuda_unit_rows(c);
  va_cuda_block_column_sums(c, block, NULL, 0, gpart);
  va_cuda_finish_rows(c);
  va_cuda_get_rows(c, rows, n, back);
  CHECK(gz == zero, "cosine %s: %lld zero rows, want %lld", how, (long long)gz, (long long)zero);
  CHECK(memcmp(gpart, part, (size_t)(nblocks * d) * 8) == 0, "cosine %s: block column sums differ from the host's",
        how);
  float *H16 = rows_as_stored(H, n * d, prec);
  CHECK(memcmp(back, H16, (size_t)(n * d) * 4) == 0, "cosine %s: unit rows (as stored) differ from the host's", how);
  free(H16);
  va_cuda_upload_rows(ch, H, 0, n);
  float *A = make_anchors(H, n, d, 64, 1, 0.05);
  uint32_t *a1 = malloc((size_t)n * 4), *a2 = malloc((size_t)n * 4);
  va_cuda_set_anchors(c, A, NULL, 64);
  va_cuda_set_anchors(ch, A, NULL, 64);
  va_cuda_assign(c, 1);
  va_cuda_assign(ch, 1);
  va_cuda_download(c, a1, NULL);
  va_cuda_download(ch, a2, NULL);
  CHECK(memcmp(a1, a2, (size_t)n * 4) == 0, "cosine %s: the assign pass differs from that of the host's unit rows",
        how);
  va_cuda_destroy(c);
  va_cuda_destroy(ch);
  printf("  cosine rows %s n %lld d %lld (%lld blocks): unit rows, zero rows, block sums and an assign pass as the "
         "host's\n",
         how, (long long)n, (long long)d, (long long)nblocks);
  free(X);
  free(H);
  free(back);
  free(part);
  free(gpart);
  free(rows);
  free(A);
  free(a1);
  free(a2);
}

/* Farthest member per anchor with more anchors than the shared-memory maxima take (cuda_stats.cu
 * FARTHEST_SMEM_K): the global-atomics instance, exactly va_farthest_local on the GPU's a and r. */
static void farthest_many_anchors(void) {
  const int64_t n = 30011, d = 16, k = 9001;
  float *X = make_rows(n, d, 0), *A = make_anchors(X, n, d, k, 0, 0.05);
  uint32_t *ga = malloc((size_t)n * 4);
  float *gr = malloc((size_t)n * 4), *rmax_g = malloc((size_t)k * 4), *rmax_c = malloc((size_t)k * 4);
  int64_t *rarg_g = malloc((size_t)k * 8), *rarg_c = malloc((size_t)k * 8);
  va_cuda_t *ctx = va_cuda_create(0, n, d, k, VA_CUDA_FP32);
  va_cuda_upload_rows(ctx, X, 0, n);
  va_cuda_set_anchors(ctx, A, NULL, k);
  va_cuda_assign(ctx, 0);
  va_cuda_download(ctx, ga, gr);
  va_cuda_farthest(ctx, rmax_g, rarg_g);
  va_farthest_local(ga, gr, n, k, rmax_c, rarg_c);
  int64_t bad = 0;
  for (int64_t j = 0; j < k; j++) bad += memcmp(&rmax_g[j], &rmax_c[j], 4) != 0 || rarg_g[j] != rarg_c[j];
  CHECK(bad == 0, "farthest with k %lld: %lld anchors differ", (long long)k, (long long)bad);
  printf("  farthest with k %lld (global atomics): as va_farthest_local\n", (long long)k);
  /* the sorted statistics with more segments than one block's bookkeeping takes (cuda_stats.cu
   * BOOK_THREADS * BOOK_PER): the device-wide scan, against the CPU as in check_shape */
  const int64_t W = VA_STATS_W(d);
  double *cg = malloc((size_t)(k * W) * 8), *cc = calloc((size_t)(k * W), 8), xmax = 0;
  for (int64_t e = 0; e < n * d; e++) xmax = fabs(X[e]) > xmax ? fabs(X[e]) : xmax;
  va_stats_rule_t none = {.mode = VA_ROBUST_NONE};
  va_stats_accumulate(X, n, d, ga, gr, k, &none, cc);
  gpu_stats(ctx, &none, k, d, cg);
  check_acc(cg, cc, k, d, xmax, "stats none with k 9001");
  free(cg);
  free(cc);
  va_cuda_destroy(ctx);
  free(X);
  free(A);
  free(ga);
  free(gr);
  free(rmax_g);
  free(rmax_c);
  free(rarg_g);
  free(rarg_c);
}

/* The rows grouped by segment (cuda/seg_sort.cu) against a stable counting sort on the host, both ways: rows
 * in the same order bit for bit, every non-empty segment's bounds equal, every segment's length its count.
 * pattern 0: random keys, about 1% of them nseg (in no segment); 1: keys in runs of 37, only even segments;
 * 2: one segment but a few rows. want_count: the counting sort applies to this shape. */
static void segment_rows_case(int64_t n, int64_t nseg, int pattern, int want_count) {
  char tag[96];
  snprintf(tag, sizeof tag, "segment rows n %lld nseg %lld pattern %d", (long long)n, (long long)nseg, pattern);
  uint32_t *keys = malloc((size_t)n * 4), *want = malloc((size_t)n * 4), *got = malloc((size_t)n * 4);
  int32_t *count = calloc((size_t)nseg + 1, 4), *first = malloc(((size_t)nseg + 1) * 4);
  int32_t *start = malloc((size_t)nseg * 4), *end = malloc((size_t)nseg * 4);
  for (int64_t i = 0; i < n; i++) {
    uint64_t z = rnd();
    if (pattern == 0) keys[i] = z % 100 == 0 ? (uint32_t)nseg : (uint32_t)(z % (uint64_t)nseg);
    else if (pattern == 1) keys[i] = (uint32_t)((2 * (i / 37)) % (nseg - nseg % 2));
    else keys[i] = z % 1000 == 0 ? (uint32_t)(z % (uint64_t)(nseg + 1)) : 1u;
    count[keys[i]]++;
  }
  for (int64_t j = 0, at = 0; j <= nseg; j++) {
    first[j] = (int32_t)at;
    at += count[j];
  }
  for (int64_t i = 0; i < n; i++) want[first[keys[i]]++] = (uint32_t)i; /* first[j] ends at segment j's end */
  va_cuda_t *ctx = va_cuda_create(0, n, 8, 1, VA_CUDA_FP16);
  for (int way = 0; way <= 2; way += 2) { /* automatic (the counting sort where it applies), then radix */
    memset(got, 0xFF, (size_t)n * 4);
    int took = va_cuda_debug_segment_rows(ctx, keys, n, nseg, way, got, start, end);
    int64_t bad_rows = 0, bad_bounds = 0;
    for (int64_t i = 0; i < n; i++) bad_rows += got[i] != want[i];
    for (int64_t j = 0; j < nseg; j++)
      bad_bounds += end[j] - start[j] != count[j] || (count[j] > 0 && end[j] != first[j]);
    CHECK(took == (way == 2 || !want_count ? 2 : 1), "%s way %d: took way %d", tag, way, took);
    CHECK(bad_rows == 0, "%s way %d: %lld rows out of the stable order", tag, way, (long long)bad_rows);
    CHECK(bad_bounds == 0, "%s way %d: %lld segments with wrong bounds", tag, way, (long long)bad_bounds);
  }
  va_cuda_destroy(ctx);
  free(keys), free(want), free(got), free(count), free(first), free(start), free(end);
}

static void tiny_and_empty(void) {
  const int64_t n = 5, d = 3, k = 2;
  float X[15] = {0, 0, 0, 1, 1, 1, 9, 9, 9, 10, 10, 10, 0.4f, 0.2f, 0.1f}, A[6] = {0.5f, 0.5f, 0.5f, 9.5f, 9.5f, 9.5f};
  uint32_t ca[5], ga[5];
  float cr[5], gr[5];
  for (int64_t chunk = 0; chunk <= 256; chunk += 256) /* resident, then streamed */
    for (int prec = 0; prec < 4; prec++) {
      float *Xs = rows_as_stored(X, n * d, prec);
      va_assign_ref(Xs, n, d, A, k, 0, ca, cr);
      free(Xs);
      va_cuda_t *ctx = va_cuda_create_streamed(0, n, d, 1, prec, chunk, va_cpu_count());
      va_cuda_upload_rows(ctx, X, 0, n);
      va_cuda_set_anchors(ctx, A, NULL, k);
      int64_t ch = va_cuda_assign(ctx, 0);
      va_cuda_download(ctx, ga, gr);
      int bad = ch != n;
      for (int i = 0; i < n; i++) bad += ga[i] != ca[i] || fabsf(gr[i] - cr[i]) > 1e-6f * cr[i];
      CHECK(bad == 0, "tiny %s (chunk %lld): wrong", pname[prec], (long long)chunk);
      CHECK(va_cuda_assign(ctx, 0) == 0, "tiny %s (chunk %lld): second pass changed rows", pname[prec],
            (long long)chunk);
      va_cuda_destroy(ctx);
    }
  for (int64_t chunk = 0; chunk <= 256; chunk += 256) {
    va_cuda_t *ctx = va_cuda_create_streamed(0, 0, 8, 4, 1, chunk, va_cpu_count());
    float A8[32] = {0};
    va_cuda_set_anchors(ctx, A8, NULL, 4);
    CHECK(va_cuda_assign(ctx, 0) == 0, "empty: rows changed");
    float rm[4];
    int64_t ra[4];
    va_cuda_farthest(ctx, rm, ra);
    CHECK(ra[0] == -1 && rm[0] == 0, "empty: farthest");
    /* no rows: zero statistics, the appended values as given */
    const double x[2] = {3, 1};
    double acc[4 * 11 + 2];
    va_stats_rule_t none = {.mode = VA_ROBUST_NONE};
    va_cuda_fetch_f64(ctx, va_cuda_stats_device(ctx, &none, x, 2), 4 * 11 + 2, acc);
    int bad = acc[44] != 3 || acc[45] != 1;
    for (int e = 0; e < 44; e++) bad += acc[e] != 0;
    CHECK(bad == 0, "empty (chunk %lld): statistics", (long long)chunk);
    va_cuda_destroy(ctx);
  }
  printf("  tiny and empty shapes checked, resident and streamed\n");
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  va_proc_init();
  int ndev = va_cuda_device_count();
  if (ndev == 0) {
    printf("SKIP: no CUDA device\n");
    MPI_Finalize();
    return 77;
  }
  va_cuda_t *probe = va_cuda_create(0, 1, 1, 1, 0);
  char desc[256];
  va_cuda_describe(probe, desc, sizeof desc);
  va_cuda_destroy(probe);
  printf("device: %s (%d visible)\n", desc, ndev);
  tiny_and_empty();
  segment_rows_case(100003, 1000, 0, 1); /* 98 tiles of 1024, the last one short */
  segment_rows_case(65536, 1024, 1, 1);  /* bins 1025: tiles of 2048; empty segments */
  segment_rows_case(300000, 2040, 0, 1); /* tiles of 4096, the largest; 80 KB of shared memory a block */
  segment_rows_case(300000, 2, 2, 1);    /* one segment of nearly every row */
  segment_rows_case(777, 3, 0, 1);       /* one tile, short */
  segment_rows_case(1500, 2000, 0, 0);   /* more bins than rows: no table fits the rows' buffer, the radix sort */
  segment_rows_case(50000, 3000, 0, 0);  /* more bins than the counting sort takes */
  farthest_many_anchors();
  farthest_init_case(10007, 128, 256, 0, 3);
  direct_case(20011, 77, 4096); /* padded d, 5 blocks, the last one short */
  direct_case(3001, 128, 4096); /* one short block */
  direct_case(300007, 40,
              65536); /* converted in place: the first 32768 rows through a buffer, then 4 ranges that double */
  cosine_case(20011, 384, 4096, 1, VA_CUDA_FP16); /* the embedder's width */
  cosine_case(3001, 77, 4096, 1, VA_CUDA_FP16);
  cosine_case(20011, 77, 4096, 0, VA_CUDA_BF16);
  farthest_init_case(5003, 77, 64, 1, 4);
  run_case(40009, 128, 1000, 16); /* k grows past k_cap; every fused configuration (3: sm_90) */
  /* odd d (padding to 96: the wgmma kernel's 1.5-piece rows at 16 bits, tf32 through the TMA), k below one tile */
  run_case(20011, 77, 37, 37);
  run_case(9001, 20, 200, 200);  /* d padded to 32: the wgmma kernel's quarter-piece rows */
  run_case(30011, 64, 300, 300); /* the wgmma kernel's half-row instances; odd tile counts */
  run_case(5003, 64, 50, 50);    /* one anchor tile */
  run_case(3001, 300, 130,
           130); /* large d: wgmma with rows in registers and 128x64 mma.sync tiles (16-bit), tf32 through the TMA */
  run_case(4001, 384, 70, 70);     /* the embedder's width: 16-bit rows in registers, tf32 rows through the TMA */
  run_case(3001, 200, 130, 130);   /* d padded to 224: tf32 through the TMA in 7 columns; 16-bit rows in registers */
  run_case(2003, 400, 1000, 1000); /* d padded to 416: 16-bit through the TMA, the last column half used; 4 tiles */
  run_case(2003, 700, 300, 300);   /* d padded to 704: 11 (16-bit) and 22 (tf32) columns through the TMA */
  run_case(2003, 1000, 600, 600);  /* d padded to 1024: rows, anchors through the TMA; 3 anchor tiles, the last short */
  run_case(1001, 2090, 300, 300);  /* d padded to 2112: 16-bit rows end in half a 128-byte column (zeros past d) */
  stream_case(40009, 128, 1000, 4096); /* 10 chunks, the last one short */
  stream_case(20011, 77, 37, 2560);    /* padded d, 8 chunks */
  stream_case(3001, 300, 130, 4096);   /* one chunk, which stays on the device after the first pass */
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
