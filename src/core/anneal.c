/* anneal.c: one iteration of docs/algorithm.md section 2 (assign, robust statistics, update, energy, maintenance,
 * convergence, cooling) and the loop around it. Every collective is one allreduce per phase; all
 * decisions read only reduced values, so every rank takes the same ones. */
#include "core/anneal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stop.h"
#include "comm/comm.h"
#include "cpu/stats.h"
#include "core/metrics.h"
#include "util/rng.h"
#include "util/util.h"

#define REALLOC(p, n, what)                                                                                            \
  do {                                                                                                                 \
    void *q_ = realloc((p), (size_t)(n) * sizeof *(p));                                                                \
    if (!q_) VA_FATAL("out of memory growing %s", what);                                                               \
    (p) = q_;                                                                                                          \
  } while (0)

static void ensure_capacity(va_state_t *st, int64_t k_needed) {
  if (k_needed <= st->k_cap) return;
  int64_t cap = st->k_cap ? st->k_cap : 16;
  while (cap < k_needed) cap *= 2;
  int64_t d = st->d, bins = st->cfg->robust == VA_ROBUST_TRIM ? st->cfg->trim_bins : 0;
  REALLOC(st->A, cap * d, "anchors");
  REALLOC(st->anorm, cap, "anchor norms");
  REALLOC(st->vel, cap * d, "momentum");
  REALLOC(st->acc, cap * VA_STATS_W(d) + 2, "statistics"); /* + changed rows + stop flag */
  /* zeros: a backend that owns the anchors never fills the sum columns on the host (backend.h) */
  memset(st->acc + st->k_cap * VA_STATS_W(d), 0, (size_t)((cap - st->k_cap) * VA_STATS_W(d) + 2) * sizeof(double));
  REALLOC(st->rmax, cap, "rmax");
  REALLOC(st->rmax_local, cap, "rmax");
  REALLOC(st->rarg, cap, "rarg");
  REALLOC(st->rms_prev, cap, "rms");
  REALLOC(st->bin_lo, cap, "trim bins");
  REALLOC(st->bin_hi, cap, "trim bins");
  if (bins) REALLOC(st->hist, cap * bins, "trim histogram");
  for (int64_t j = st->k_cap; j < cap; j++) {
    st->rms_prev[j] = 0;
    memset(st->vel + j * d, 0, (size_t)d * sizeof(double));
  }
  st->k_cap = cap;
}

void va_state_alloc(va_state_t *st) {
  int prefilled = st->A != NULL; /* init = file read the anchors already */
  st->k_cap = 0;
  ensure_capacity(st, st->k);
  /* Fault injection for tests: VECANNEAL_FAULT_POISON_ANCHORS=1 fills the fresh anchor storage with
   * 1e30, as uninitialised memory may be, so a test sees anything that reads it before the
   * initialisation has written it. */
  if (!prefilled && getenv("VECANNEAL_FAULT_POISON_ANCHORS"))
    for (int64_t e = 0; e < st->k_cap * st->d; e++) st->A[e] = 1e30f;
  st->assign = va_malloc((size_t)st->n_local * sizeof(uint32_t), "assignments");
  st->prev = va_malloc((size_t)st->n_local * sizeof(uint32_t), "previous assignments");
  st->r = va_malloc((size_t)st->n_local * sizeof(float), "row distances");
  for (int64_t i = 0; i < st->n_local; i++) st->prev[i] = UINT32_MAX;
  st->T = st->cfg->T0;
}

void va_state_free(va_state_t *st) {
  if (st->be && st->be->destroy) st->be->destroy(st);
  free(st->X);
  free(st->center);
  free(st->A);
  free(st->anorm);
  free(st->vel);
  free(st->assign);
  free(st->prev);
  free(st->r);
  free(st->acc);
  free(st->rmax);
  free(st->rmax_local);
  free(st->rarg);
  free(st->rms_prev);
  free(st->hist);
  free(st->bin_lo);
  free(st->bin_hi);
  free(st->h_energy);
  free(st->h_temp);
  free(st->h_changed);
  free(st->h_k);
  memset(st, 0, sizeof *st);
}

