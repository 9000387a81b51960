/* cuda_kernels.h: the CUDA backend's device kernels behind a small, host-orchestrated C API.
 * One context per rank holds that rank's rows on one GPU (n_local x d, float32 master copy, plus a
 * float16/bfloat16 copy for the products when precision asks for it), the anchors, a[] and r[]. Rows
 * that do not fit the GPU can stay in pinned host memory instead (out-of-core, va_cuda_create_streamed):
 * every pass then copies them in chunks through two device buffers, the copies overlapping the kernels.
 * Every call runs on the context's own stream and returns when its host outputs are ready.
 * Semantics follow the CPU kernels (assign.h, stats.h): ties go to the lowest anchor, r is the exact
 * distance to the winner (double accumulation, float result, as va_row_distance), and the statistics
 * rows are the k x (d + 3) layout of stats.h. Any CUDA/cuBLAS failure is fatal (VA_FATAL: rank, host,
 * file:line, the library's message, MPI_Abort). docs/cuda.md describes kernels and precisions,
 * docs/performance.md the numbers.
 * Only built when VECANNEAL_CUDA is defined (cmake/cuda.cmake). The hooks of the tests and benchmarks
 * (forcing a kernel, timing, poisoning a[] and r[]) are not part of this API: cuda/probe.h, a library of
 * their own that the vecanneal executable does not link. */
#ifndef VECANNEAL_CUDA_KERNELS_H
#define VECANNEAL_CUDA_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#include "cpu/stats.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Precision. fp32/tf32: only the argmin's dot products; r, the statistics and fetched rows are exact
 * float32 data. fp16/bf16 are also the rows' storage: the rows are rounded to 16 bits once (the float32
 * copy holds those values), so r, the statistics and fetched rows are those of the rounded rows. */
enum { VA_CUDA_FP32 = 0, VA_CUDA_TF32 = 1, VA_CUDA_FP16 = 2, VA_CUDA_BF16 = 3 };
/* Assign kernels: AUTO picks FUSED where it applies (tf32/fp16/bf16 and d small enough for its shared
 * memory tiles), else DIRECT for a small pass (n_local x k x d up to VA_CUDA_DIRECT_MAX_WORK: one warp
 * per row, float32 products, no cuBLAS), else GEMM (cuBLAS on row chunks + an argmin kernel). */
enum { VA_CUDA_ASSIGN_AUTO = 0, VA_CUDA_ASSIGN_GEMM = 1, VA_CUDA_ASSIGN_FUSED = 2, VA_CUDA_ASSIGN_DIRECT = 3 };
#define VA_CUDA_DIRECT_MAX_WORK 1073741824.0
/* Statistics reduction: SORT (stable radix sort of rows by anchor + fixed-order segmented sums:
 * bit-for-bit reproducible, the default) or ATOMIC (fp64 atomicAdd: order, hence last bits, vary). */
enum { VA_CUDA_STATS_SORT = 0, VA_CUDA_STATS_ATOMIC = 1 };

/* Number of visible CUDA devices; 0 when there is no driver or no device. Never fails. */
int va_cuda_device_count(void);

typedef struct va_cuda va_cuda_t;

/* Rows per streamed chunk for about chunk_bytes of float32 rows (a multiple of the row padding). */
int64_t va_cuda_stream_chunk_rows(int64_t d, double chunk_bytes);
/* Pinned host bytes of a streamed context's rows (n_local x d padded). */
size_t va_cuda_stream_host_bytes(int64_t n_local, int64_t d);
/* Device bytes a context of this shape will hold (rows or chunk buffers, per-row arrays, anchors,
 * scratch), for a resource check before creating it. chunk_rows: 0 resident, else streamed. */
size_t va_cuda_bytes_needed(int64_t n_local, int64_t d, int64_t k_cap, int precision, int64_t chunk_rows);
/* Device bytes held on top of that while the rows are preprocessed on the device
 * (va_cuda_defer_conversion .. va_cuda_finish_rows): resident fp16/bf16 rows in float32; else 0. */
size_t va_cuda_prep_bytes(int64_t n_local, int64_t d, int precision, int64_t chunk_rows);
/* Context on device `device` for n_local rows of dimension d and up to k_cap anchors (it grows on
 * demand past k_cap). precision: VA_CUDA_*. chunk_rows: 0 = the rows live on the device; > 0 = they
 * live in pinned host memory and stream through chunks of this many rows (va_cuda_stream_chunk_rows);
 * host_threads take the page faults of that memory and copy host rows in (va_cuda_upload_rows).
 * va_cuda_create is va_cuda_create_streamed with chunk_rows 0 and one host thread. */
