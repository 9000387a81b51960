/* anneal.h: the state of one compress job on one rank and the steps of docs/algorithm.md.
 * Rows live on their rank (X, centred for l2 / unit for cosine); anchors, temperature, histories and
 * every decision are identical on all ranks because they are computed only from reduced statistics. */
#ifndef VECANNEAL_ANNEAL_H
#define VECANNEAL_ANNEAL_H
#include <stdint.h>

#include "backend/backend.h"
#include "core/config.h"
#include "cpu/assign.h"

/* Values reduced with each iteration's statistics (after the k x VA_STATS_W(d) sums): the changed rows
 * and the stop flag. */
#define VA_ITER_EXTRAS 2

typedef struct va_state {
  const va_config_t *cfg;
  int64_t n, d, n_local, row0;
  float *X;       /* n_local x d */
  double *center; /* d: mean subtracted from every row (l2); zeros (cosine) */
  int cosine;
  double total_var; /* energy of the best single anchor (E / total_var = normalised distortion) */
  int64_t k, k_initial, k_cap, k_max;
  float *A, *anorm;        /* k_cap x d, k_cap */
  double *vel;             /* momentum, k_cap x d */
  int anchors_stale;       /* A / vel were moved by a backend that owns them (backend.h) since the last pull */
  uint32_t *assign, *prev; /* n_local */
  float *r;                /* n_local */
  double *acc;             /* k_cap x (d + 3) statistics */
  float *rmax;             /* k_cap: farthest member distance (global after the MAX allreduce) */
  int64_t *rarg;           /* k_cap: local row of the local farthest member, -1 if none */
  float *rmax_local;       /* k_cap */
  int far_valid;           /* rmax / rarg / rmax_local are those of the current assignment */
  double *rms_prev;        /* k_cap: huber's previous RMS member distance */
  double *hist;            /* trim: k_cap x trim_bins */
  int32_t *bin_lo, *bin_hi;
  int64_t min_changes;
  double T, E, E_prev;
  int64_t changed, iter, still;
  int converged;
  /* histories, one entry per iteration */
  double *h_energy, *h_temp;
  int64_t *h_changed, *h_k, h_cap;
  va_assign_opts_t aopts;
  const va_backend_t *be; /* row operations (backend.h) */
  void *be_ctx;
  /* Called by the loop at checkpoint_every and when a stop signal was agreed (then the loop ends
   * with stopped = 1). */
  void (*checkpoint_fn)(struct va_state *st, void *ctx);
  void *checkpoint_ctx;
  int stop_agreed, stopped;
  int64_t merges, splits, reseeds;
} va_state_t;

/* Step size eta(T) = lr T / (1 + T) (s2.3). */
static inline double va_eta(double lr, double T) { return lr * T / (1.0 + T); }
/* s2.3 for one anchor: step = clamp(eta (sum / w - a), +-max_step) per coordinate (max_step <= 0: no
 * clamp); v <- beta v + (1 - beta) step; a <- a + v. */
void va_update_anchor(float *a, double *v, const double *sum, double w, int64_t d, double eta, double max_step,
                      double beta);
/* a <- a / ||a|| (norm in double, in order), unless a is zero: the loop's cosine normalisation. */
void va_unit_normalise(float *a, int64_t d);
/* Allocates per-rank buffers once X, n, d, k, k_max are set. */
void va_state_alloc(va_state_t *st);
void va_state_free(va_state_t *st);
/* After A or k changed: hands the anchors to the backend, which takes their norms. */
void va_state_anchor_norms(va_state_t *st);

/* Collective: rows by global index (sorted or not), gathered on every rank (m x d). */
void va_fetch_rows(va_state_t *st, const int64_t *global_rows, int64_t m, float *out);
/* Collective, before va_state_alloc: init = file: reads the anchors (sets k and A). */
void va_init_file_read(va_state_t *st);
/* Collective: initial anchors by cfg->init. */
void va_init_anchors(va_state_t *st);
/* Collective: the annealing loop until convergence or max_iter, with rank-0 progress lines. A backend
 * that owns the anchors (backend.h) may still hold the newest ones: va_anneal_anchors_to_host next. */
void va_anneal(va_state_t *st);
/* Collective: st->A and st->vel current on the host (a download from a backend that owns them; else
 * nothing). The loop's time ends before it: it belongs to the index, as the final pass does. */
void va_anneal_anchors_to_host(va_state_t *st);
/* Collective: the final assign pass; fills counts (k) and mean squared member distance (k) and returns E. */
double va_final_pass(va_state_t *st, double *counts, double *mse);
#endif