void va_state_anchor_norms(va_state_t *st) { st->be->set_anchors(st); }

void va_fetch_rows(va_state_t *st, const int64_t *global_rows, int64_t m, float *out) {
  int64_t *mine = va_malloc((size_t)(m > 0 ? m : 1) * sizeof(int64_t), "fetch rows"), nm = 0;
  for (int64_t q = 0; q < m; q++) {
    int64_t g = global_rows[q] - st->row0;
    if (g >= 0 && g < st->n_local) mine[nm++] = g;
  }
  if (nm == m) { /* every row is this rank's (always on one rank): in request order, straight into out */
    if (m > 0) st->be->get_rows(st, mine, m, out);
  } else {
    memset(out, 0, (size_t)(m * st->d) * sizeof(float));
    if (nm) {
      float *rows = va_malloc((size_t)(nm * st->d) * sizeof(float), "fetch rows");
      st->be->get_rows(st, mine, nm, rows);
      for (int64_t q = 0, p = 0; q < m; q++) {
        int64_t g = global_rows[q] - st->row0;
        if (g >= 0 && g < st->n_local) memcpy(out + q * st->d, rows + (p++) * st->d, (size_t)st->d * sizeof(float));
      }
      free(rows);
    }
  }
  free(mine);
  /* One owner per row and zeros elsewhere: the float sum is exact (nothing to combine on one rank). */
  va_allreduce_sum_f32(out, m * st->d);
}

/* Local assign pass; returns the local number of rows whose anchor changed. */
static int64_t assign_local(va_state_t *st) {
  va_tick_t t = va_tick();
  int64_t changed = st->be->assign(st);
  st->far_valid = 0;
  va_tock(VA_PH_ASSIGN, t);
  return changed;
}

/* Farthest member of each anchor, global: rmax (MAX allreduce); rarg stays local. Only trim (every
 * iteration), reseeding and splits read it, so it is computed when they first ask after an assignment
 * changed: the same values at the same points as computing it every iteration, and every rank asks at
 * the same points (the askers decide on reduced values). Timed in its caller's phase. */
static void farthest_global(va_state_t *st) {
  if (st->far_valid) return;
  st->be->farthest(st);
  memcpy(st->rmax, st->rmax_local, (size_t)st->k * sizeof(float));
  va_allreduce_max_f32(st->rmax, st->k);
  st->far_valid = 1;
}

/* Vectors of the farthest member of each listed anchor (lowest global row on ties), m x d. */
static void fetch_farthest(va_state_t *st, const int64_t *anchors, int64_t m, float *out) {
  farthest_global(st);
  int64_t *rows = va_malloc((size_t)m * sizeof *rows, "farthest rows");
  for (int64_t q = 0; q < m; q++) {
    int64_t j = anchors[q];
    rows[q] = (st->rarg[j] >= 0 && st->rmax_local[j] == st->rmax[j]) ? st->row0 + st->rarg[j] : INT64_MAX;
  }
  va_allreduce_min_i64(rows, m);
  for (int64_t q = 0; q < m; q++)
    if (rows[q] == INT64_MAX) rows[q] = 0; /* an anchor without members: any row will do */
  va_fetch_rows(st, rows, m, out);
  free(rows);
}

void va_unit_normalise(float *a, int64_t d) {
  double s = 0;
  for (int64_t t = 0; t < d; t++) s += (double)a[t] * a[t];
  if (s > 0) {
    double inv = 1.0 / sqrt(s);
    for (int64_t t = 0; t < d; t++) a[t] = (float)(a[t] * inv);
  }
}

void va_update_anchor(float *a, double *v, const double *sum, double w, int64_t d, double eta, double max_step,
                      double beta) {
  for (int64_t q = 0; q < d; q++) {
    double step = eta * (sum[q] / w - a[q]);
    if (max_step > 0) step = step > max_step ? max_step : step < -max_step ? -max_step : step;
    v[q] = beta * v[q] + (1.0 - beta) * step;
    a[q] = (float)(a[q] + v[q]);
  }
}