va_cuda_t *va_cuda_create_streamed(int device, int64_t n_local, int64_t d, int64_t k_cap, int precision,
                                   int64_t chunk_rows, int host_threads);
va_cuda_t *va_cuda_create(int device, int64_t n_local, int64_t d, int64_t k_cap, int precision);
/* e.g. "NVIDIA H200 sm_90, 139 GiB, 132 SMs, tf32 products" (+ the streaming, if any) */
void va_cuda_describe(const va_cuda_t *ctx, char *buf, size_t len);
/* Streaming: rows per chunk (0: resident) and bytes of rows copied to the device so far. */
int64_t va_cuda_stream_rows(const va_cuda_t *ctx);
double va_cuda_streamed_bytes(const va_cuda_t *ctx);
/* The assign kernel the next va_cuda_assign runs (AUTO resolved; AUTO unless cuda/probe.h chose one). */
int va_cuda_assign_variant(const va_cuda_t *ctx);

/* Rows [local_row0, local_row0 + nrows) from host float32 (nrows x d, row-major). Staged through two
 * pinned buffers: the call returns once `rows` has been copied out, while the transfer to the device
 * (and the conversion to the product precision) still runs, so the caller's next read overlaps it. */
void va_cuda_upload_rows(va_cuda_t *ctx, const float *rows, int64_t local_row0, int64_t nrows);
/* The same through the caller's hands (compress reads the file straight into the staging buffers):
 * rows per buffer; the buffer for rows from local_row0 on (row-major, d floats a row; room for rows
 * per buffer or up to the last local row, whichever is fewer): the next staging buffer once its last
 * transfer is done, or, streamed with d a multiple of 32, the context's pinned host copy at that row
 * (the read lands in place); then queue its first nrows rows as rows [local_row0, local_row0 + nrows)
 * (streamed: in the pinned host copy before the call returns). */
int64_t va_cuda_upload_buffer_rows(va_cuda_t *ctx);
float *va_cuda_upload_buffer(va_cuda_t *ctx, int64_t local_row0);
void va_cuda_upload_buffered(va_cuda_t *ctx, int64_t local_row0, int64_t nrows);
/* Rows kept on the device for preprocessing there, to compress.c's bits (compress: no host shard):
 * after va_cuda_defer_conversion, uploads keep the float32 values until va_cuda_finish_rows makes the
 * 16-bit rows (fp16/bf16: and drops the float32 ones; no pass may run before it), so that the preprocessing can run on
 * the device in between: va_cuda_block_column_sums (compress.c's column_sums, one block of `block` rows per entry of
 * part_host: nblocks x d sums, or x 2d with the squares; with center_host, the rows are centred first) and
 * va_cuda_unit_rows (unit rows in place as compress.c makes them for cosine, zero rows left zero; returns their count).
 * va_cuda_adopt_rows instead takes all rows from device memory of this context's GPU (n_local x d
 * floats, row-major: the embedder's vectors), conversion deferred likewise. Deferring does nothing
 * on a streamed context; the others are for resident contexts only; the sums and the unit rows wait. */
void va_cuda_defer_conversion(va_cuda_t *ctx);
/* A streamed context's pinned host copy of its rows, for preprocessing them there in place (n_local
 * rows of d floats, *ld floats apart; the padding columns stay zero). No pass may be running. */
float *va_cuda_stream_host_rows(va_cuda_t *ctx, int64_t *ld);
void va_cuda_adopt_rows(va_cuda_t *ctx, const float *drows);
void va_cuda_block_column_sums(va_cuda_t *ctx, int64_t block, const double *center_host, int squares,
                               double *part_host);
int64_t va_cuda_unit_rows(va_cuda_t *ctx);
/* The rows are all in: deferred rows converted (above); uploads' float32 staging on the device dropped. */
void va_cuda_finish_rows(va_cuda_t *ctx);
/* Device memory from elsewhere in the process (va_bert_cuda_output_to_device): free it, copy it out. */
void va_cuda_free_device(void *dptr);
void va_cuda_copy_to_host(void *host, const void *dptr, size_t bytes);
/* Anchors A (k x d) and their squared norms anorm (k; NULL: computed on the device as va_row_norms
 * does: double products and sums in order, then float). Returns at once (A is copied out first). */
void va_cuda_set_anchors(va_cuda_t *ctx, const float *A, const float *anorm, int64_t k);
/* Assign pass on the device (a[], r[] stay there). Returns the number of rows whose anchor differs
 * from the previous pass (the first pass: all rows). */
