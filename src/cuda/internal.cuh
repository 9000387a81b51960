/* internal.cuh: the context struct shared by the k-means kernels' .cu files (cuda/), and the launchers
 * behind the entry points that the test and benchmark probes (cuda/probe.cu) call too. */
#ifndef VECANNEAL_CUDA_INTERNAL_CUH
#define VECANNEAL_CUDA_INTERNAL_CUH
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/blas.cuh"  /* va_blas */
#include "cuda/check.cuh" /* VA_CUDA, VA_CUBLAS, VA_LAUNCHED, dalloc, dfree */
#include "cuda/elem.cuh"  /* elem_to_float, elem_from_float */
#include "cuda/kernels.h" /* the C API this context serves */
#include "cuda/vmm.cuh"   /* va_vmm_t */

/* Row stride of every device matrix (floats or 16-bit elements): d rounded up to 32, zero padded, so
 * that a 32-byte k-step of the tensor-core kernels never straddles a row's end. */
#define VA_CUDA_DPAD   32
/* Rows are padded to a multiple of this (the fused kernel's largest BM), anchors too (largest BN). */
#define VA_CUDA_ROWPAD 256
#define VA_CUDA_KPAD   256

struct va_cuda {
  int device, precision, assign_variant, stats_variant;
  int seg_way; /* how the sorted statistics group rows by anchor: VA_SEG_* (AUTO unless a probe forces one) */
  int64_t n, npad, d, dp;
  int64_t k, k_cap; /* anchors in use; allocated (a multiple of VA_CUDA_KPAD) */
  cudaStream_t stream;
  cudaEvent_t ev0, ev1;
  cublasHandle_t blas;
  cudaDeviceProp prop;
  /* rows (resident: chunk_rows = 0) */
  /* The rows, resident: float32 at fp32/tf32, 16-bit alone at fp16/bf16 (the rows' storage precision:
   * half the bytes). X32 at fp16/bf16 only while rows are preprocessed on the device (defer_convert: from
   * va_cuda_defer_conversion to va_cuda_finish_rows). NULL when streaming. */
  float *X32;        /* npad x dp, zero padded */
  void *Xlp;         /* npad x dp fp16/bf16 (precision 2/3), else NULL */
  va_vmm_t rows_vmm; /* fp16/bf16 preprocessed on the device: X32, then Xlp in its first half */
  float *Xup;        /* fp16/bf16, rows uploaded without preprocessing: one staging buffer's rows
                        in float32 on the device, converted from there into Xlp */
  int *overflow;     /* set when a row does not fit fp16 */
  /* out-of-core (chunk_rows > 0): the rows stay in pinned host memory and every pass copies them, a
   * chunk at a time, into one of two device buffers on copy_stream while the previous chunk is worked
   * on (va_cuda_each_rows) */
  int64_t chunk_rows; /* a multiple of VA_CUDA_ROWPAD */
  int host_threads;   /* the rank's threads, for host-side copies of rows into pinned memory */
  int64_t view_rows;  /* the most rows one pass launch sees: chunk_rows, or n resident */
  float *Xh;          /* pinned, n x dp float32, zero padded; at fp16/bf16, once host16, its first
                         half holds the n x dp 16-bit rows (stream_rows_to_16) */
  int host16;
  void *Xc[2];     /* chunk_rows x dp each, as stored (float32; 16-bit at fp16/bf16) */
  int64_t held[2]; /* chunk a buffer holds (or is being filled with); -1 none */
  cudaStream_t copy_stream;
  cudaEvent_t copied[2], consumed[2];
  double copied_bytes; /* rows copied host to device so far */
  /* anchors */
  float *A32;                /* k_cap x dp */
  void *Alp;                 /* k_cap x dp fp16/bf16 */
  float *bias_l2, *bias_cos; /* k_cap: half biases ||a||^2 / 2 (l2), 0 (cosine) for j < k, +inf beyond */
  double *vel;               /* k_cap x d: the momentum of the device update (va_cuda_update_anchors) */
  /* per row */
  uint32_t *assign; /* n (UINT32_MAX before the first pass) */
  float *r;
  uint32_t *keys, *keys_sorted, *iota, *vals_sorted; /* view_rows each: the sort of rows by segment */
  unsigned long long *counter;                       /* changed rows */
  unsigned long long *h_counter;                     /* pinned: [0] changed rows, [1] the overflow flag */
  /* deferred assign pass (va_cuda_assign_deferred): its count still to go into the statistics; r[] not
   * yet computed (the statistics pass or va_cuda_ensure_r does it); the metric it ranked by */
  int count_pending, r_pending, cosine_last;
  /* streamed, r not wanted first (rule not trim): the deferred pass is left owed and runs chunk by chunk
   * inside the next statistics pass, so the rows are copied up once an iteration instead of twice; any
   * other entry into the context runs it on its own first (va_cuda_enter) */
  int assign_owed;
  /* the scalar columns of the statistics on their way to the host (va_cuda_queue_scalars) */
  double *scal, *h_scal; /* device, pinned: 3 k_cap + (d + 3) + 1 */
  int64_t scal_cap, scal_k, scal_nx;
  cudaEvent_t scal_ready;
  /* pinned upload buffer of the statistics call (rule arrays, appended values); up_done: its last use */
  void *h_up;
  size_t h_up_bytes;
  cudaEvent_t up_done;
  /* GEMM path scratch: chunk x k_cap floats */
  float *C;
  int64_t chunk, C_cap, gemm_rows;
  /* per anchor */
  unsigned *rmax_bits;
  unsigned long long *rarg;
  float *rmax_in;
  int32_t *bin_lo, *bin_hi;
  double *huber;
  unsigned *hist;
  int64_t hist_cap;
  double *acc; /* seg_cap x W */
  /* segmented reduction */
  int64_t seg_cap; /* segments the arrays below hold (+1) */
  int32_t *seg_start, *seg_end, *npieces, *pstart, *ptable;
  double *partial;
  int64_t partial_cap; /* pieces */
  void *cub_tmp;
  size_t cub_tmp_bytes;
  /* split */
  int32_t *slot;
  float *cent;
  int64_t split_cap; /* halves */
  /* anchors' pinned staging (k_cap x dp floats, then k_cap norms); `anchors_staged` marks the end of
   * its last upload */
  float *h_anchors;
  cudaEvent_t anchors_staged;
  float *A_stage;  /* k_cap x dp, then k_cap indices: replaced anchor rows on their way into A32 */
  float *norms_in; /* k_cap: norms given by the caller */
  /* host staging (streamed contexts: at most pinned[0], pageable, for padded rows; make_staging) */
  float *pinned[2];
  cudaEvent_t staged[2];
  size_t pinned_bytes;
  int pin_next;
  int defer_convert; /* rows uploaded raw, preprocessed on the device, then va_cuda_finish_rows */
  void *h_buf;       /* pinned scratch for results */
  size_t h_buf_bytes;
  int64_t *d_rows; /* get_rows indices */
  float *d_rows_out;
  int64_t rows_cap;
  /* farthest-point initialisation (cuda_init.cu), between its begin and end: each row's distance to
   * its nearest anchor so far, one candidate key per anchor, the anchors chosen (k x dp) */
  float *fpi_mind;
  unsigned long long *fpi_key;
  float *fpi_A;
  int64_t fpi_k, fpi_row0;
  /* resolved fused-kernel configuration (cuda_assign.cu): 0 none, 1..6; fused_force: asked for */
  int fused_cfg, fused_force;
  /* the TMA kernel's anchor slices (cuda_assign.cu, va_cuda_tma_splits): merge keys (view_rows, all ones between
   * passes) and tickets (one per 128 rows, zero between passes), made by the first pass that splits;
   * tma_splits_force: slices asked for (0: automatic) */
  unsigned long long *tma_merged;
  unsigned *tma_tickets;
  int tma_splits_force;
};