static double acc_at(const va_state_t *st, int64_t j, int64_t field) { return st->acc[j * VA_STATS_W(st->d) + field]; }

/* The host's anchors and momentum, current again (owns_anchors backends, backend.h); every rank calls it
 * at the same points. Before any host code reads or edits st->A / st->vel. */
static void anchors_to_host(va_state_t *st) {
  if (!st->anchors_stale) return;
  st->be->pull_anchors(st);
  st->anchors_stale = 0;
}

/* Anchors ranked by energy contribution, largest first, the lower anchor on ties: donors, splits. */
typedef struct {
  double key;
  int64_t j;
} cand_t;
static int cmp_cand(const void *pa, const void *pb) {
  const cand_t *a = pa, *b = pb;
  if (a->key != b->key) return a->key > b->key ? -1 : 1;
  return (a->j > b->j) - (a->j < b->j);
}

/* out = row + eps x (unit-variance noise) per coordinate: uniform on (-sqrt 3, sqrt 3), four 16-bit draws
 * from each counter-based 64-bit draw, keyed by anchor and iteration. A slight perturbation needs no
 * normal tails; normal draws (a log and a cosine each) took 27-41 ms for 280 anchors x d 3072 on one core,
 * more than an iteration of the loop at that size on one GPU (docs/performance.md). */
static void perturb(float *out, const float *row, int64_t d, double eps, uint64_t seed, uint64_t anchor,
                    uint64_t iter) {
  const double scale = eps * 1.7320508075688772 / 32768.0;
  const uint64_t words = (uint64_t)(d + 3) / 4;
  for (int64_t t = 0; t < d; t += 4) {
    uint64_t u = va_rand_u64(seed, VA_RNG_RESEED, anchor, iter * words + (uint64_t)t / 4);
    for (int64_t q = t; q < t + 4 && q < d; q++, u >>= 16)
      out[q] = (float)(row[q] + scale * ((double)(u & 0xffff) - 32767.5));
  }
}

/* Empty anchors move to the farthest member of the anchors with the largest energy contribution.
 * Returns how many moved. A backend that owns the anchors gets the moved rows alone (the host's other
 * rows may be stale: nothing here reads them). */
static int64_t reseed_empty(va_state_t *st) {
  int64_t d = st->d, k = st->k, nempty = 0, ndonor = 0;
  for (int64_t j = 0; j < k; j++) nempty += acc_at(st, j, VA_ST_COUNT(d)) == 0;
  if (!nempty) return 0;
  int64_t *empty = va_malloc((size_t)nempty * sizeof *empty, "reseed"),
          *donor = va_malloc((size_t)k * sizeof *donor, "reseed");
  nempty = 0;
  for (int64_t j = 0; j < k; j++) {
    if (acc_at(st, j, VA_ST_COUNT(d)) == 0) empty[nempty++] = j;
    else if (acc_at(st, j, VA_ST_COUNT(d)) >= 2) donor[ndonor++] = j;
  }
  if (ndonor == 0) {
    free(empty);
    free(donor);
    return 0;
  }
  /* Donors by energy contribution, largest first, the lower anchor first on ties: sorted over a compact
   * copy of the contributions (read in place, each comparison touched another anchor's statistics row,
   * d + 3 doubles apart: slow at d in the thousands, docs/performance.md "Reseeding of empty anchors"). */
  int64_t need = nempty < ndonor ? nempty : ndonor;
  cand_t *order = va_malloc((size_t)ndonor * sizeof *order, "reseed");
  for (int64_t b = 0; b < ndonor; b++) order[b] = (cand_t){acc_at(st, donor[b], VA_ST_RSUM(d)), donor[b]};
  qsort(order, (size_t)ndonor, sizeof *order, cmp_cand);
  for (int64_t b = 0; b < need; b++) donor[b] = order[b].j;
  free(order);
  int64_t *src = va_malloc((size_t)nempty * sizeof *src, "reseed");
  for (int64_t e = 0; e < nempty; e++) src[e] = donor[e % need];
  float *vec = va_malloc((size_t)(nempty * d) * sizeof(float), "reseed vectors");
  fetch_farthest(st, src, nempty, vec);
  /* anchors are independent and the noise counter-based: the same result for any thread count */
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(st->aopts.threads) schedule(static)
#endif
  for (int64_t e = 0; e < nempty; e++) {
    int64_t j = empty[e], s = src[e];
    double mse = acc_at(st, s, VA_ST_RSUM(d)) / acc_at(st, s, VA_ST_COUNT(d));
    double eps = 1e-3 * sqrt((mse > 0 ? mse : 1e-12) / (double)d);
    perturb(st->A + j * d, vec + e * d, d, eps, st->cfg->seed, (uint64_t)j, (uint64_t)st->iter);
    if (st->cosine) va_unit_normalise(st->A + j * d, d);
    memset(st->vel + j * d, 0, (size_t)d * sizeof(double));
  }
  if (st->be->owns_anchors) st->be->replace_anchor_rows(st, empty, nempty);
  st->reseeds += nempty;
  free(vec);
  free(src);
  free(empty);
  free(donor);
  return nempty;
}