int64_t va_cuda_assign(va_cuda_t *ctx, int cosine);
/* A side pass over listed rows only (local indices, any order, repeats allowed), against the anchors
 * in place: a[q], r[q] of row local_rows[q], the bits a full pass gives that row (on the GEMM path,
 * where cuBLAS may take another algorithm for another row count, up to a near-tie's other anchor); the
 * rows' own a[], r[] and the pending changed count are not touched. Gathers the rows on the device, so it declines
 * (returns 0, nothing done) with rows streamed from the host or more than n / 4 rows listed: the
 * caller then runs a full pass. 1 when done. */
int va_cuda_assign_listed(va_cuda_t *ctx, int cosine, const int64_t *local_rows, int64_t m, uint32_t *a, float *r);
/* The same pass for the annealing loop, queued without waiting: the changed count stays on the device
 * and the next va_cuda_stats_device puts it in place of its first appended value. want_r = 0 lets the
 * fused kernels leave r[] to that statistics pass when its rule is none or huber (it reads the rows and
 * computes r from them, one pass over the rows less); whatever reads r before (farthest, histogram,
 * download, a trim rule) computes it first. Streamed rows with want_r = 0: the whole pass waits for
 * that statistics pass and runs inside it, chunk by chunk (one copy of the rows); any other call on
 * the context runs it on its own first. */
void va_cuda_assign_deferred(va_cuda_t *ctx, int cosine, int want_r);
/* a[] from the host (n_local entries): the assignment the next pass counts its changes against
 * (e.g. restored after a side pass with other anchors). Entries must be < k or UINT32_MAX. */
void va_cuda_set_assign(va_cuda_t *ctx, const uint32_t *assign_host);
/* After a merge: a[i] <- newidx[a[i]] for every row (newidx has k_old entries). */
void va_cuda_remap_assign(va_cuda_t *ctx, const int64_t *newidx, int64_t k_old);
/* Per anchor: the largest local r (0 if no member) and its lowest local row (-1 if no member), as
 * va_farthest_local. */
void va_cuda_farthest(va_cuda_t *ctx, float *rmax_host, int64_t *rarg_host);
/* Farthest-point initialisation (init.c's init_farthest) on the device, resident rows only. begin: 0
 * (nothing done) for streamed rows or global_n >= 2^32 - 1; else the running minima start at FLT_MAX and
 * anchor 0's key names global row 0. pick: anchor q <- this rank's row named by key q (one rank: no
 * wait). set: anchor q <- row (d floats, host; several ranks fetch it). step: every row's minimum takes
 * anchor q, and key q + 1 <- the largest (minimum's float bits << 32 | 0xFFFFFFFF - global row) of this
 * rank (nothing for the last anchor). candidate: waits and decodes key q: this rank's farthest row for
 * anchor q (lowest global row on ties) and its distance (-1 and INT64_MAX without rows). end: A_host
 * (k x d) <- the anchors; frees. */
int va_cuda_farthest_init_begin(va_cuda_t *ctx, int64_t k, int64_t global_row0, int64_t global_n);
void va_cuda_farthest_init_pick(va_cuda_t *ctx, int64_t q);
void va_cuda_farthest_init_set(va_cuda_t *ctx, int64_t q, const float *row);
void va_cuda_farthest_init_step(va_cuda_t *ctx, int64_t q, int cosine);
void va_cuda_farthest_init_candidate(va_cuda_t *ctx, int64_t q, float *dist, int64_t *global_row);
void va_cuda_farthest_init_end(va_cuda_t *ctx, float *A_host);
/* hist_host (k x bins, zeroed by the caller) += member counts per bin over [0, rmax_host[j]], the
 * bins of va_hist_bin. */
void va_cuda_hist(va_cuda_t *ctx, const float *rmax_host, int64_t bins, double *hist_host);
/* This rank's statistics, as va_stats_accumulate (rule->rmax, bin_lo/hi, huber_delta are host arrays
 * of k entries), followed by the nx values x (nx <= d + 3), in a device buffer of k x VA_STATS_W(d) + nx
 * doubles that stays the context's until its next call. Returns it at once, the work queued on the
 * context's stream (another stream reads it after va_cuda_sync, or ordered after va_cuda_work_stream).
 * After a deferred assign pass the changed count replaces x[0] (nx >= 1). Streamed rows are summed chunk
 * by chunk, the chunks' sums added in chunk order. */