/* The rows one launch works on: local rows [row0, row0 + n); X32 (fp32/tf32) or Xlp (fp16/bf16; X32 is
 * then NULL) points at row row0 (resident: into the whole shard; streamed: at a chunk buffer); their a[]
 * and r[] are ctx->assign / ctx->r + row0. */
typedef struct {
  const float *X32;
  const void *Xlp;
  int64_t row0, n;
} va_cuda_rows_t;

/* --- rows as stored: a kernel that reads rows is a template on their element type T (float, __half,
 * __nv_bfloat16) and sees every value as the float it is (elem_to_float: a 16-bit value converts exactly). */
/* Elements p[0..3] (p 4-element aligned); CS: a streaming load (evict first), else through the
 * read-only cache. */
template <bool CS>
__device__ __forceinline__ float4 row_load4(const float *p) {
  return CS ? __ldcs((const float4 *)p) : __ldg((const float4 *)p);
}
template <bool CS>
__device__ __forceinline__ float4 row_load4(const __half *p) {
  const uint2 u = CS ? __ldcs((const uint2 *)p) : __ldg((const uint2 *)p);
  const float2 a = __half22float2(*(const __half2 *)&u.x), b = __half22float2(*(const __half2 *)&u.y);
  return make_float4(a.x, a.y, b.x, b.y);
}
template <bool CS>
__device__ __forceinline__ float4 row_load4(const __nv_bfloat16 *p) {
  const uint2 u = CS ? __ldcs((const uint2 *)p) : __ldg((const uint2 *)p);
  const float2 a = __bfloat1622float2(*(const __nv_bfloat162 *)&u.x),
               b = __bfloat1622float2(*(const __nv_bfloat162 *)&u.y);
  return make_float4(a.x, a.y, b.x, b.y);
}
/* f(rows) with the view's rows as the pointer type the context's precision stores them in. */
template <typename F>
static inline void va_cuda_with_rows(const va_cuda_t *ctx, const va_cuda_rows_t *v, F &&f) {
  if (ctx->precision == VA_CUDA_FP16) f((const __half *)v->Xlp);
  else if (ctx->precision == VA_CUDA_BF16) f((const __nv_bfloat16 *)v->Xlp);
  else f(v->X32);
}
/* The view of all of a resident context's rows. */
static inline va_cuda_rows_t va_cuda_resident_rows(const va_cuda_t *ctx) {
  va_cuda_rows_t v = {ctx->X32, ctx->Xlp, 0, ctx->n};
  return v;
}
typedef void (*va_cuda_rows_fn)(va_cuda_t *ctx, const va_cuda_rows_t *v, void *arg);
/* Enqueues fn for views covering all rows in order (resident: one view; streamed: one per chunk, with
 * its 16-bit copy converted first at fp16/bf16, the float32 chunk rounded to it as the resident rows
 * are); does not wait for the device itself. */
