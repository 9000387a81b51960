/* init.c: initial anchors (docs/algorithm.md section 1): kmeans|| (scalable k-means++), random rows, farthest
 * point (parity) and anchors from a file. Every random draw is keyed by global row or step, and every
 * candidate list is sorted by global row, so the anchors do not depend on the rank count. */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/anneal.h"
#include "comm/comm.h"
#include "io/h5io.h"
#include "core/metrics.h"
#include "core/sample.h" /* va_sample_range, va_sample_row */
#include "util/rng.h"
#include "core/stop.h" /* va_stop_point */
#include "util/util.h"

typedef struct {
  uint64_t key;
  int64_t row;
} keyed_t;
static int cmp_keyed(const void *pa, const void *pb) {
  const keyed_t *a = pa, *b = pb;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  return (a->row > b->row) - (a->row < b->row);
}
static int cmp_i64(const void *pa, const void *pb) {
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  return (a > b) - (a < b);
}

/* Max-heap of (key, row) pairs in the cmp_keyed order: sifts h[i] down among the first m. */
static void heap_down(keyed_t *h, int64_t m, int64_t i) {
  for (;;) {
    int64_t l = 2 * i + 1, r = l + 1, big = i;
    if (l < m && cmp_keyed(&h[l], &h[big]) > 0) big = l;
    if (r < m && cmp_keyed(&h[r], &h[big]) > 0) big = r;
    if (big == i) return;
    keyed_t t = h[i];
    h[i] = h[big];
    h[big] = t;
    i = big;
  }
}

/* Local row i's key for a random draw: the same for any rank count (keyed by global row). */
static keyed_t row_key(const va_state_t *st, uint64_t purpose, int64_t i) {
  return (keyed_t){va_rand_u64(st->cfg->seed, purpose, (uint64_t)(st->row0 + i), 0), st->row0 + i};
}

/* k distinct rows, uniformly: the k smallest hash keys over all global rows. Each rank keeps its own k
 * smallest in a max-heap (one pass over its rows, no per-row memory: nearly every key loses against
 * the heap's top at once, cheaper than a sort of all n_local pairs; docs/performance.md), then the
 * ranks' sets are gathered and sorted. */
static void random_rows(va_state_t *st, int64_t k, uint64_t purpose, int64_t *rows) {
  int64_t keep = k < st->n_local ? k : st->n_local;
  keyed_t *loc = va_malloc((size_t)(keep > 0 ? keep : 1) * sizeof *loc, "random init keys");
  for (int64_t i = 0; i < keep; i++) loc[i] = row_key(st, purpose, i);
  for (int64_t j = keep / 2 - 1; j >= 0; j--) heap_down(loc, keep, j);
  for (int64_t i = keep; i < st->n_local; i++) {
    keyed_t x = row_key(st, purpose, i);
    if (cmp_keyed(&x, &loc[0]) < 0) {
      loc[0] = x;
      heap_down(loc, keep, 0);
    }
  }
  int P = va_proc.nranks;
  int *counts = va_malloc((size_t)P * sizeof(int), "gather"), *displs = va_malloc((size_t)P * sizeof(int), "gather");
  int mine = (int)(keep * (int64_t)sizeof(keyed_t));
  VA_MPI(MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD));
  int64_t total = 0;
  for (int p = 0; p < P; p++) {
    displs[p] = (int)total;
    total += counts[p];
  }
  keyed_t *all = va_malloc((size_t)total, "random init gather");
  VA_MPI(MPI_Allgatherv(loc, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, MPI_COMM_WORLD));
  int64_t nall = total / (int64_t)sizeof(keyed_t);
  qsort(all, (size_t)nall, sizeof *all, cmp_keyed);
  for (int64_t q = 0; q < k; q++) rows[q] = all[q].row;
  free(all);
  free(displs);
  free(counts);
  free(loc);
}

static void init_random(va_state_t *st) {
  int64_t *rows = va_malloc((size_t)st->k * sizeof *rows, "random init");
  random_rows(st, st->k, VA_RNG_INIT_RANDOM, rows);
  va_fetch_rows(st, rows, st->k, st->A);
  free(rows);
}

/* Running minimum of the distance to a set of anchors, updated with m new ones, for the local rows rows[0..nrows)
 * (NULL: every local row; backend.h's assign_to). */
static void update_min_dist(va_state_t *st, const float *C, int64_t m, const int64_t *rows, int64_t nrows, float *mind,
                            uint32_t *tmp_a, float *tmp_r) {
  float *cn = va_malloc((size_t)m * sizeof(float), "init norms");
  va_row_norms(C, m, st->d, cn);
  st->be->assign_to(st, C, cn, m, rows, nrows, tmp_a, tmp_r);
  for (int64_t i = 0; i < nrows; i++)
    if (tmp_r[i] < mind[i]) mind[i] = tmp_r[i];
  free(cn);
}

