/* backend_cuda.c: the CUDA backend of backend.h. The rank's rows live on its GPU for the whole run
 * (uploaded once, through pinned staging buffers), or, when they do not fit, in pinned host memory from
 * which every pass streams them (out-of-core); assignments and distances stay on the GPU either way.
 * Only per-anchor results (k-sized statistics, farthest members, histograms) and fetched rows come
 * back; the statistics are summed over the ranks on the device (NCCL) before they do.
 * st->assign / st->r on the host are refreshed only by sync_host (index, checkpoints). */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "core/anneal.h"
#include "backend/cuda.h"
#include "backend/visible.h" /* va_visible_narrow */
#include "comm/comm.h"
#include "cuda/kernels.h"
#include "util/util.h"

static va_cuda_t *ctx_of(va_state_t *st) { return (va_cuda_t *)st->be_ctx; }

/* The device owns the anchors during the loop (owns_anchors): the host's A and momentum go up together. */
static void gpu_set_anchors(va_state_t *st) {
  va_cuda_set_anchors(ctx_of(st), st->A, NULL, st->k);
  va_cuda_set_velocity(ctx_of(st), st->vel, st->k);
}
static void gpu_pull_anchors(va_state_t *st) { va_cuda_get_anchors(ctx_of(st), st->A, st->vel); }
static void gpu_replace_anchor_rows(va_state_t *st, const int64_t *idx, int64_t m) {
  va_cuda_replace_anchor_rows(ctx_of(st), idx, m, st->A);
}

/* Enqueued without a wait; the changed count arrives with the statistics. r is left to the statistics
 * pass unless trim needs it first (its histogram). */
static int64_t gpu_assign(va_state_t *st) {
  va_cuda_assign_deferred(ctx_of(st), st->cosine, st->cfg->robust == VA_ROBUST_TRIM);
  return VA_CHANGED_IN_STATS;
}

/* A side pass (initialisation): the context's anchors become C (the initialisation's set_anchors
 * replaces them; st->A may not hold anchors yet: uploading it here would put uninitialised memory through
 * the fp16 conversion, whose overflow flag would stop an fp16 job). With a row list the listed rows are
 * gathered and assigned on the device, leaving the rows' own assignment alone; otherwise (or where the
 * gather declines: streamed rows, a list of more than n / 4 rows) the pass covers every row, the
 * previous-pass assignment is put back so the main pass's change count is unaffected, and a listed
 * row's answer is picked on the host. */
static void gpu_assign_to(va_state_t *st, const float *C, const float *cn, int64_t m, const int64_t *rows,
                          int64_t nrows, uint32_t *a, float *r) {
  va_cuda_t *g = ctx_of(st);
  va_cuda_set_anchors(g, C, cn, m);
  if (rows && va_cuda_assign_listed(g, st->cosine, rows, nrows, a, r)) return;
  const size_t n = (size_t)(st->n_local > 0 ? st->n_local : 1);
  uint32_t *keep = va_malloc(n * sizeof(uint32_t), "assign_to");
  va_cuda_download(g, keep, NULL);
  va_cuda_assign(g, st->cosine);
  if (rows) {
    uint32_t *all_a = va_malloc(n * sizeof(uint32_t), "assign_to");
    float *all_r = va_malloc(n * sizeof(float), "assign_to");
    va_cuda_download(g, all_a, all_r);
    for (int64_t q = 0; q < nrows; q++) {
      a[q] = all_a[rows[q]];
      r[q] = all_r[rows[q]];
    }
    free(all_r);
    free(all_a);
  } else {
    va_cuda_download(g, a, r);
  }
  va_cuda_set_assign(g, keep);
  free(keep);
}

/* init.c's init_farthest with the rows on the device: one rank queues all k steps without a wait; several
 * ranks reduce each step's candidate as init.c does (largest distance, then lowest global row) and fetch
 * the row. Streamed rows take init.c's loop. */
static int gpu_init_farthest(va_state_t *st) {
  va_cuda_t *g = ctx_of(st);
  if (!va_cuda_farthest_init_begin(g, st->k, st->row0, st->n)) return 0;
  float *row = va_malloc((size_t)st->d * sizeof(float), "farthest init");
  int64_t next = 0;
  for (int64_t q = 0; q < st->k; q++) {
    if (va_proc.nranks == 1) {
      va_cuda_farthest_init_pick(g, q);
    } else {
      va_fetch_rows(st, &next, 1, row);
      va_cuda_farthest_init_set(g, q, row);
    }
    va_cuda_farthest_init_step(g, q, st->cosine);
    if (va_proc.nranks > 1 && q + 1 < st->k) {
      float best, gbest;
      int64_t cand;
      va_cuda_farthest_init_candidate(g, q + 1, &best, &cand);
      gbest = best;
      va_allreduce_max_f32(&gbest, 1);
      if (best != gbest) cand = INT64_MAX;
      va_allreduce_min_i64(&cand, 1);
      next = cand == INT64_MAX ? 0 : cand;
    }
  }
  va_cuda_farthest_init_end(g, st->A);
  free(row);
  return 1;
}

static void gpu_farthest(va_state_t *st) { va_cuda_farthest(ctx_of(st), st->rmax_local, st->rarg); }
static void gpu_hist(va_state_t *st, int64_t bins, double *hist) { va_cuda_hist(ctx_of(st), st->rmax, bins, hist); }
/* Summed in place on the device when the job reduces through NCCL (or has one rank), else through the
 * host and back. The collective is ordered within the context's stream, and the update is queued behind
 * it, so the device goes from statistics to sums to update without waiting for the host; only the
 * statistics' scalar columns come back (24 bytes an anchor instead of 8 (d + 3)): the host waits for
 * those while the device moves the anchors. */