/* Statistics (s2.2), energy (s2.4) and update (s2.3) for the current assignment. */
static void reduce_and_update(va_state_t *st, int64_t changed_local) {
  const va_config_t *c = st->cfg;
  int64_t d = st->d, k = st->k, W = VA_STATS_W(d);
  va_stats_rule_t rule = {
      .mode = c->robust, .bin_lo = st->bin_lo, .bin_hi = st->bin_hi, .rmax = st->rmax, .bins = c->trim_bins};
  double *delta = NULL;
  if (c->robust == VA_ROBUST_TRIM) {
    va_tick_t t = va_tick();
    farthest_global(st);
    memset(st->hist, 0, (size_t)(k * c->trim_bins) * sizeof(double));
    st->be->hist(st, c->trim_bins, st->hist);
    va_tock(VA_PH_REDUCE, t);
    va_allreduce_sum_f64(st->hist, k * c->trim_bins);
    t = va_tick();
    va_trim_bins(st->hist, k, c->trim_bins, c->trim_near, c->trim_far, st->bin_lo, st->bin_hi);
    va_tock(VA_PH_REDUCE, t);
  } else if (c->robust == VA_ROBUST_HUBER) {
    delta = va_malloc((size_t)k * sizeof *delta, "huber delta");
    for (int64_t j = 0; j < k; j++) delta[j] = c->huber_c * st->rms_prev[j];
    rule.huber_delta = delta;
  }
  va_tick_t t = va_tick();
  /* with the statistics: the changed rows, and the stop flag (every rank learns of a stop signal in the
   * same iteration) */
  const double extra[VA_ITER_EXTRAS] = {(double)changed_local, va_stop_requested()};
  /* A backend that owns the anchors moves them inside stats (it has the sums); the host does it below. */
  const va_update_t upd = {va_eta(c->lr, st->T), c->momentum, c->max_step};
  st->be->stats(st, &rule, extra, VA_ITER_EXTRAS, &upd, st->acc);
  if (st->be->owns_anchors) st->anchors_stale = 1;
  va_tock(VA_PH_REDUCE, t);
  free(delta);
  st->changed = (int64_t)st->acc[k * W];
  st->stop_agreed = st->acc[k * W + 1] > 0;
  double esum = 0;
  for (int64_t j = 0; j < k; j++) {
    double cnt = acc_at(st, j, VA_ST_COUNT(d));
    esum += acc_at(st, j, VA_ST_RSUM(d));
    st->rms_prev[j] = cnt > 0 ? sqrt(acc_at(st, j, VA_ST_RSUM(d)) / cnt) : 0;
  }
  st->E_prev = st->E;
  st->E = esum / (double)st->n;

  t = va_tick();
  if (!st->be->owns_anchors) {
    /* anchors are independent: the same result for any thread count */
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(st->aopts.threads) schedule(static)
#endif
    for (int64_t j = 0; j < k; j++) {
      double cnt = acc_at(st, j, VA_ST_COUNT(d)), w = acc_at(st, j, VA_ST_WEIGHT(d));
      if (!(cnt > 0 && w > 0)) continue;
      va_update_anchor(st->A + j * d, st->vel + j * d, st->acc + j * W, w, d, upd.eta, upd.max_step, upd.beta);
      if (st->cosine) va_unit_normalise(st->A + j * d, d);
    }
  }
  /* the backend gets the anchors again when the host moved them (a backend that owns them already has
   * its own update, and reseeding hands it the moved rows) */
  reseed_empty(st);
  if (!st->be->owns_anchors) va_state_anchor_norms(st);
  va_tock(VA_PH_UPDATE, t);
}

