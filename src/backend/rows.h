/* rows.h: the job's operations on its rows that depend on where they live: in host memory (the CPU
 * backend, or a GPU job preprocessing on the host), on a GPU (read straight there, or left there by the
 * encoder), or in a streamed GPU context's pinned host copy. The job calls these and never the CUDA
 * context itself; on a build without CUDA the device forms are never reached. */
#ifndef VECANNEAL_BACKEND_ROWS_H
#define VECANNEAL_BACKEND_ROWS_H
#include <stdint.h>

#include "backend/plan.h"    /* va_backend_plan_t */
#include "core/anneal.h"     /* va_state_t */
#include "io/h5io.h"         /* va_input_t, va_read_result_t */
#include "backend/encoder.h" /* va_embedded_t */

/* The rank's rows where the host can preprocess them: the shard (st->X), or a streamed GPU context's
 * pinned copy, *ld floats apart; NULL when they are on the GPU. */
float *va_rows_host(va_state_t *st, int64_t *ld);
/* Rows on the GPU: the column sums (and sums of squares) of every block of `block` rows into part,
 * block by block as the host sums them (centred in place first when center is given). */
void va_rows_device_column_sums(va_state_t *st, int64_t block, const double *center, int squares, double *part);
/* Rows on the GPU: made unit length in place; returns the count of zero rows. */
int64_t va_rows_device_unit(va_state_t *st);
/* Collective: reads the rank's rows of in straight into the attached GPU context: each chunk into one
 * of its two pinned staging buffers, going up while the next is read (streamed: into its pinned host
 * copy); float32 until va_rows_device_ready (16-bit precisions convert there). */
void va_rows_read_to_device(va_state_t *st, const va_input_t *in, int io_mode, int threads, va_read_result_t *res);
/* Rows preprocessed on the GPU: converted to the product's precision, the float32 copy given back. */
void va_rows_device_ready(va_state_t *st);
/* Hands the encoder's rows (still on the GPU of the attached context) to the context; e->demb is
 * freed and cleared. */
void va_rows_adopt_embedded(va_state_t *st, va_embedded_t *e);
/* The backend's first-use costs taken before the loop (the GPU's kernels and handles). */
void va_rows_warm_up(va_state_t *st);
/* Bytes of pinned host memory a streamed plan holds for n_local x d rows (0 when resident or CPU). */
double va_rows_pinned_bytes(const va_backend_plan_t *plan, int64_t n_local, int64_t d);
/* A streamed job's figures for the metrics: the pinned chunk size and the bytes copied so far. */
void va_rows_stream_figures(va_state_t *st, const va_backend_plan_t *plan, double *chunk_bytes, double *copied_bytes);
#endif
