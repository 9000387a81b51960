/* test_maintenance.c: merge, split and re-seeding (docs/algorithm.md section 2.5) on hand-built data whose right
 * answer is known: a split of one anchor over two far clusters lands on both centres; two coincident
 * anchors merge into one (the other is deleted, assignments remapped); an anchor with no members is
 * re-seeded onto a data row, never left empty or NaN. One rank; exits non-zero on failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/anneal.h"
#include "util/rng.h"
#include "util/util.h"

#include "../check.h" /* failures, CHECK */

static void make_config(va_config_t *cfg, const char *const *kv) {
  va_config_src_t *src = va_config_src_new();
  char err[512];
  const char *base[] = {"input=x.h5:/train",      "out=o.h5",         "lr=2",  "T0=1",          "cooling_rate=0",
                        "maintenance_interval=1", "progress_every=0", "tol=0", "min_changes=0", NULL};
  for (int i = 0; base[i]; i++) va_config_src_add_kv(src, base[i], "test", err, sizeof err);
  for (int i = 0; kv[i]; i++)
    if (va_config_src_add_kv(src, kv[i], "test", err, sizeof err)) {
      printf("config: %s\n", err);
      exit(2);
    }
  if (va_config_resolve(src, cfg, err, sizeof err)) {
    printf("config: %s\n", err);
    exit(2);
  }
  va_config_src_free(src);
}

/* Rows around the given centres (d = 4), tight noise. */
static float *clusters(const float (*c)[4], int nc, int per, int64_t *n) {
  *n = (int64_t)nc * per;
  float *X = malloc((size_t)(*n * 4) * sizeof(float));
  for (int64_t i = 0; i < *n; i++)
    for (int t = 0; t < 4; t++)
      X[i * 4 + t] = (float)(c[i / per][t] + 0.01 * va_rand_normal(7, 1, (uint64_t)i, (uint64_t)t));
  return X;
}

static void setup(va_state_t *st, const va_config_t *cfg, float *X, int64_t n, int64_t k) {
  memset(st, 0, sizeof *st);
  st->cfg = cfg;
  st->be = &va_backend_cpu;
  st->n = st->n_local = n;
  st->d = 4;
  st->X = X;
  st->center = calloc(4, sizeof(double));
  st->total_var = 1;
  st->k = st->k_initial = k;
  st->aopts.threads = 1;
  va_state_alloc(st);
}

static double dist_to(const float *a, const float *b) {
  double s = 0;
  for (int t = 0; t < 4; t++) s += ((double)a[t] - b[t]) * ((double)a[t] - b[t]);
  return sqrt(s);
}

static void test_split(void) {
  static const float c[2][4] = {{-5, 0, 0, 0}, {5, 0, 0, 0}};
  int64_t n;
  float *X = clusters(c, 2, 200, &n);
  va_config_t cfg;
  make_config(&cfg, (const char *const[]){"k=1", "k_max=2", "split_count_factor=0.5", "max_iter=3", NULL});
  va_state_t st;
  setup(&st, &cfg, X, n, 1);
  memcpy(st.A, X, 4 * sizeof(float)); /* one anchor on the first row */
  va_state_anchor_norms(&st);
  va_anneal(&st);
  va_anneal_anchors_to_host(&st);
  CHECK(st.k == 2 && st.splits == 1, "split: k %lld splits %lld", (long long)st.k, (long long)st.splits);
  double d0 = fmin(dist_to(st.A, c[0]), dist_to(st.A, c[1])),
         d1 = fmin(dist_to(st.A + 4, c[0]), dist_to(st.A + 4, c[1]));
  CHECK(d0 < 0.05 && d1 < 0.05 && dist_to(st.A, st.A + 4) > 9, "split anchors not on the two centres (%g, %g)", d0, d1);
  printf("split: k 1 -> %lld, anchors within %.3g of the centres, energy %.3g\n", (long long)st.k, fmax(d0, d1), st.E);
  va_state_free(&st);
}

static void test_merge(void) {
  static const float c[3][4] = {{0, 0, 0, 0}, {10, 0, 0, 0}, {0, 10, 0, 0}};
  int64_t n;
  float *X = clusters(c, 3, 100, &n);
  va_config_t cfg;
  make_config(&cfg, (const char *const[]){"k=4", "k_min=1", "merge_factor=0.1", "max_iter=1", NULL});
  va_state_t st;
  setup(&st, &cfg, X, n, 4);
  const float A0[4][4] = {{0, 0, 0, 0}, {10, 0, 0, 0}, {0.001f, 0, 0, 0}, {0, 10, 0, 0}};
  memcpy(st.A, A0, sizeof A0);
  va_state_anchor_norms(&st);
  va_anneal(&st);
  va_anneal_anchors_to_host(&st);
  CHECK(st.k == 3 && st.merges == 1, "merge: k %lld merges %lld", (long long)st.k, (long long)st.merges);
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= st.assign[i] < 3;
  CHECK(ok, "assignments not remapped after the merge");
  CHECK(dist_to(st.A, c[0]) < 0.05 && dist_to(st.A + 4, c[1]) < 0.05 && dist_to(st.A + 8, c[2]) < 0.05,
        "merged anchors misplaced");
  printf("merge: k 4 -> %lld (anchor 2 deleted, its members moved to anchor 0)\n", (long long)st.k);
  va_state_free(&st);
}

static void test_reseed(void) {
  static const float c[2][4] = {{0, 0, 0, 0}, {3, 0, 0, 0}};
  int64_t n;
  float *X = clusters(c, 2, 100, &n);
  va_config_t cfg;
  make_config(&cfg, (const char *const[]){"k=3", "max_iter=1", "maintenance_interval=0", NULL});
  va_state_t st;
  setup(&st, &cfg, X, n, 3);
  const float A0[3][4] = {{0, 0, 0, 0}, {1.5f, 0, 0, 0}, {100, 100, 0, 0}};
  memcpy(st.A, A0, sizeof A0);
  va_state_anchor_norms(&st);
  va_anneal(&st);
  va_anneal_anchors_to_host(&st);
  double best = 1e30, worst_sq = 0;
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++) {
    const double di = dist_to(st.A + 8, X + i * 4);
    if (di < best) best = di, at = i;
    const double to0 = dist_to(A0[0], X + i * 4), to1 = dist_to(A0[1], X + i * 4), near = fmin(to0, to1);
    worst_sq = fmax(worst_sq, near * near);
  }
  CHECK(st.reseeds == 1 && isfinite(st.A[8]) && best < 0.01,
        "reseed: %lld reseeds, anchor 2 at distance %g from the data", (long long)st.reseeds, best);
  /* the perturbation: 1e-3 x sqrt(donor's mean squared member distance / d) x a draw in (-sqrt 3, sqrt 3) per
   * coordinate; no member of any donor is farther than worst_sq, so it is bounded, and it is not zero */
  double dev = 0;
  for (int t = 0; t < 4; t++) dev = fmax(dev, fabs((double)st.A[8 + t] - X[at * 4 + t]));
  const double bound = 1e-3 * sqrt(3.0) * sqrt(worst_sq / 4) + 1e-6;
  CHECK(dev > 0 && dev <= bound, "reseed: perturbation %g, expected in (0, %g]", dev, bound);
  printf("reseed: the empty anchor moved onto a row (distance %.2g, perturbation %.2g <= %.2g)\n", best, dev, bound);
  va_state_free(&st);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  va_proc_init();
  test_split();
  test_merge();
  test_reseed();
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