typedef struct {
  double dist;
  int64_t i, j;
} pair_t;
static int cmp_pair(const void *pa, const void *pb) {
  const pair_t *a = pa, *b = pb;
  if (a->dist != b->dist) return a->dist < b->dist ? -1 : 1;
  if (a->i != b->i) return a->i < b->i ? -1 : 1;
  return (a->j > b->j) - (a->j < b->j);
}

static double anchor_dist(const float *a, const float *b, int64_t d) {
  double s = 0;
  for (int64_t t = 0; t < d; t++) {
    double x = (double)a[t] - b[t];
    s += x * x;
  }
  return sqrt(s);
}

/* Merge (s2.5): pairs closer than merge_factor x the mean anchor distance, closest first, each anchor
 * in at most one merge per round; j is deleted and its members move to i. */
static void merge_anchors(va_state_t *st) {
  const va_config_t *c = st->cfg;
  int64_t k = st->k, d = st->d, W = VA_STATS_W(d);
  int64_t k_min = c->k_min > 0 ? c->k_min : st->k_initial;
  if (k < 2 || c->merge_factor <= 0 || k <= k_min) return;
  anchors_to_host(st);
  double *rowsum = va_calloc((size_t)k, sizeof(double), "merge");
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(st->aopts.threads) schedule(dynamic, 8)
#endif
  for (int64_t i = 0; i < k; i++)
    for (int64_t j = i + 1; j < k; j++) rowsum[i] += anchor_dist(st->A + i * d, st->A + j * d, d);
  double total = 0;
  for (int64_t i = 0; i < k; i++) total += rowsum[i];
  free(rowsum);
  double thr = c->merge_factor * total / ((double)k * (double)(k - 1) / 2.0);
  pair_t *pairs = NULL;
  int64_t np = 0, cap = 0;
  for (int64_t i = 0; i < k; i++)
    for (int64_t j = i + 1; j < k; j++) {
      double dist = anchor_dist(st->A + i * d, st->A + j * d, d);
      if (dist < thr) {
        if (np == cap) {
          cap = cap ? 2 * cap : 64;
          REALLOC(pairs, cap, "merge pairs");
        }
        pairs[np++] = (pair_t){dist, i, j};
      }
    }
  if (!np) return;
  qsort(pairs, (size_t)np, sizeof *pairs, cmp_pair);
  int64_t *target = va_malloc((size_t)k * sizeof *target, "merge map");
  char *taken = va_calloc((size_t)k, 1, "merge flags");
  for (int64_t j = 0; j < k; j++) target[j] = j;
  int64_t k_after = k;
  for (int64_t p = 0; p < np && k_after > k_min; p++) {
    int64_t i = pairs[p].i, j = pairs[p].j;
    if (taken[i] || taken[j]) continue;
    taken[i] = taken[j] = 1;
    double ci = acc_at(st, i, VA_ST_COUNT(d)), cj = acc_at(st, j, VA_ST_COUNT(d));
    double wi = ci + cj > 0 ? ci / (ci + cj) : 0.5;
    for (int64_t t = 0; t < d; t++) st->A[i * d + t] = (float)(wi * st->A[i * d + t] + (1 - wi) * st->A[j * d + t]);
    if (st->cosine) va_unit_normalise(st->A + i * d, d);
    for (int64_t t = 0; t < W; t++) st->acc[i * W + t] += st->acc[j * W + t];
    memset(st->vel + i * d, 0, (size_t)d * sizeof(double));
    target[j] = i;
    k_after--;
  }
  free(pairs);
  free(taken);
  /* Compact the survivors in order; old index -> new index. */
  int64_t *newidx = va_malloc((size_t)k * sizeof *newidx, "merge map");
  int64_t m = 0;
  for (int64_t j = 0; j < k; j++)
    if (target[j] == j) {
      newidx[j] = m;
      if (m != j) {
        memmove(st->A + m * d, st->A + j * d, (size_t)d * sizeof(float));
        memmove(st->vel + m * d, st->vel + j * d, (size_t)d * sizeof(double));
        memmove(st->acc + m * W, st->acc + j * W, (size_t)W * sizeof(double));
        st->rms_prev[m] = st->rms_prev[j];
      }
      m++;
    }
  for (int64_t j = 0; j < k; j++)
    if (target[j] != j) newidx[j] = newidx[target[j]];
  st->be->remap(st, newidx, k);
  st->far_valid = 0; /* members moved: the split's farthest members are those of the remapped rows */
  st->merges += k - m;
  st->k = m;
  free(newidx);
  free(target);
  va_state_anchor_norms(st);
}