/* Rank 0, a stage that runs longer than va_progress_seconds(): how far it is and when it ends at this rate. */
static void log_stage_eta(const char *stage, int64_t done, int64_t total, const char *unit, double elapsed) {
  char eta[32];
  va_format_seconds(done > 0 ? elapsed * (double)(total - done) / (double)done : 0, eta, sizeof eta);
  va_log0("init %s: %lld of %lld %s, %.1f s, ETA %s\n", stage, (long long)done, (long long)total, unit, elapsed, eta);
}

/* Farthest-point (parity): anchor 0 is global row 0, each next one the row farthest from its nearest
 * chosen anchor (ties to the lowest global row); O(k n d) through each row's running minimum. */
static void init_farthest(va_state_t *st) {
  if (st->be->init_farthest && st->be->init_farthest(st)) return;
  int64_t d = st->d, n = st->n_local;
  float *mind = va_malloc((size_t)(n > 0 ? n : 1) * sizeof(float), "farthest init");
  float *dist = va_malloc((size_t)(n > 0 ? n : 1) * sizeof(float), "farthest init");
  uint32_t *lab = va_malloc((size_t)(n > 0 ? n : 1) * sizeof(uint32_t), "farthest init");
  for (int64_t i = 0; i < n; i++) mind[i] = FLT_MAX;
  int64_t row = 0;
  double t0 = va_now(), last = t0;
  for (int64_t q = 0; q < st->k; q++) {
    if ((q & 63) == 63) va_stop_point("initialisation"); /* collective: every rank runs the same picks */
    if (va_now() - last >= va_progress_seconds()) {
      last = va_now();
      log_stage_eta("farthest", q, st->k, "anchors", last - t0);
    }
    va_fetch_rows(st, &row, 1, st->A + q * d);
    float an;
    va_row_norms(st->A + q * d, 1, d, &an);
    st->be->assign_to(st, st->A + q * d, &an, 1, NULL, n, lab, dist);
    float best = -1;
    int64_t arg = INT64_MAX;
    for (int64_t i = 0; i < n; i++) {
      if (dist[i] < mind[i]) mind[i] = dist[i];
      if (mind[i] > best) {
        best = mind[i];
        arg = st->row0 + i;
      }
    }
    float gbest = best;
    va_allreduce_max_f32(&gbest, 1);
    int64_t cand = (best == gbest) ? arg : INT64_MAX;
    va_allreduce_min_i64(&cand, 1);
    row = cand == INT64_MAX ? 0 : cand;
  }
  free(lab);
  free(dist);
  free(mind);
}

/* Distances from candidate p to all m candidates (one sgemv), clamped at 0. */
static void candidate_distances(const float *C, const float *cn, int64_t m, int64_t d, int64_t p, int cosine,
                                float *dist) {
  cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)m, (int)d, 1.0f, C, (int)d, C + p * d, 1, 0.0f, dist, 1);
  for (int64_t i = 0; i < m; i++) {
    float v = cosine ? 1.0f - dist[i] : cn[i] + cn[p] - 2.0f * dist[i];
    dist[i] = v > 0 ? v : 0;
  }
}

/* Weighted greedy k-means++ on the gathered candidates (at each step 2 + ln k draws by D^2 weight, the
 * one that lowers the potential most is kept, as scikit-learn does); identical on every rank. No
 * weighted Lloyd steps on the candidates afterwards: they pull the anchors towards the candidates'
 * own optimum (D^2 sampling over-represents the tails) and raise the energy after 20 iterations
 * (docs/performance.md). */
