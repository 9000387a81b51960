/* pq.h: the codebooks of residual product quantization (docs/codes.md), trained by the annealing loop of
 * anneal.h: each subspace's codebook is the anchors of a loop of its own over the rows' residual columns,
 * with a plain Lloyd configuration, so a codebook is the same for any rank count as the anchors are. Also
 * the sizes the codes come to. */
#ifndef VECANNEAL_CORE_PQ_H
#define VECANNEAL_CORE_PQ_H
#include <stdint.h>

#include "backend/backend.h" /* va_backend_t */
#include "core/config.h"     /* va_config_t */
#include "cpu/assign.h"      /* va_assign_opts_t */

/* Bytes a row takes with codes: M codes of bits bits and its uint32 anchor id. */
double va_pq_bytes_per_vector(int64_t M, int64_t bits);

/* The configuration of subspace m's loop, from the job's: 2^pq_bits anchors by kmeans|| with the job's
 * rounds and oversampling, plain means (robust none), eta = 1 at every iteration (lr 2, T0 1, no
 * cooling), no momentum or clamp, no merges or splits (empty anchors are still re-seeded), at most
 * pq_iters iterations with the default convergence test, no progress lines, no checkpoints; the seed is
 * the job's mixed with m, so that the subspaces draw apart. */
void va_pq_config(const va_config_t *job, int64_t m, va_config_t *out);

typedef struct {
  int64_t iterations; /* of the loop */
  int converged;      /* 1 when the convergence test ended it, 0 when pq_iters did */
  double energy;      /* its last iteration's energy: mean squared distance of the rows to their centroid */
} va_pq_trained_t;

/* Collective: one subspace's codebook. X (n_local x width, taken over and freed) holds this rank's rows of
 * the subspace, rows [row0, row0 + n_local) of n in the numbering of the loop's counter-based draws (the
 * source rows, or the sample's); cfg comes from va_pq_config and must live through the call; be runs the
 * row operations (the CPU backend: the rows are width columns wide). codebook (cfg->k x dmax) <- the
 * anchors, their values past width zero. */
void va_pq_train_codebook(const va_config_t *cfg, const va_backend_t *be, const va_assign_opts_t *aopts, float *X,
                          int64_t n, int64_t row0, int64_t n_local, int64_t width, int64_t dmax, float *codebook,
                          va_pq_trained_t *out);
#endif
