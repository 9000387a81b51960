/* rows.c: the row operations of rows.h, on the host or through the CUDA context. */
#include "backend/rows.h"

#include "backend/backend.h" /* va_backend_t */
#include "util/util.h"       /* VA_FATAL */
#ifdef VECANNEAL_CUDA
#include "backend/cuda.h" /* va_backend_cuda, va_backend_cuda_warm_up */
#include "cuda/kernels.h"
#endif

float *va_rows_host(va_state_t *st, int64_t *ld) {
  *ld = st->d;
  if (st->X) return st->X;
#ifdef VECANNEAL_CUDA
  if (st->be_ctx && va_cuda_stream_rows((va_cuda_t *)st->be_ctx) > 0)
    return va_cuda_stream_host_rows((va_cuda_t *)st->be_ctx, ld);
#endif
  return NULL;
}

void va_rows_device_column_sums(va_state_t *st, int64_t block, const double *center, int squares, double *part) {
#ifdef VECANNEAL_CUDA
  va_cuda_block_column_sums((va_cuda_t *)st->be_ctx, block, center, squares, part);
#else
  (void)st, (void)block, (void)center, (void)squares, (void)part;
  VA_FATAL("column sums: the rows are on no GPU in a build without CUDA");
#endif
}

int64_t va_rows_device_unit(va_state_t *st) {
#ifdef VECANNEAL_CUDA
  return va_cuda_unit_rows((va_cuda_t *)st->be_ctx);
#else
  (void)st;
  VA_FATAL("unit rows: the rows are on no GPU in a build without CUDA");
#endif
}

#ifdef VECANNEAL_CUDA
static float *staging_buffer(void *ctx, int64_t local_row0) {
  return va_cuda_upload_buffer((va_cuda_t *)ctx, local_row0);
}
static void staging_filled(void *ctx, int64_t local_row0, int64_t nrows) {
  va_cuda_upload_buffered((va_cuda_t *)ctx, local_row0, nrows);
}
#endif

void va_rows_read_to_device(va_state_t *st, const va_input_t *in, int io_mode, int threads, va_read_result_t *res) {
#ifdef VECANNEAL_CUDA
  va_cuda_defer_conversion((va_cuda_t *)st->be_ctx);
  va_row_sink_t sink = {va_cuda_upload_buffer_rows((va_cuda_t *)st->be_ctx), staging_buffer, staging_filled,
                        st->be_ctx};
  va_input_read_into(in, st->row0, st->n_local, io_mode, threads, res, &sink);
#else
  (void)st, (void)in, (void)io_mode, (void)threads, (void)res;
  VA_FATAL("a read into the GPU in a build without CUDA");
#endif
}

void va_rows_device_ready(va_state_t *st) {
#ifdef VECANNEAL_CUDA
  va_cuda_finish_rows((va_cuda_t *)st->be_ctx);
#else
  (void)st;
#endif
}

void va_rows_adopt_embedded(va_state_t *st, va_embedded_t *e) {
#ifdef VECANNEAL_CUDA
  va_cuda_adopt_rows((va_cuda_t *)st->be_ctx, e->demb);
  va_cuda_sync((va_cuda_t *)st->be_ctx);
  va_cuda_free_device(e->demb);
  e->demb = NULL;
#else
  (void)st, (void)e;
  VA_FATAL("embedded rows on a GPU in a build without CUDA");
#endif
}

void va_rows_warm_up(va_state_t *st) {
#ifdef VECANNEAL_CUDA
  if (st->be == &va_backend_cuda) va_backend_cuda_warm_up(st);
#else
  (void)st;
#endif
}

double va_rows_pinned_bytes(const va_backend_plan_t *plan, int64_t n_local, int64_t d) {
#ifdef VECANNEAL_CUDA
  if (plan->chunk_rows) return (double)va_cuda_stream_host_bytes(n_local, d);
#else
  (void)plan, (void)n_local, (void)d;
#endif
  return 0;
}

void va_rows_stream_figures(va_state_t *st, const va_backend_plan_t *plan, double *chunk_bytes, double *copied_bytes) {
  *chunk_bytes = *copied_bytes = 0;
#ifdef VECANNEAL_CUDA
  if (plan->chunk_rows) {
    *chunk_bytes = (double)va_cuda_stream_host_bytes(va_cuda_stream_rows((va_cuda_t *)st->be_ctx), st->d);
    *copied_bytes = st->be->streamed_bytes(st);
  }
#else
  (void)st, (void)plan;
#endif
}