static void weighted_kmeanspp(const va_state_t *st, const float *C, const double *w, int64_t m, float *out) {
  int64_t d = st->d, k = st->k;
  const int trials = 2 + (int)log((double)k);
  double *best = va_malloc((size_t)m * sizeof(double), "kmeans++"), total = 0,
         *trial_pot = va_malloc((size_t)trials * sizeof(double), "kmeans++");
  float *cn = va_malloc((size_t)m * sizeof(float), "kmeans++"),
        *dist = va_malloc((size_t)(trials * m) * sizeof(float), "kmeans++");
  int64_t *picks = va_malloc((size_t)trials * sizeof(int64_t), "kmeans++");
  va_row_norms(C, m, d, cn);
  for (int64_t i = 0; i < m; i++) total += w[i];
  /* First centre: drawn by weight. */
  double u = va_rand_unit(st->cfg->seed, VA_RNG_INIT_PP, 0, 0) * total, cum = 0;
  int64_t pick = m - 1;
  for (int64_t i = 0; i < m; i++) {
    cum += w[i];
    if (cum > u) {
      pick = i;
      break;
    }
  }
  memcpy(out, C + pick * d, (size_t)d * sizeof(float));
  candidate_distances(C, cn, m, d, pick, st->cosine, dist);
  for (int64_t i = 0; i < m; i++) best[i] = dist[i];
  double t0 = va_now(), last = t0;
  for (int64_t q = 1; q < k; q++) {
    if (va_now() - last >= va_progress_seconds()) {
      last = va_now();
      log_stage_eta("kmeans|| k-means++", q, k, "anchors", last - t0);
    }
    if ((q & 63) == 0) va_stop_point("initialisation"); /* collective: every rank runs the same draws */
    double pot = 0;
    for (int64_t i = 0; i < m; i++) pot += w[i] * best[i];
    /* The draws depend only on the potential before this step, so the trials' distances (one sgemv
     * each, k trials x m x d in all; docs/performance.md) are computed on the rank's threads; each
     * trial's sum keeps its order and the first lowest wins, as in one loop. */
    for (int t = 0; t < trials; t++) {
      u = va_rand_unit(st->cfg->seed, VA_RNG_INIT_PP, (uint64_t)q, (uint64_t)t) * pot;
      cum = 0;
      pick = -1;
      for (int64_t i = 0; i < m; i++) {
        cum += w[i] * best[i];
        if (cum > u && w[i] * best[i] > 0) {
          pick = i;
          break;
        }
      }
      if (pick < 0)
        pick = (int64_t)(va_rand_u64(st->cfg->seed, VA_RNG_INIT_PP, (uint64_t)q, 1000 + (uint64_t)t) % (uint64_t)m);
      picks[t] = pick;
    }
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(st->aopts.threads < trials ? st->aopts.threads : trials) schedule(static, 1)
#endif
    for (int t = 0; t < trials; t++) {
      float *trial = dist + (int64_t)t * m;
      candidate_distances(C, cn, m, d, picks[t], st->cosine, trial);
      double np = 0;
      for (int64_t i = 0; i < m; i++) np += w[i] * (trial[i] < best[i] ? trial[i] : best[i]);
      trial_pot[t] = np;
    }
    int chosen = 0;
    for (int t = 1; t < trials; t++)
      if (trial_pot[t] < trial_pot[chosen]) chosen = t;
    memcpy(out + q * d, C + picks[chosen] * d, (size_t)d * sizeof(float));
    const float *kept = dist + (int64_t)chosen * m;
    for (int64_t i = 0; i < m; i++)
      if (kept[i] < best[i]) best[i] = kept[i];
  }
  free(picks);
  free(trial_pot);
  free(cn);
  free(dist);
  free(best);
}

/* kmeans||'s rows: N = kmeans_sample x k rows spread evenly over the input (core/sample.h: the same rows for
 * any rank count), or every row where kmeans_sample is 0 or N would not be fewer. Returns this rank's rows
 * as ascending local row numbers (*count of them; NULL for every row) and N in *total. */
static int64_t *kmeans_rows(const va_state_t *st, int64_t *count, int64_t *total) {
  const double want = (double)st->cfg->kmeans_sample * (double)st->k;
  *count = st->n_local;
  *total = st->n;
  if (st->cfg->kmeans_sample <= 0 || want >= (double)st->n) return NULL;
  int64_t N = (int64_t)want, s0;
  va_sample_range(st->n, N, st->row0, st->n_local, &s0, count);
  int64_t *rows = va_malloc((size_t)(*count > 0 ? *count : 1) * sizeof(int64_t), "kmeans|| rows");
  for (int64_t q = 0; q < *count; q++) rows[q] = va_sample_row(st->n, N, s0 + q) - st->row0;
  *total = N;
  return rows;
}

/* kmeans|| (Bahmani et al. 2012): rounds of independent oversampling by squared distance to the
 * candidates so far, candidates weighted by the rows nearest to them, then weighted k-means++. The rounds
 * and the weighting read kmeans_rows' rows: each is a pass over them against new candidates, so their cost
 * is rows x candidates x d, and a sample of a few dozen rows per anchor places the candidates as well as
 * every row does (docs/algorithm.md section 1). A row's draws are keyed by its global row. */