/* Split (s2.5): crowded or wide anchors, largest energy contribution first, up to k_max; a few
 * iterations of 2-means on the members seeded by the farthest member and its mirror image. */
static void split_anchors(va_state_t *st) {
  const va_config_t *c = st->cfg;
  int64_t k = st->k, d = st->d;
  if (k >= st->k_max) return;
  double var_thr =
      c->split_var_mode == VA_SPLITVAR_RELATIVE ? c->split_var_factor * st->T * st->E : c->split_var_factor * st->T;
  cand_t *cand = va_malloc((size_t)k * sizeof *cand, "split");
  int64_t nc = 0;
  for (int64_t j = 0; j < k; j++) {
    double cnt = acc_at(st, j, VA_ST_COUNT(d)), rsum = acc_at(st, j, VA_ST_RSUM(d));
    if (cnt < 2) continue;
    int crowded = c->split_count_factor > 0 && cnt > c->split_count_factor * (double)st->n / (double)k;
    int wide = c->split_var_factor > 0 && rsum / cnt > var_thr;
    if (crowded || wide) cand[nc++] = (cand_t){rsum, j};
  }
  int64_t m = nc < st->k_max - k ? nc : st->k_max - k;
  if (m <= 0) {
    free(cand);
    return;
  }
  anchors_to_host(st);
  qsort(cand, (size_t)nc, sizeof *cand, cmp_cand);
  ensure_capacity(st, k + m);
  int64_t *which = va_malloc((size_t)m * sizeof *which, "split"), *slot = va_malloc((size_t)k * sizeof *slot, "split");
  for (int64_t j = 0; j < k; j++) slot[j] = -1;
  for (int64_t q = 0; q < m; q++) {
    which[q] = cand[q].j;
    slot[cand[q].j] = q;
  }
  free(cand);
  float *cent = va_malloc((size_t)(2 * m * d) * sizeof(float), "split centroids");
  float *far = va_malloc((size_t)(m * d) * sizeof(float), "split seeds");
  fetch_farthest(st, which, m, far);
  for (int64_t q = 0; q < m; q++) {
    const float *a = st->A + which[q] * d;
    for (int64_t t = 0; t < d; t++) {
      cent[(2 * q) * d + t] = far[q * d + t];
      cent[(2 * q + 1) * d + t] = 2.0f * a[t] - far[q * d + t];
    }
    if (st->cosine) {
      va_unit_normalise(cent + 2 * q * d, d);
      va_unit_normalise(cent + (2 * q + 1) * d, d);
    }
  }
  int64_t SW = d + 1;
  double *sums = va_malloc((size_t)(2 * m * SW) * sizeof(double), "split sums");
  for (int64_t it = 0; it < c->split_iters; it++) {
    va_tick_t t = va_tick();
    memset(sums, 0, (size_t)(2 * m * SW) * sizeof(double));
    st->be->split_accumulate(st, slot, m, cent, sums);
    va_tock(VA_PH_MAINT, t);
    va_allreduce_sum_f64(sums, 2 * m * SW);
    for (int64_t h = 0; h < 2 * m; h++) {
      double cnt = sums[h * SW + d];
      if (cnt > 0)
        for (int64_t u = 0; u < d; u++) cent[h * d + u] = (float)(sums[h * SW + u] / cnt);
      if (st->cosine) va_unit_normalise(cent + h * d, d);
    }
  }
  for (int64_t q = 0; q < m; q++) {
    int64_t j = which[q], nj = k + q;
    memcpy(st->A + j * d, cent + 2 * q * d, (size_t)d * sizeof(float));
    memcpy(st->A + nj * d, cent + (2 * q + 1) * d, (size_t)d * sizeof(float));
    memset(st->vel + j * d, 0, (size_t)d * sizeof(double));
    memset(st->vel + nj * d, 0, (size_t)d * sizeof(double));
    st->rms_prev[nj] = st->rms_prev[j];
  }
  st->k = k + m;
  st->splits += m;
  va_state_anchor_norms(st);
  free(sums);
  free(far);
  free(cent);
  free(which);
  free(slot);
}

