/* codes.h: `compress --codes pq`, the stage after the final pass (docs/codes.md): each row's residual
 * x - anchor(x) in the job's frame, M codebooks trained on the residuals of the rows (or of the train
 * sample) by the annealing loop (core/pq.h), every row encoded (cpu/pq.h), and the sizes and the
 * reconstruction error the index, the log and the metrics report; the encoding pass also serves `add`. */
#ifndef VECANNEAL_JOB_CODES_H
#define VECANNEAL_JOB_CODES_H
#include <stdint.h>

#include "core/anneal.h" /* va_state_t */
#include "core/config.h" /* va_config_t */
#include "io/index.h"    /* va_index_codes_t */

/* The rows the codebooks train on: pq_train_sample when it is set and below the anchors' train_rows,
 * else train_rows (the anchors' sample, or every row: n). */
int64_t va_codes_train_rows(const va_config_t *cfg, int64_t train_rows);
/* Collective, before anything is read: codes = pq with pq_m outside 1..d, or fewer training rows than
 * the 2^pq_bits centroids of a codebook, ends every rank with VA_EXIT_USAGE and one message (input_label
 * names the input). */
void va_codes_check(const va_config_t *cfg, int64_t d, int64_t train_rows, const char *input_label);
/* Bytes of host memory the stage holds at its peak on a rank with n_local rows, train_local of them
 * training rows (the memory check, docs/memory.md). */
double va_codes_host_bytes(const va_config_t *cfg, int64_t n_local, int64_t train_local, int64_t d);
/* Local: every row of this rank (st->n_local of them, through the backend's get_rows, in the job's frame)
 * less its anchor (st->A[st->assign]) encoded by va_pq_encode against codebooks (M x ksub x
 * va_pq_dsub_max(d, M), cpu/pq.h) into codes (n_local x M), a chunk of rows at a time. sums (d + 3) gains,
 * row by row in order, each row's values in [0, d), its squared norm in [d], its residual's in [d + 1] and
 * its decoded residual's squared error in [d + 2]. */
void va_codes_encode(va_state_t *st, int64_t M, int64_t ksub, const float *codebooks, uint8_t *codes, double *sums);
/* Collective, after va_final_pass (st->assign on the host; st->A the anchors the rows were assigned to):
 * the codes of every row of this rank and the codebooks, into out (va_codes_free releases it).
 * train_rows: the rows the codebooks train on (va_codes_train_rows: row floor(i n / train_rows) for
 * i < train_rows, core/sample.h; st->n: every row). Logs one line per subspace and a summary on rank 0. */
void va_codes_pq(va_state_t *st, int64_t train_rows, va_index_codes_t *out);
void va_codes_free(va_index_codes_t *c);
#endif