static void init_kmeans_parallel(va_state_t *st) {
  const va_config_t *c = st->cfg;
  int64_t d = st->d, k = st->k, n, total;
  int64_t *rows = kmeans_rows(st, &n, &total);
  int64_t first =
      va_sample_row(st->n, total, (int64_t)(va_rand_u64(c->seed, VA_RNG_INIT_FIRST, 0, 0) % (uint64_t)total));
  if (rows && c->progress_every > 0)
    va_log0("init kmeans||: on %lld of %lld rows (kmeans_sample %lld x k)\n", (long long)total, (long long)st->n,
            (long long)c->kmeans_sample);
  int64_t ncand = 1, cap = 1 + (int64_t)ceil(c->kmeans_oversample * (double)k * (double)(c->kmeans_rounds + 1)) + k;
  int64_t *cand_rows = va_malloc((size_t)cap * sizeof(int64_t), "kmeans|| rows");
  cand_rows[0] = first;
  float *C = va_malloc((size_t)(cap * d) * sizeof(float), "kmeans|| candidates");
  va_fetch_rows(st, &first, 1, C);
  float *mind = va_malloc((size_t)(n > 0 ? n : 1) * sizeof(float), "kmeans|| distances");
  for (int64_t i = 0; i < n; i++) mind[i] = FLT_MAX;
  update_min_dist(st, C, 1, rows, n, mind, st->assign, st->r);
  double l = c->kmeans_oversample * (double)k;
  int64_t *picked = va_malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t), "kmeans|| picks");
  double t0 = va_now();
  for (int64_t round = 1; round <= c->kmeans_rounds || (ncand < k && round <= c->kmeans_rounds + 5); round++) {
    va_stop_point("initialisation");
    if (c->progress_every > 0) /* progress_every = 0: no progress lines (the codebooks' loops, core/pq.h) */
      va_log0("init kmeans||: round %lld of %lld: %lld candidates so far, %.2f s\n", (long long)round,
              (long long)c->kmeans_rounds, (long long)ncand, va_now() - t0);
    double phi = 0;
    for (int64_t i = 0; i < n; i++) phi += mind[i];
    va_allreduce_sum_f64(&phi, 1);
    if (!(phi > 0)) break; /* every row sits on a candidate */
    int64_t np = 0;
    for (int64_t i = 0; i < n; i++) {
      double p = l * mind[i] / phi;
      int64_t row = st->row0 + (rows ? rows[i] : i);
      if (mind[i] > 0 && va_rand_unit(c->seed, VA_RNG_INIT_SAMPLE, (uint64_t)row, (uint64_t)round) < p)
        picked[np++] = row;
    }
    /* Gather the picks in global row order (rank order = row order). */
    int P = va_proc.nranks, mine = (int)np;
    int *counts = va_malloc((size_t)P * sizeof(int), "gather"), *displs = va_malloc((size_t)P * sizeof(int), "gather");
    VA_MPI(MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD));
    int64_t tot = 0;
    for (int p = 0; p < P; p++) {
      displs[p] = (int)tot;
      tot += counts[p];
    }
    if (ncand + tot > cap) {
      cap = ncand + tot;
      cand_rows = realloc(cand_rows, (size_t)cap * sizeof(int64_t));
      C = realloc(C, (size_t)(cap * d) * sizeof(float));
      if (!cand_rows || !C) VA_FATAL("out of memory growing kmeans|| candidates");
    }
    VA_MPI(MPI_Allgatherv(picked, mine, MPI_INT64_T, cand_rows + ncand, counts, displs, MPI_INT64_T, MPI_COMM_WORLD));
    free(counts);
    free(displs);
    if (tot == 0) continue;
    va_fetch_rows(st, cand_rows + ncand, tot, C + ncand * d);
    update_min_dist(st, C + ncand * d, tot, rows, n, mind, st->assign, st->r);
    ncand += tot;
  }
  free(picked);
  free(mind);
  if (ncand < k) {
    /* Fewer distinct candidates than anchors (tiny or duplicated data): top up with random rows. */
    int64_t extra = k - ncand;
    int64_t *fill = va_malloc((size_t)k * sizeof *fill, "kmeans|| fill");
    random_rows(st, k, VA_RNG_INIT_RANDOM, fill);
    qsort(fill, (size_t)k, sizeof *fill, cmp_i64);
    va_fetch_rows(st, fill, extra, C + ncand * d);
    memcpy(cand_rows + ncand, fill, (size_t)extra * sizeof(int64_t));
    ncand += extra;
    free(fill);
  }
  if (c->progress_every > 0)
    va_log0("init kmeans||: weighting %lld candidates by their nearest rows, %.2f s\n", (long long)ncand,
            va_now() - t0);
  /* Weights: rows nearest to each candidate (an integer count, exact in any order). */
  float *cn = va_malloc((size_t)ncand * sizeof(float), "kmeans|| norms");
  va_row_norms(C, ncand, d, cn);
  st->be->assign_to(st, C, cn, ncand, rows, n, st->assign, st->r);
  double *w = va_calloc((size_t)ncand, sizeof(double), "kmeans|| weights");
  for (int64_t i = 0; i < n; i++) w[st->assign[i]] += 1.0;
  va_allreduce_sum_f64(w, ncand);
  if (c->progress_every > 0)
    va_log0("init kmeans||: weighted k-means++ from %lld candidates to %lld anchors, %.2f s\n", (long long)ncand,
            (long long)k, va_now() - t0);
  weighted_kmeanspp(st, C, w, ncand, st->A);
  free(w);
  free(cn);
  free(C);
  free(cand_rows);
  free(rows);
}