static void gpu_stats(va_state_t *st, const va_stats_rule_t *rule, const double *x, int64_t nx, const va_update_t *upd,
                      double *acc) {
  va_cuda_t *g = ctx_of(st);
  int64_t count = st->k * VA_STATS_W(st->d) + nx;
  double *dacc = va_cuda_stats_device(g, rule, x, nx);
  if (!va_allreduce_sum_f64_device(dacc, count, va_cuda_work_stream(g))) {
    va_cuda_fetch_f64(g, dacc, count, acc);
    va_allreduce_sum_f64(acc, count);
    va_cuda_put_f64(g, dacc, acc, count);
  }
  va_cuda_queue_scalars(g, dacc, nx);
  if (upd) va_cuda_update_anchors(g, upd->eta, upd->beta, upd->max_step, st->cosine);
  va_comm_wait_device();
  va_cuda_take_scalars(g, nx, acc);
}
static void gpu_remap(va_state_t *st, const int64_t *newidx, int64_t k_old) {
  va_cuda_remap_assign(ctx_of(st), newidx, k_old);
}
static void gpu_split(va_state_t *st, const int64_t *slot, int64_t m, const float *cent, double *sums) {
  va_cuda_split_accumulate(ctx_of(st), slot, m, cent, sums);
}
static void gpu_get_rows(va_state_t *st, const int64_t *rows, int64_t m, float *out) {
  va_cuda_get_rows(ctx_of(st), rows, m, out);
}
static int gpu_encode_codes(va_state_t *st, int64_t r0, int64_t m, int64_t M, int64_t ksub, const float *codebooks,
                            uint8_t *codes, double *err, double *x2, double *r2, double *colsum) {
  return va_cuda_pq_encode(ctx_of(st), st->A, st->k, st->assign + r0, r0, m, M, ksub, codebooks, codes, err, x2, r2,
                           colsum);
}
static void gpu_sync_host(va_state_t *st) {
  va_cuda_download(ctx_of(st), st->assign, st->r);
  memcpy(st->prev, st->assign, (size_t)st->n_local * sizeof(uint32_t));
}
static void gpu_push_prev(va_state_t *st) { va_cuda_set_assign(ctx_of(st), st->prev); }
static void gpu_destroy(va_state_t *st) {
  if (st->be_ctx) va_cuda_destroy(ctx_of(st));
  st->be_ctx = NULL;
}
static double gpu_streamed_bytes(va_state_t *st) {
  va_cuda_t *g = ctx_of(st);
  return va_cuda_stream_rows(g) > 0 ? va_cuda_streamed_bytes(g) : -1;
}

const va_backend_t va_backend_cuda = {
    .name = "cuda",
    .owns_anchors = 1,
    .pull_anchors = gpu_pull_anchors,
    .replace_anchor_rows = gpu_replace_anchor_rows,
    .set_anchors = gpu_set_anchors,
    .assign = gpu_assign,
    .assign_to = gpu_assign_to,
    .init_farthest = gpu_init_farthest,
    .farthest = gpu_farthest,
    .hist = gpu_hist,
    .stats = gpu_stats,
    .remap = gpu_remap,
    .split_accumulate = gpu_split,
    .get_rows = gpu_get_rows,
    .encode_codes = gpu_encode_codes,
    .sync_host = gpu_sync_host,
    .push_prev = gpu_push_prev,
    .destroy = gpu_destroy,
    .streamed_bytes = gpu_streamed_bytes,
};

int va_cuda_pick_device(int requested) {
  const va_visible_t narrowed = va_visible_narrow(requested); /* before the driver's start */
  if (narrowed == VA_VISIBLE_NONE) return -1;
  int n = va_cuda_device_count();
  if (n <= 0) return -1;
  const int device = narrowed == VA_VISIBLE_NARROWED ? 0
                     : requested >= 0                ? (requested < n ? requested : -1)
                                                     : va_proc.local_rank % n;
  if (device >= 0) va_exit_skip_handlers();
  return device;
}

void va_backend_cuda_attach(va_state_t *st, int device, int precision, int64_t chunk_rows) {
  va_cuda_t *g = va_cuda_create_streamed(device, st->n_local, st->d, st->k_cap > st->k ? st->k_cap : st->k, precision,
                                         chunk_rows, st->aopts.threads);
  /* st->X NULL: the caller puts the rows in (read straight to the GPU, or va_cuda_adopt_rows). */
  if (st->X) {
    va_cuda_upload_rows(g, st->X, 0, st->n_local);
    va_cuda_finish_rows(g);
  }
  st->be = &va_backend_cuda;
  st->be_ctx = g;
}

void va_backend_cuda_warm_up(va_state_t *st) {
  va_cuda_warm_up(ctx_of(st), st->cosine);
  gpu_push_prev(st);
  va_comm_ready(st->k * VA_STATS_W(st->d) + VA_ITER_EXTRAS); /* gpu_stats' count in an iteration */
}

int va_cuda_start_device(int device) {
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(NULL) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return 0;
}

int va_cuda_bus_id(int device, char *buf, int len) { return cudaDeviceGetPCIBusId(buf, len, device) != cudaSuccess; }

int va_cuda_memory(int device, size_t *free_bytes, size_t *total_bytes) {
  if (cudaSetDevice(device) != cudaSuccess) return 1;
  return cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess;
}
