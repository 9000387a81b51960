/* nearest.h: new rows placed in an existing index, the opening `assign` and `add` share: the files
 * checked, the index read, each rank's block of an input read and put in the index's frame as compress
 * preprocessed its own, and each row's nearest anchor found through the backend table, as the final
 * pass of compress does. */
#ifndef VECANNEAL_JOB_NEAREST_H
#define VECANNEAL_JOB_NEAREST_H
#include <stdint.h>

#include "core/anneal.h"   /* va_state_t */
#include "core/config.h"   /* va_config_t */
#include "io/h5io.h"       /* va_input_t */
#include "io/index_read.h" /* va_index_data_t */

typedef struct {
  int64_t row0, n_local; /* this rank's block of the input (va_shard_range) */
  uint32_t *assign;      /* n_local: anchor of each row */
  float *dist;           /* n_local: its distance (l2: squared; cosine: 1 - x.a), as the final pass reports it */
  const char *backend;   /* "cpu" or "cuda" */
} va_nearest_t;

/* Collective: a job's stages up to its rows placed: the index and the input (cfg->input as
 * cfg->input_format) checked against the job's output (out_role names it in messages) and cfg->metrics,
 * which are claimed (va_files_prepare); the index read with its frame; the input opened; this rank's
 * block read, put in the index's frame and assigned (timed as the assign phase). A dimension other than
 * the index's, or a row holding NaN/Inf, is VA_EXIT_INPUT agreed on every rank (one message); so are read
 * failures. in->checksum becomes the rows' checksum (summed over ranks). cfg supplies the execution keys
 * (threads, io, read_chunk_mb, backend, ...); the assign kernel is the one the index's final pass used
 * (ix->cpu_assign). Returns 0 with ix, in and out filled (the caller frees ix and out), or the agreed
 * exit code with nothing held. */
/* then (NULL: none), collective, on every rank once its rows are placed, while the job's state still holds
 * them: st->n_local rows (block st->row0 of st->n) in the index's frame (the backend's get_rows), st->A the
 * anchors they were compared with (ix->frame), st->assign (host) each row's anchor; timed with the placing. */
typedef void (*va_nearest_then_fn)(va_state_t *st, void *ctx);
int va_nearest_job(const char *index, const char *out_role, const char *out_file, const va_config_t *cfg,
                   va_index_data_t *ix, va_input_t *in, va_nearest_t *out, va_nearest_then_fn then, void *ctx);
void va_nearest_free(va_nearest_t *out);
/* Local: n rows (n x d) put in a job's frame in place, value by value as compress's preprocessing
 * computes it (compress.c preprocess and column_sums): l2 x - center rounded to float32; cosine
 * x / ||x|| (norm in double, in order), zero rows left zero. */
void va_rows_to_frame(float *X, int64_t n, int64_t d, int cosine, const double *center, int threads);
#endif