void va_init_file_read(va_state_t *st) {
  const va_config_t *c = st->cfg;
  char err[1024] = "";
  int rc = 0;
  int64_t dims[2] = {0, 0};
  float *buf = NULL;
  if (va_proc.rank == 0) {
    char spec[2 * VA_PATH_MAX];
    snprintf(spec, sizeof spec, "%s:%s", c->init_file, c->init_dataset);
    hid_t f = H5Fopen(c->init_file, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = f >= 0 ? H5Dopen2(f, c->init_dataset, H5P_DEFAULT) : -1;
    hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1;
    if (sp < 0) {
      snprintf(err, sizeof err, "init anchors '%s' cannot be read: %s", spec, va_h5_last_error());
      rc = VA_EXIT_INPUT;
    } else if (H5Sget_simple_extent_ndims(sp) != 2) {
      snprintf(err, sizeof err, "init anchors '%s' must be 2-D (k x d)", spec);
      rc = VA_EXIT_INPUT;
    } else {
      hsize_t hd[2];
      H5Sget_simple_extent_dims(sp, hd, NULL);
      dims[0] = (int64_t)hd[0];
      dims[1] = (int64_t)hd[1];
      if (dims[1] != st->d || dims[0] < 1 || dims[0] > st->n) {
        snprintf(err, sizeof err, "init anchors '%s' are %lld x %lld; need 1..n rows of dimension %lld", spec,
                 (long long)dims[0], (long long)dims[1], (long long)st->d);
        rc = VA_EXIT_INPUT;
      } else {
        buf = va_malloc((size_t)(dims[0] * dims[1]) * sizeof(float), "init anchors");
        if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
          snprintf(err, sizeof err, "init anchors '%s': %s", spec, va_h5_last_error());
          rc = VA_EXIT_INPUT;
        }
        for (int64_t i = 0; !rc && i < dims[0] * dims[1]; i++)
          if (!isfinite(buf[i])) {
            snprintf(err, sizeof err, "init anchors '%s': anchor %lld holds NaN/Inf", spec, (long long)(i / dims[1]));
            rc = VA_EXIT_INPUT;
          }
      }
    }
    if (sp >= 0) H5Sclose(sp);
    if (ds >= 0) H5Dclose(ds);
    if (f >= 0) H5Fclose(f);
  }
  VA_AGREE_OR_EXIT(rc, err);
  VA_MPI(MPI_Bcast(dims, 2, MPI_INT64_T, 0, MPI_COMM_WORLD));
  st->k = st->k_initial = dims[0];
  if (!buf) buf = va_malloc((size_t)(dims[0] * dims[1]) * sizeof(float), "init anchors");
  VA_MPI(MPI_Bcast(buf, (int)(dims[0] * dims[1]), MPI_FLOAT, 0, MPI_COMM_WORLD));
  /* File anchors are in input coordinates: move them into the job's (centred or unit) frame. */
  for (int64_t j = 0; j < st->k; j++) {
    float *a = buf + j * st->d;
    double s = 0;
    for (int64_t t = 0; t < st->d; t++) {
      a[t] = (float)(a[t] - st->center[t]);
      s += (double)a[t] * a[t];
    }
    if (st->cosine && s > 0)
      for (int64_t t = 0; t < st->d; t++) a[t] = (float)(a[t] / sqrt(s));
  }
  st->A = buf; /* va_state_alloc grows this buffer in place */
}

/* Timed by the caller (the init phase also covers preprocessing). */
void va_init_anchors(va_state_t *st) {
  switch (st->cfg->init_kind) {
  case VA_INIT_RANDOM: init_random(st); break;
  case VA_INIT_FARTHEST: init_farthest(st); break;
  case VA_INIT_FILE: break; /* read by va_init_file_read before the state was allocated */
  default: init_kmeans_parallel(st); break;
  }
  va_state_anchor_norms(st);
}