static void push_history(va_state_t *st) {
  if (st->iter >= st->h_cap) {
    st->h_cap = st->h_cap ? 2 * st->h_cap : 64;
    REALLOC(st->h_energy, st->h_cap, "history");
    REALLOC(st->h_temp, st->h_cap, "history");
    REALLOC(st->h_changed, st->h_cap, "history");
    REALLOC(st->h_k, st->h_cap, "history");
  }
  st->h_energy[st->iter] = st->E;
  st->h_temp[st->iter] = st->T;
  st->h_changed[st->iter] = st->changed;
  st->h_k[st->iter] = st->k;
}

/* A progress line held back (va_anneal), printed now if there is one. */
static void flush_line(const char *line, int *pending) {
  if (*pending) va_log0("%s", line);
  *pending = 0;
}

/* A checkpoint from the loop: the held-back line first (it belongs before whatever the checkpoint
 * prints), then the host's anchors current. */
static void checkpoint_now(va_state_t *st, const char *line, int *pending) {
  flush_line(line, pending);
  anchors_to_host(st);
  st->checkpoint_fn(st, st->checkpoint_ctx);
}

void va_anneal(va_state_t *st) {
  const va_config_t *c = st->cfg;
  st->k_max = c->k_max == 0 ? st->k_initial : c->k_max < 0 ? st->n : (c->k_max < st->n ? c->k_max : st->n);
  if (st->k_max < st->k) st->k_max = st->k;
  st->min_changes = c->min_changes >= 0 ? c->min_changes : st->n / 1000;
  /* Out-of-core rows: one more column, the rows' host-to-device rate over the iteration. */
  const int streamed = st->be->streamed_bytes && st->be->streamed_bytes(st) >= 0;
  /* ETA: to max_iter at the mean rate of this run's iterations so far (the run may converge sooner). */
  if (c->progress_every > 0)
    va_log0("%6s %11s %14s %11s %12s %7s %9s %7s%s\n", "iter", "T", "energy", "distortion", "changed", "anchors",
            "ms/iter", "ETA", streamed ? " stream GB/s" : "");
  const double t_start = va_now();
  const int64_t iter_start = st->iter;
  /* A progress line waits for the next iteration's assign when that only queued its pass (the CUDA
   * backend: VA_CHANGED_IN_STATS): printed at once, the host's write would hold the device idle between
   * two iterations (docs/performance.md). Lines keep their order; whatever else the loop prints comes
   * after the line of the iteration before. */
  char line[192];
  int line_pending = 0;
  while (st->iter < c->max_iter && !st->converged) {
    double t0 = va_now(), b0 = streamed ? st->be->streamed_bytes(st) : 0;
    int64_t changed_local = assign_local(st);
    flush_line(line, &line_pending);
    double T_used = st->T;
    reduce_and_update(st, changed_local);
    push_history(st);
    if (c->maintenance_interval > 0 && (st->iter + 1) % c->maintenance_interval == 0) {
      va_tick_t t = va_tick();
      /* each pulls the anchors from a backend that owns them only when it will read them */
      merge_anchors(st);
      split_anchors(st);
      va_tock(VA_PH_MAINT, t);
    }
    if (st->iter > 0) { /* iter still counts the iterations before this one */
      double dE = fabs(st->E - st->E_prev);
      double lim = c->tol_mode == VA_TOL_ABSOLUTE ? c->tol : c->tol * st->E_prev;
      st->still = (dE <= lim && st->changed <= st->min_changes) ? st->still + 1 : 0;
      st->converged = st->still >= 3;
    }
    st->T *= 1.0 - c->cooling_rate;
    st->iter++;
    double ms = 1e3 * (va_now() - t0);
    if (c->progress_every > 0 && (st->iter % c->progress_every == 0 || st->converged || st->iter == c->max_iter)) {
      char rate[32] = "";
      if (streamed) snprintf(rate, sizeof rate, " %11.2f", (st->be->streamed_bytes(st) - b0) / (ms * 1e6));
      char eta[32];
      va_format_seconds((va_now() - t_start) / (double)(st->iter - iter_start) * (double)(c->max_iter - st->iter), eta,
                        sizeof eta);
      snprintf(line, sizeof line, "%6lld %11.4g %14.8g %11.4g %12lld %7lld %9.2f %7s%s\n", (long long)st->iter, T_used,
               st->E, st->total_var > 0 ? st->E / st->total_var : 0.0, (long long)st->changed, (long long)st->k, ms,
               st->converged ? "-" : eta, rate);
      line_pending = 1;
      if (changed_local != VA_CHANGED_IN_STATS) flush_line(line, &line_pending);
    }
    if (st->stop_agreed && st->checkpoint_fn) {
      checkpoint_now(st, line, &line_pending);
      st->stopped = 1;
      break;
    }
    if (c->checkpoint_every > 0 && st->iter % c->checkpoint_every == 0 && !st->converged && st->iter < c->max_iter &&
        st->checkpoint_fn)
      checkpoint_now(st, line, &line_pending);
  }
  flush_line(line, &line_pending);
}

void va_anneal_anchors_to_host(va_state_t *st) { anchors_to_host(st); }

double va_final_pass(va_state_t *st, double *counts, double *mse) {
  int64_t k = st->k, d = st->d, W = VA_STATS_W(d);
  assign_local(st);
  va_tick_t t = va_tick();
  double *acc = va_malloc((size_t)(k * W) * sizeof(double), "final statistics");
  va_stats_rule_t none = {.mode = VA_ROBUST_NONE};
  st->be->stats(st, &none, NULL, 0, NULL, acc);
  va_tock(VA_PH_REDUCE, t);
  double esum = 0;
  for (int64_t j = 0; j < k; j++) {
    counts[j] = acc[j * W + VA_ST_COUNT(d)];
    mse[j] = counts[j] > 0 ? acc[j * W + VA_ST_RSUM(d)] / counts[j] : 0;
    esum += acc[j * W + VA_ST_RSUM(d)];
  }
  free(acc);
  st->be->sync_host(st);
  return esum / (double)st->n;
}
