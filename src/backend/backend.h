/* backend.h: the operations of the annealing loop that touch rows, behind one table so that the loop
 * (anneal.c, init.c) is the same for every backend. The CPU backend works on st->X / st->assign /
 * st->r on the host; the CUDA backend keeps rows, assignments and distances on the GPU and only
 * per-anchor results (k-sized) cross to the host. Host arrays st->assign / st->r are valid after
 * sync_host(). */
#ifndef VECANNEAL_BACKEND_H
#define VECANNEAL_BACKEND_H
#include <stdint.h>

#include "cpu/stats.h"

/* assign's return when the backend keeps its changed-row count and stats adds it in place of the first
 * appended value (the CUDA backend: no wait between the assign pass and the statistics). */
#define VA_CHANGED_IN_STATS (-1)

/* The update of s2.3 for backends that apply it themselves (owns_anchors). */
typedef struct {
  double eta, beta, max_step;
} va_update_t;

struct va_state;
typedef struct va_backend {
  const char *name;
  /* 0: the loop updates st->A / st->vel on the host from the full statistics. 1: the backend keeps the
   * anchors and their momentum itself and applies the update inside stats (upd); stats then fills only
   * the scalar columns of acc (weight, count, r sum) and the appended values on the host, and st->A /
   * st->vel are stale until pull_anchors. Either way set_anchors hands it the host's A (and vel). */
  int owns_anchors;
  /* A or k changed: the backend takes the anchors and their squared norms (the CPU backend into
   * st->anorm, the CUDA backend on the device). */
  void (*set_anchors)(struct va_state *st);
  /* Main assign pass with the current anchors; returns the local rows whose anchor changed since the
   * previous main pass, or VA_CHANGED_IN_STATS. */
  int64_t (*assign)(struct va_state *st);
  /* A side pass against m other vectors C (norms cn) during the initialisation: for the nrows local rows
   * rows[0..nrows) (ascending; rows NULL: every local row, nrows = n_local), a[q] and r[q] <- row rows[q]'s
   * nearest of C and its distance (host arrays of nrows). A row's answer does not depend on the other rows
   * of the pass. The main pass's assignment is kept, but the backend's anchors are C until the next
   * set_anchors (the initialisation ends with one). */
  void (*assign_to)(struct va_state *st, const float *C, const float *cn, int64_t m, const int64_t *rows, int64_t nrows,
                    uint32_t *a, float *r);
  /* Farthest-point initialisation (init.c) into st->A (k x d) by the backend itself; returns 0, having
   * done nothing, where it cannot (then init.c runs its own loop over assign_to). May be NULL. */
  int (*init_farthest)(struct va_state *st);
  /* Local farthest member per anchor into st->rmax_local / st->rarg. */
  void (*farthest)(struct va_state *st);
  /* hist (k x bins, zeroed) += per-anchor counts per bin over [0, st->rmax[j]]. */
  void (*hist)(struct va_state *st, int64_t bins, double *hist);
  /* Collective: acc (k x (d + 3) + nx) <- the statistics under rule, then the nx values x, each summed
   * over the ranks (the CUDA backend sums on the device, with NCCL). With owns_anchors and upd != NULL,
   * the backend then moves its anchors by upd (see owns_anchors for what acc holds then). */
  void (*stats)(struct va_state *st, const va_stats_rule_t *rule, const double *x, int64_t nx, const va_update_t *upd,
                double *acc);
  /* owns_anchors: st->A and st->vel <- the backend's anchors and momentum (k x d each). */
  void (*pull_anchors)(struct va_state *st);
  /* owns_anchors: the backend's anchors idx[0..m) <- those rows of st->A, their momentum <- 0, norms
   * after (reseeding: the other anchors stay where they are, on the backend, without a round trip). */
  void (*replace_anchor_rows)(struct va_state *st, const int64_t *idx, int64_t m);
  /* After a merge: every row's anchor a <- newidx[a] (k_old entries), also the previous-pass copy. */
  void (*remap)(struct va_state *st, const int64_t *newidx, int64_t k_old);
  /* Split 2-means step: see va_cuda_split_accumulate / anneal.c. sums (2m x (d + 1), zeroed). */
  void (*split_accumulate)(struct va_state *st, const int64_t *slot, int64_t m, const float *cent, double *sums);
  /* m rows by local index, float32 (m x d), in the job's frame (centred or unit). */
  void (*get_rows)(struct va_state *st, const int64_t *local_rows, int64_t m, float *out);
  /* Residual PQ codes of local rows [r0, r0 + m) where the rows live, with the bits of the host path of
   * job/codes.c (get_rows, less st->A[st->assign], va_pq_encode): codes (m x M) against codebooks (cpu/pq.h's
   * layout); per row err (the codes' squared error), x2 (|x|^2) and r2 (|x - a|^2), in double, columns in
   * order; colsum (d) += the rows' values, rows in order. Returns 0, having done nothing, where it cannot
   * (the job then encodes on the host). May be NULL. */
  int (*encode_codes)(struct va_state *st, int64_t r0, int64_t m, int64_t M, int64_t ksub, const float *codebooks,
                      uint8_t *codes, double *err, double *x2, double *r2, double *colsum);
  /* st->assign, st->r and st->prev on the host (for the index and checkpoints). */
  void (*sync_host)(struct va_state *st);
  /* st->prev (host, e.g. from a checkpoint) becomes the previous-pass assignment. */
  void (*push_prev)(struct va_state *st);
  /* Frees the backend's resources. */
  void (*destroy)(struct va_state *st);
  /* Bytes of rows copied host to device so far when the rows stream from host memory (out-of-core);
   * NULL, or < 0, when they do not. */
  double (*streamed_bytes)(struct va_state *st);
} va_backend_t;

extern const va_backend_t va_backend_cpu;
#endif