void va_cuda_each_rows(va_cuda_t *ctx, va_cuda_rows_fn fn, void *arg);

/* One float4 of a row and of an anchor added to a distance sum in double, in order (r, farthest init). */
__device__ __forceinline__ double dist_acc4(float4 x, float4 a, int cosine, double s) {
  if (cosine) {
    s += (double)x.x * (double)a.x;
    s += (double)x.y * (double)a.y;
    s += (double)x.z * (double)a.z;
    s += (double)x.w * (double)a.w;
  } else {
    double e;
    e = (double)x.x - (double)a.x;
    s += e * e;
    e = (double)x.y - (double)a.y;
    s += e * e;
    e = (double)x.z - (double)a.z;
    s += e * e;
    e = (double)x.w - (double)a.w;
    s += e * e;
  }
  return s;
}

/* Internal entry points across the .cu files. */
/* Every entry point starts here: the context's device current, and a streamed assign pass still owed
 * (assign_owed) run, so that nothing sees a[], r[] or the count before it or changes what it reads. */
void va_cuda_enter(va_cuda_t *ctx);
void *va_cuda_host_scratch(va_cuda_t *ctx, size_t bytes);
void va_cuda_ensure_segments(va_cuda_t *ctx, int64_t nseg);
/* cub's scratch (cub_tmp) grown to `need` bytes when short, after the queued work */
void va_cuda_cub_scratch(va_cuda_t *ctx, size_t need);
/* The view's n rows grouped by key in [0, nseg] (cuda_seg_sort.cu): vals_sorted, seg_start and seg_end, queued.
 * way: VA_SEG_AUTO (the counting sort where it applies, else the radix sort) or VA_SEG_RADIX (forced). Returns
 * the sort taken: VA_SEG_COUNT or VA_SEG_RADIX. */
