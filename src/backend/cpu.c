/* backend_cpu.c: the CPU backend of backend.h: rows, assignments and distances in host memory,
 * OpenBLAS tiles for the assign pass (kernels/cpu_assign.c), per-thread-block statistics
 * (kernels/cpu_stats.c). */
#include <stdlib.h>
#include <string.h>

#include "core/anneal.h"
#include "comm/comm.h"
#include "cpu/assign.h"
#include "cpu/stats.h"
#include "util/util.h" /* va_malloc */

/* The assign pass reads st->A directly; it needs the norms. */
static void cpu_set_anchors(va_state_t *st) { va_row_norms(st->A, st->k, st->d, st->anorm); }

static int64_t cpu_assign(va_state_t *st) {
  va_assign_cpu(st->X, st->n_local, st->d, st->A, st->anorm, st->k, st->cosine, &st->aopts, st->assign, st->r);
  int64_t changed = 0;
  for (int64_t i = 0; i < st->n_local; i++) changed += st->assign[i] != st->prev[i];
  memcpy(st->prev, st->assign, (size_t)st->n_local * sizeof(uint32_t));
  return changed;
}

static void cpu_get_rows(va_state_t *st, const int64_t *local_rows, int64_t m, float *out) {
  for (int64_t q = 0; q < m; q++) memcpy(out + q * st->d, st->X + local_rows[q] * st->d, (size_t)st->d * sizeof(float));
}

/* With a row list the rows are copied together first, a block of at most 8 MiB at a time (the tiles of
 * va_assign_cpu read consecutive rows; a block holds enough tiles for every thread, and the copy stays
 * small beside the shard, docs/memory.md). */
static void cpu_assign_to(va_state_t *st, const float *C, const float *cn, int64_t m, const int64_t *rows,
                          int64_t nrows, uint32_t *a, float *r) {
  if (!rows) {
    va_assign_cpu(st->X, st->n_local, st->d, C, cn, m, st->cosine, &st->aopts, a, r);
    return;
  }
  int64_t block = ((int64_t)8 << 20) / (st->d * (int64_t)sizeof(float));
  if (block < 1024) block = 1024;
  if (block > nrows) block = nrows > 0 ? nrows : 1;
  float *sel = va_malloc((size_t)block * (size_t)st->d * sizeof(float), "init rows");
  for (int64_t q0 = 0; q0 < nrows; q0 += block) {
    int64_t b = nrows - q0 < block ? nrows - q0 : block;
    cpu_get_rows(st, rows + q0, b, sel);
    va_assign_cpu(sel, b, st->d, C, cn, m, st->cosine, &st->aopts, a + q0, r + q0);
  }
  free(sel);
}

static void cpu_farthest(va_state_t *st) {
  va_farthest_local(st->assign, st->r, st->n_local, st->k, st->rmax_local, st->rarg);
}

static void cpu_hist(va_state_t *st, int64_t bins, double *hist) {
  va_hist_accumulate(st->assign, st->r, st->n_local, st->k, st->rmax, bins, hist);
}

static void cpu_stats(va_state_t *st, const va_stats_rule_t *rule, const double *x, int64_t nx, const va_update_t *upd,
                      double *acc) {
  (void)upd; /* the loop updates the host's anchors */
  int64_t kw = st->k * VA_STATS_W(st->d);
  memset(acc, 0, (size_t)kw * sizeof(double));
  va_stats_accumulate_mt(st->X, st->n_local, st->d, st->assign, st->r, st->k, rule, acc, st->aopts.threads);
  if (nx) memcpy(acc + kw, x, (size_t)nx * sizeof(double));
  va_allreduce_sum_f64(acc, kw + nx);
}

static void cpu_remap(va_state_t *st, const int64_t *newidx, int64_t k_old) {
  (void)k_old;
  for (int64_t i = 0; i < st->n_local; i++) st->assign[i] = st->prev[i] = (uint32_t)newidx[st->assign[i]];
}

static void cpu_split_accumulate(va_state_t *st, const int64_t *slot, int64_t m, const float *cent, double *sums) {
  (void)m;
  int64_t d = st->d, SW = d + 1;
  for (int64_t i = 0; i < st->n_local; i++) {
    int64_t q = slot[st->assign[i]];
    if (q < 0) continue;
    const float *x = st->X + i * d;
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

static void cpu_noop(va_state_t *st) { (void)st; }

const va_backend_t va_backend_cpu = {
    .name = "cpu",
    .set_anchors = cpu_set_anchors,
    .assign = cpu_assign,
    .assign_to = cpu_assign_to,
    .farthest = cpu_farthest,
    .hist = cpu_hist,
    .stats = cpu_stats,
    .remap = cpu_remap,
    .split_accumulate = cpu_split_accumulate,
    .get_rows = cpu_get_rows,
    .sync_host = cpu_noop,
    .push_prev = cpu_noop,
    .destroy = cpu_noop,
};