double *va_cuda_stats_device(va_cuda_t *ctx, const va_stats_rule_t *rule, const double *x, int64_t nx);
/* count doubles from a device buffer of the context (e.g. va_cuda_stats_device's) to the host; waits. */
void va_cuda_fetch_f64(va_cuda_t *ctx, const double *dbuf, int64_t count, double *host);
/* And back (the statistics summed over the ranks on the host, when there is no NCCL); waits. */
void va_cuda_put_f64(va_cuda_t *ctx, double *dbuf, const double *host, int64_t count);
/* Waits for everything queued on the context. */
void va_cuda_sync(va_cuda_t *ctx);
/* The context's stream (a cudaStream_t), for work of other libraries ordered with the context's own. */
void *va_cuda_work_stream(const va_cuda_t *ctx);
/* The scalar columns of the statistics in dacc (va_cuda_stats_device's buffer, k x (d + 3) + nx): queue
 * copies weight, count and r sum per anchor and the nx appended values to pinned memory; take waits for
 * them and writes them at their places in host (k x (d + 3) + nx; the d sum columns are left alone).
 * take also stops the job when a conversion to fp16 overflowed since the context was made. */
void va_cuda_queue_scalars(va_cuda_t *ctx, const double *dacc, int64_t nx);
void va_cuda_take_scalars(va_cuda_t *ctx, int64_t nx, double *host);
/* s2.3 on the device from the statistics in the context's buffer (after va_cuda_stats_device and the
 * sum over ranks): for every anchor with count > 0 and weight > 0, as va_update_anchor (and, cosine,
 * va_unit_normalise) bit for bit, on the device's anchors and momentum; then their norms and 16-bit
 * copy. Queued, no wait. */
void va_cuda_update_anchors(va_cuda_t *ctx, double eta, double beta, double max_step, int cosine);
/* The momentum (k x d doubles, host layout) the device update starts from. */
void va_cuda_set_velocity(va_cuda_t *ctx, const double *vel, int64_t k);
/* Anchors idx[0..m) (distinct, < k) <- those rows of A (k x d floats, host; the other rows are not
 * read), their momentum <- 0; the norms and 16-bit copy follow. Queued (the rows are staged first; a
 * later upload of anchors waits for that copy). */
void va_cuda_replace_anchor_rows(va_cuda_t *ctx, const int64_t *idx, int64_t m, const float *A);
/* The device's anchors (k x d floats) and momentum (k x d doubles); either may be NULL; waits. */
void va_cuda_get_anchors(va_cuda_t *ctx, float *A, double *vel);
/* Launches every kernel of a loop iteration once (assign, r, both statistics reductions, the scalars, an
 * update that moves nothing, farthest) so their code is loaded before the timed loop; a[] and r[] are
 * left as after an assign pass (restore the previous pass with va_cuda_set_assign); the anchors are
 * unchanged. Waits. */
void va_cuda_warm_up(va_cuda_t *ctx, int cosine);
/* Split's 2-means step (anneal.c split_anchors): rows whose anchor j has slot[j] = q >= 0 (slot has k
 * entries, -1 = not splitting) join half 2q + (||x - cent[2q+1]|| < ||x - cent[2q]||), distances in
 * double; sums_host (2m x (d + 1), zeroed by the caller) += [sum of members (d), member count]. */
void va_cuda_split_accumulate(va_cuda_t *ctx, const int64_t *slot, int64_t m, const float *cent, double *sums_host);
/* a[] and r[] to the host (either may be NULL). */
void va_cuda_download(va_cuda_t *ctx, uint32_t *assign_host, float *r_host);
/* m rows by local index, float32, m x d. */
void va_cuda_get_rows(va_cuda_t *ctx, const int64_t *local_rows, int64_t m, float *out);
/* Residual PQ codes of local rows [r0, r0 + m) (cuda/pq_encode.cu), each row less its anchor A[assign[i]]
 * (A: k x d on the host; assign: the m rows' anchors on the host) against codebooks (M x ksub x dmax,
 * cpu/pq.h's layout): codes (m x M), and per row err (the codes' squared error), x2 (|x|^2) and r2
 * (|x - a|^2), colsum (d) += the rows' values, all with the bits of the host path (job/codes.c). Returns
 * 0, having done nothing, where the rows are not resident or the widest subspace is too wide for the
 * device encoder. */
int va_cuda_pq_encode(va_cuda_t *ctx, const float *A, int64_t k, const uint32_t *assign, int64_t r0, int64_t m,
                      int64_t M, int64_t ksub, const float *codebooks, uint8_t *codes, double *err, double *x2,
                      double *r2, double *colsum);
void va_cuda_destroy(va_cuda_t *ctx);

#ifdef __cplusplus
}
#endif
#endif