enum { VA_SEG_AUTO = 0, VA_SEG_COUNT = 1, VA_SEG_RADIX = 2 };
int va_cuda_segment_rows(va_cuda_t *ctx, const uint32_t *keys, int64_t n, int64_t nseg, int way);
int va_cuda_fused_config(const va_cuda_t *ctx);
/* blocks per 128-row block of the TMA kernel for a launch over n rows (cuda_assign.cu) */
int va_cuda_tma_splits(const va_cuda_t *ctx, int64_t n);
/* Parts of an assign pass (benchmarks): the whole pass; the GEMM path's cuBLAS products alone; the
 * fused path's argmin kernel alone (a[] and the changed count); its r kernel alone. */
enum { VA_ASSIGN_PART_ALL = 0, VA_ASSIGN_PART_PRODUCTS = 1, VA_ASSIGN_PART_ARGMIN = 2, VA_ASSIGN_PART_R = 3 };
void va_cuda_assign_launch(va_cuda_t *ctx, const va_cuda_rows_t *v, int cosine, int variant, int part);
/* r[] of every row for the current a[] when a deferred assign pass left it owed (r_pending). */
void va_cuda_ensure_r(va_cuda_t *ctx);
/* The owed assign pass (assign_owed) on its own, as va_cuda_assign_deferred would have run it. */
void va_cuda_settle_assign(va_cuda_t *ctx);

/* --- launchers behind the entry points, shared with the test and benchmark probes (cuda/probe.cu), so
 * that what a probe times or checks is the host code and kernels a job runs, launched the same way. */
/* Fatal unless anchors are set (an assign pass needs them). */
void va_cuda_check_ready(va_cuda_t *ctx);
/* One assign pass over view v (a va_cuda_rows_fn): arg points at its assign_args; part VA_ASSIGN_PART_*. */
struct assign_args {
  int cosine, variant, part;
};
void va_cuda_assign_rows(va_cuda_t *ctx, const va_cuda_rows_t *v, void *arg);
/* The statistics rule on the device: arrays indexed by segment (anchor). */
struct rule_dev {
  int mode;
  const float *rmax;
  const int32_t *lo, *hi;
  int64_t bins;
  const double *delta;
};
/* The rule's arrays into the context's pinned upload buffer and on to the device (queued; the caller
 * waits for up_done before and records it after). */
rule_dev va_cuda_upload_rule(va_cuda_t *ctx, const va_stats_rule_t *rule);
/* ctx->acc (k x VA_STATS_W(d)) <- the statistics under ru, queued; assign_owed: the owed assign pass runs
 * inside it. */
void va_cuda_stats_launch(va_cuda_t *ctx, const rule_dev &ru, int assign_owed);
/* Farthest member per anchor into rmax_bits / rarg, queued. */
void va_cuda_farthest_launch(va_cuda_t *ctx);
/* ctx->hist (k x bins) <- member counts per bin over [0, rmax_host[j]] (k floats, copied in first),
 * queued. */
void va_cuda_hist_launch(va_cuda_t *ctx, const float *rmax_host, int64_t bins);
#endif
