/* cuda_context.cu: the CUDA context (device buffers, streams, cuBLAS handle), row upload through pinned
 * staging, the out-of-core row chunks (va_cuda_each_rows), anchors, downloads, row fetches and the small
 * per-row kernels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "cuda/internal.cuh"

/* Pinned staging buffer for uploads, each of two. */
static const size_t PIN_BYTES = (size_t)32 << 20;
/* The GEMM path's scratch: about this many floats (cuda_assign.cu gemm_chunk). */
static const int64_t GEMM_SCRATCH_FLOATS = (int64_t)32 << 20;

extern "C" int va_cuda_device_count(void) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* no driver / no device: clear the sticky-free error and report none */
    return 0;
  }
  return n;
}

void va_cuda_enter(va_cuda_t *ctx) {
  VA_CUDA(cudaSetDevice(ctx->device));
  if (ctx->assign_owed) va_cuda_settle_assign(ctx);
}

static size_t elem_lp(int precision) { return precision >= VA_CUDA_FP16 ? 2 : 0; }

static int64_t padded_dim(int64_t d) { return VA_ROUND_UP(d > 0 ? d : 1, VA_CUDA_DPAD); }

extern "C" int64_t va_cuda_stream_chunk_rows(int64_t d, double chunk_bytes) {
  int64_t rows = (int64_t)(chunk_bytes / (double)(padded_dim(d) * 4)) / VA_CUDA_ROWPAD * VA_CUDA_ROWPAD;
  return rows > VA_CUDA_ROWPAD ? rows : VA_CUDA_ROWPAD;
}

extern "C" size_t va_cuda_stream_host_bytes(int64_t n, int64_t d) {
  return (size_t)(n > 0 ? n : 1) * (size_t)padded_dim(d) * 4;
}

/* A streamed context needs no more chunk rows than the shard has. */
static int64_t chunk_for(int64_t n, int64_t chunk_rows) {
  int64_t npad = VA_ROUND_UP(n > 0 ? n : 1, VA_CUDA_ROWPAD);
  return chunk_rows > npad ? npad : chunk_rows;
}

extern "C" size_t va_cuda_bytes_needed(int64_t n, int64_t d, int64_t k_cap, int precision, int64_t chunk_rows) {
  int64_t dp = padded_dim(d), npad = VA_ROUND_UP(n > 0 ? n : 1, VA_CUDA_ROWPAD);
  int64_t kc = VA_ROUND_UP(k_cap > 0 ? k_cap : 1, VA_CUDA_KPAD);
  int64_t view = chunk_rows > 0 ? chunk_for(n, chunk_rows) : npad;
  /* resident: the rows as stored, and at fp16/bf16 one staging buffer's rows in float32 (Xup) */
  size_t rows = chunk_rows > 0
                    ? (size_t)view * (size_t)dp * 8 /* two float32 chunks; two 16-bit and, once, a float32 one */
                : elem_lp(precision)
                    ? (size_t)npad * (size_t)dp * 2 + (PIN_BYTES / ((size_t)(d > 0 ? d : 1) * 4) + 1) * (size_t)dp * 4
                    : (size_t)npad * (size_t)dp * 4;
  /* a[], r[]; per view row the sort's keys and values and the TMA kernel's merge key, and its tickets (one per
   * 128 rows; both made only when that kernel splits its anchor tiles) */
  rows += (size_t)n * 8 + (size_t)view * 24 + ((size_t)view / 128 + 1) * 4;
  size_t anchors = (size_t)kc * ((size_t)dp * (12 + elem_lp(precision)) + (size_t)VA_STATS_W(d) * 8 + 76);
  size_t gemm = (size_t)GEMM_SCRATCH_FLOATS * 4 + (size_t)kc * 4 * VA_CUDA_ROWPAD;
  size_t seg =
      ((size_t)view / 256 + (size_t)kc + 2) * (size_t)VA_STATS_W(d) * 8 + (size_t)view * 4 + ((size_t)64 << 20);
  return rows + anchors + gemm + seg;
}

extern "C" size_t va_cuda_prep_bytes(int64_t n, int64_t d, int precision, int64_t chunk_rows) {
  if (chunk_rows > 0 || !elem_lp(precision)) return 0;
  /* float32 rows in place of the 16-bit ones (the second half of va_vmm_alloc's, each half rounded up to
   * the driver's granularity, 2 MiB), and the first rows' 4 MiB buffer (convert_rows_in_place) */
  return (size_t)VA_ROUND_UP(n > 0 ? n : 1, VA_CUDA_ROWPAD) * (size_t)padded_dim(d) * 2 + ((size_t)8 << 20);
}

__global__ void iota_kernel(uint32_t *v, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    v[i] = (uint32_t)i;
}

static int grid_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 65535 * 16) b = 65535 * 16;
  return (int)b;
}

static void ensure_fetch_rows(va_cuda_t *c, int64_t m);

/* Per-anchor arrays sized by k_cap. */
static void alloc_anchor_arrays(va_cuda_t *c) {
  size_t kc = (size_t)c->k_cap, dp = (size_t)c->dp;
  dalloc(&c->A32, kc * dp * 4, "anchors");
  VA_CUDA(cudaMemsetAsync(c->A32, 0, kc * dp * 4, c->stream));
  if (c->precision >= VA_CUDA_FP16) {
    dalloc(&c->Alp, kc * dp * 2, "anchors (16-bit)");
    VA_CUDA(cudaMemsetAsync(c->Alp, 0, kc * dp * 2, c->stream));
  }
  dalloc(&c->bias_l2, kc * 4, "anchor norms");
  dalloc(&c->bias_cos, kc * 4, "anchor bias");
  dalloc(&c->rmax_bits, kc * 4, "farthest");
  dalloc(&c->rarg, kc * 8, "farthest rows");
  dalloc(&c->rmax_in, kc * 4, "rmax");
  dalloc(&c->bin_lo, kc * 4, "trim bins");
  dalloc(&c->bin_hi, kc * 4, "trim bins");
  dalloc(&c->huber, kc * 8, "huber delta");
  dalloc(&c->norms_in, kc * 4, "anchor norms");
  dalloc(&c->A_stage, kc * (dp + 1) * 4, "replaced anchors");
  dalloc(&c->vel, kc * (size_t)c->d * 8, "momentum");
  VA_CUDA(cudaMemsetAsync(c->vel, 0, kc * (size_t)c->d * 8, c->stream));
  VA_CUDA(cudaMallocHost((void **)&c->h_anchors, kc * (dp + 1) * 4));
  c->scal_cap = 3 * (int64_t)kc + c->d + 3 + 1;
  dalloc(&c->scal, (size_t)c->scal_cap * 8, "statistics scalars");
  VA_CUDA(cudaMallocHost((void **)&c->h_scal, (size_t)c->scal_cap * 8));
  c->h_up_bytes = kc * 12 + ((size_t)c->d + 3) * 8;
  VA_CUDA(cudaMallocHost(&c->h_up, c->h_up_bytes));
}
/* The caller has waited for the stream: nothing still reads these. */
static void free_anchor_arrays(va_cuda_t *c) {
  dfree(&c->A32);
  dfree(&c->Alp);
  dfree(&c->bias_l2);
  dfree(&c->bias_cos);
  dfree(&c->rmax_bits);
  dfree(&c->rarg);
  dfree(&c->rmax_in);
  dfree(&c->bin_lo);
  dfree(&c->bin_hi);
  dfree(&c->huber);
  dfree(&c->norms_in);
  dfree(&c->A_stage);
  dfree(&c->vel);
  dfree(&c->scal);
  dfree(&c->C);
  c->C_cap = 0;
  if (c->h_anchors) VA_CUDA(cudaFreeHost(c->h_anchors));
  if (c->h_scal) VA_CUDA(cudaFreeHost(c->h_scal));
  if (c->h_up) VA_CUDA(cudaFreeHost(c->h_up));
  c->h_anchors = NULL;
  c->h_scal = NULL;
  c->h_up = NULL;
}

extern "C" va_cuda_t *va_cuda_create(int device, int64_t n_local, int64_t d, int64_t k_cap, int precision) {
  return va_cuda_create_streamed(device, n_local, d, k_cap, precision, 0, 1);
}

extern "C" va_cuda_t *va_cuda_create_streamed(int device, int64_t n_local, int64_t d, int64_t k_cap, int precision,
                                              int64_t chunk_rows, int host_threads) {
  if (n_local < 0 || d <= 0 || precision < VA_CUDA_FP32 || precision > VA_CUDA_BF16 || chunk_rows < 0 ||
      chunk_rows % VA_CUDA_ROWPAD)
    VA_FATAL("va_cuda_create: bad shape, precision or chunk (n %lld, d %lld, precision %d, chunk rows %lld)",
             (long long)n_local, (long long)d, precision, (long long)chunk_rows);
  if (n_local >= (int64_t)INT32_MAX)
    VA_FATAL("va_cuda_create: %lld rows on one GPU exceed the 31-bit row index", (long long)n_local);
  int ndev = va_cuda_device_count();
  if (device < 0 || device >= ndev) VA_FATAL("CUDA device %d asked for, but %d visible", device, ndev);
  va_cuda_t *c = (va_cuda_t *)va_calloc(1, sizeof *c, "CUDA context");
  c->device = device;
  c->precision = precision;
  c->n = n_local;
  c->d = d;
  c->dp = VA_ROUND_UP(d, VA_CUDA_DPAD);
  c->npad = VA_ROUND_UP(n_local > 0 ? n_local : 1, VA_CUDA_ROWPAD);
  c->k_cap = VA_ROUND_UP(k_cap > 0 ? k_cap : 1, VA_CUDA_KPAD);
  c->chunk_rows = chunk_rows > 0 ? chunk_for(n_local, chunk_rows) : 0;
  c->view_rows = c->chunk_rows ? c->chunk_rows : c->npad;
  c->held[0] = c->held[1] = -1;
  c->host_threads = host_threads > 0 ? host_threads : 1;
  VA_CUDA(cudaSetDevice(device));
  VA_CUDA(cudaGetDeviceProperties(&c->prop, device));
  VA_CUDA(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  VA_CUDA(cudaEventCreate(&c->ev0));
  VA_CUDA(cudaEventCreate(&c->ev1));
  size_t n = (size_t)(n_local > 0 ? n_local : 1), view = (size_t)c->view_rows;
  if (c->chunk_rows) {
    /* Zeroed chunks: rows past a short last chunk and the padding columns are read, never used. */
    size_t chunk = view * (size_t)c->dp;
    /* The pinned copy: allocated, its page faults taken on host_threads threads, then registered with
     * CUDA, so that pinning runs on several threads: cudaMallocHost zeroes and pins on one thread, a
     * large part of a big streamed job's start, for the same copy bandwidth after (docs/performance.md). */
    const size_t host_bytes = va_cuda_stream_host_bytes(n_local, d);
    if (posix_memalign((void **)&c->Xh, (size_t)2 << 20, host_bytes))
      VA_FATAL("out of memory allocating %zu bytes for the rows' pinned host copy", host_bytes);
    va_prefault(c->Xh, host_bytes, host_threads);
    VA_CUDA(cudaHostRegister(c->Xh, host_bytes, cudaHostRegisterDefault));
    VA_CUDA(cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking));
    const size_t es = precision >= VA_CUDA_FP16 ? 2 : 4;
    for (int b = 0; b < 2; b++) {
      dalloc(&c->Xc[b], chunk * es, "row chunk");
      VA_CUDA(cudaMemsetAsync(c->Xc[b], 0, chunk * es, c->stream));
      VA_CUDA(cudaEventCreateWithFlags(&c->copied[b], cudaEventDisableTiming));
      VA_CUDA(cudaEventCreateWithFlags(&c->consumed[b], cudaEventDisableTiming));
    }
  } else {
    size_t rows = (size_t)c->npad * (size_t)c->dp;
    if (precision >= VA_CUDA_FP16) {
      dalloc(&c->Xlp, rows * 2, "rows (16-bit)");
      VA_CUDA(cudaMemsetAsync(c->Xlp, 0, rows * 2, c->stream));
    } else {
      dalloc(&c->X32, rows * 4, "rows");
      VA_CUDA(cudaMemsetAsync(c->X32, 0, rows * 4, c->stream));
    }
  }
  dalloc(&c->overflow, sizeof(int), "flag");
  VA_CUDA(cudaMemsetAsync(c->overflow, 0, sizeof(int), c->stream));
  dalloc(&c->assign, n * 4, "assignments");
  VA_CUDA(cudaMemsetAsync(c->assign, 0xFF, n * 4, c->stream));
  dalloc(&c->r, n * 4, "row distances");
  VA_CUDA(cudaMemsetAsync(c->r, 0, n * 4, c->stream));
  dalloc(&c->keys, view * 4, "sort keys");
  dalloc(&c->keys_sorted, view * 4, "sort keys");
  dalloc(&c->iota, view * 4, "sort values");
  dalloc(&c->vals_sorted, view * 4, "sort values");
  iota_kernel<<<grid_for((int64_t)view, 256), 256, 0, c->stream>>>(c->iota, (int64_t)view);
  VA_LAUNCHED();
  dalloc(&c->counter, sizeof(unsigned long long), "counter");
  VA_CUDA(cudaMallocHost((void **)&c->h_counter, 2 * sizeof(unsigned long long)));
  alloc_anchor_arrays(c);
  VA_CUDA(cudaEventCreateWithFlags(&c->anchors_staged, cudaEventDisableTiming));
  VA_CUDA(cudaEventCreateWithFlags(&c->scal_ready, cudaEventDisableTiming));
  VA_CUDA(cudaEventCreateWithFlags(&c->up_done, cudaEventDisableTiming));
  for (int b = 0; b < 2; b++) VA_CUDA(cudaEventCreateWithFlags(&c->staged[b], cudaEventDisableTiming));
  c->fused_cfg = va_cuda_fused_config(c);
  /* Pinned scratch for the largest routine transfer (anchors and momentum back to the host), allocated
   * now: its first use is in the loop (the first reseeding), where cudaMallocHost and cudaFreeHost
   * would stall that iteration. */
  va_cuda_host_scratch(c, (size_t)c->k_cap * ((size_t)c->dp * 4 + (size_t)c->d * 8));
  if (!c->chunk_rows) ensure_fetch_rows(c, c->k_cap);
  return c;
}

extern "C" void va_cuda_destroy(va_cuda_t *c) {
  if (!c) return;
  va_cuda_enter(c);
  VA_CUDA(cudaStreamSynchronize(c->stream));
  free_anchor_arrays(c);
  if (c->chunk_rows) {
    VA_CUDA(cudaStreamSynchronize(c->copy_stream));
    for (int b = 0; b < 2; b++) {
      dfree(&c->Xc[b]);
      VA_CUDA(cudaEventDestroy(c->copied[b]));
      VA_CUDA(cudaEventDestroy(c->consumed[b]));
    }
    VA_CUDA(cudaHostUnregister(c->Xh));
    free(c->Xh);
    VA_CUDA(cudaStreamDestroy(c->copy_stream));
  }
  VA_CUDA(cudaEventDestroy(c->anchors_staged));
  VA_CUDA(cudaEventDestroy(c->scal_ready));
  VA_CUDA(cudaEventDestroy(c->up_done));
  if (c->rows_vmm.base) { /* X32 or Xlp lives there */
    c->X32 = NULL;
    c->Xlp = NULL;
    va_vmm_free(&c->rows_vmm);
  }
  dfree(&c->X32);
  dfree(&c->Xlp);
  dfree(&c->Xup);
  dfree(&c->overflow);
  dfree(&c->assign);
  dfree(&c->r);
  dfree(&c->keys);
  dfree(&c->keys_sorted);
  dfree(&c->iota);
  dfree(&c->vals_sorted);
  dfree(&c->counter);
  dfree(&c->hist);
  dfree(&c->acc);
  dfree(&c->seg_start);
  dfree(&c->seg_end);
  dfree(&c->npieces);
  dfree(&c->pstart);
  dfree(&c->ptable);
  dfree(&c->partial);
  dfree(&c->cub_tmp);
  dfree(&c->slot);
  dfree(&c->cent);
  dfree(&c->d_rows);
  dfree(&c->d_rows_out);
  dfree(&c->tma_merged);
  dfree(&c->tma_tickets);
  for (int b = 0; b < 2; b++) {
    if (c->chunk_rows) free(c->pinned[b]); /* pageable there (make_staging) */
    else if (c->pinned[b]) VA_CUDA(cudaFreeHost(c->pinned[b]));
    VA_CUDA(cudaEventDestroy(c->staged[b]));
  }
  if (c->h_buf) VA_CUDA(cudaFreeHost(c->h_buf));
  VA_CUDA(cudaFreeHost(c->h_counter));
  if (c->blas) VA_CUBLAS(va_blas().cublasDestroy(c->blas));
  VA_CUDA(cudaEventDestroy(c->ev0));
  VA_CUDA(cudaEventDestroy(c->ev1));
  VA_CUDA(cudaStreamDestroy(c->stream));
  free(c);
}

static const char *precision_name(int p) {
  static const char *const names[] = {"fp32", "tf32", "fp16", "bf16"};
  return p >= 0 && p <= 3 ? names[p] : "?";
}

extern "C" void va_cuda_describe(const va_cuda_t *c, char *buf, size_t len) {
  int w = snprintf(buf, len, "%s sm_%d%d, %.0f GiB, %d SMs, %s products", c->prop.name, c->prop.major, c->prop.minor,
                   (double)c->prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), c->prop.multiProcessorCount,
                   precision_name(c->precision));
  if (c->chunk_rows && w > 0 && (size_t)w < len)
    snprintf(buf + w, len - (size_t)w, ", rows streamed from pinned host memory: %.2f GB/rank in %.0f MB chunks",
             (double)va_cuda_stream_host_bytes(c->n, c->d) / 1e9, (double)c->chunk_rows * (double)c->dp * 4 / 1e6);
}

extern "C" int64_t va_cuda_stream_rows(const va_cuda_t *c) { return c->chunk_rows; }
extern "C" double va_cuda_streamed_bytes(const va_cuda_t *c) { return c->copied_bytes; }

extern "C" int va_cuda_assign_variant(const va_cuda_t *c) {
  int v = c->assign_variant;
  if (v == VA_CUDA_ASSIGN_FUSED && (c->precision == VA_CUDA_FP32 || c->fused_cfg == 0))
    VA_FATAL("the fused assign kernel does not apply here (%s products, d %lld)", precision_name(c->precision),
             (long long)c->d);
  if (v == VA_CUDA_ASSIGN_AUTO)
    v = (c->precision != VA_CUDA_FP32 && c->fused_cfg)                          ? VA_CUDA_ASSIGN_FUSED
        : (double)c->n * (double)c->k * (double)c->d <= VA_CUDA_DIRECT_MAX_WORK ? VA_CUDA_ASSIGN_DIRECT
                                                                                : VA_CUDA_ASSIGN_GEMM;
  return v;
}

/* Pinned host scratch; waits for the stream first, so no earlier copy still reads or writes it. */
void *va_cuda_host_scratch(va_cuda_t *c, size_t bytes) {
  VA_CUDA(cudaStreamSynchronize(c->stream));
  if (bytes > c->h_buf_bytes) {
    if (c->h_buf) VA_CUDA(cudaFreeHost(c->h_buf));
    size_t b = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes;
    VA_CUDA(cudaMallocHost(&c->h_buf, b));
    c->h_buf_bytes = b;
  }
  return c->h_buf;
}

/* --- rows ------------------------------------------------------------------------------------------ */
/* The rows in 16 bits: dst[e] = src[e] rounded, for e in [0, count); flags a finite value that fp16 turns
 * into inf. The rows ARE their 16-bit values (precision fp16/bf16 is the rows' storage precision): every
 * kernel reads those (va_cuda_with_rows). (The anchors' 16-bit copy, for the product only, is
 * anchors_derived_kernel's.) */
template <typename T>
__global__ void convert_kernel(const float *__restrict__ src, T *__restrict__ dst, int64_t count, int *overflow) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count; e += (int64_t)gridDim.x * blockDim.x) {
    float x = src[e];
    T h = elem_from_float<T>(x);
    if (isinf((float)h) && isfinite(x)) *overflow = 1;
    dst[e] = h;
  }
}

static void convert_rows(va_cuda_t *c, const float *X32, void *Xlp, int64_t count) {
  if (count <= 0) return;
  if (c->precision == VA_CUDA_FP16)
    convert_kernel<__half><<<grid_for(count, 256), 256, 0, c->stream>>>(X32, (__half *)Xlp, count, c->overflow);
  else
    convert_kernel<__nv_bfloat16>
        <<<grid_for(count, 256), 256, 0, c->stream>>>(X32, (__nv_bfloat16 *)Xlp, count, c->overflow);
  VA_LAUNCHED();
}

/* The two pinned staging buffers, made at the first upload. Pinning costs time per byte, a visible part
 * of a small job's start (docs/performance.md): a small shard gets buffers of half its size. Resident
 * 16-bit rows that need no preprocessing go up through one buffer's rows in float32 on the device (Xup),
 * converted from there (the whole shard never sits there in float32). A streamed context's rows only go
 * from host to host on their way into its pinned copy: straight there when its rows need no padding
 * (va_cuda_upload_buffer), else through one pageable buffer, never pinned. */
static void make_staging(va_cuda_t *c) {
  if (c->pinned_bytes) return;
  const size_t rowb = (size_t)c->d * 4, half = (size_t)((c->n + 1) / 2) * rowb;
  c->pinned_bytes = half < PIN_BYTES ? (half > rowb ? half : rowb) : PIN_BYTES;
  if (!c->chunk_rows)
    for (int b = 0; b < 2; b++) VA_CUDA(cudaMallocHost((void **)&c->pinned[b], c->pinned_bytes));
  else if (c->dp != c->d) c->pinned[0] = (float *)va_malloc(c->pinned_bytes, "row staging buffer");
}

extern "C" int64_t va_cuda_upload_buffer_rows(va_cuda_t *c) {
  va_cuda_enter(c);
  make_staging(c);
  return (int64_t)(c->pinned_bytes / ((size_t)c->d * 4));
}

extern "C" float *va_cuda_upload_buffer(va_cuda_t *c, int64_t row0) {
  if (row0 < 0 || row0 >= c->n)
    VA_FATAL("va_cuda_upload_buffer: row %lld of %lld local rows", (long long)row0, (long long)c->n);
  va_cuda_enter(c);
  make_staging(c);
  if (c->chunk_rows) {
    int64_t ld;
    float *Xh = va_cuda_stream_host_rows(c, &ld);
    return c->pinned[0] ? c->pinned[0] : Xh + row0 * ld;
  }
  VA_CUDA(cudaEventSynchronize(c->staged[c->pin_next])); /* the last transfer out of this buffer is done */
  return c->pinned[c->pin_next];
}

/* A streamed context's pinned host copy, to be written: no copy may read it meanwhile, and the chunk
 * buffers no longer hold what it says. */
extern "C" float *va_cuda_stream_host_rows(va_cuda_t *c, int64_t *ld) {
  if (!c->chunk_rows) VA_FATAL("va_cuda_stream_host_rows: the context's rows live on the device");
  if (c->host16)
    VA_FATAL("va_cuda_stream_host_rows: the pinned copy's rows are in 16 bits since the rows were finished");
  va_cuda_enter(c);
  VA_CUDA(cudaStreamSynchronize(c->copy_stream));
  c->held[0] = c->held[1] = -1;
  *ld = c->dp;
  return c->Xh;
}

/* Rows [row0, row0 + nrows) into a streamed context's pinned host copy, padded as the device rows are. */
static void host_copy_rows(va_cuda_t *c, const float *rows, int64_t row0, int64_t nrows) {
  int64_t ld;
  float *Xh = va_cuda_stream_host_rows(c, &ld);
  va_copy_rows_padded(Xh + row0 * ld, ld, rows, c->d, nrows, c->host_threads);
}

extern "C" void va_cuda_upload_buffered(va_cuda_t *c, int64_t row0, int64_t nrows) {
  if (nrows <= 0) return;
  if (row0 < 0 || row0 + nrows > c->n || nrows * c->d * 4 > (int64_t)c->pinned_bytes)
    VA_FATAL("va_cuda_upload_buffered: rows [%lld, %lld) of %lld local rows, %zu-byte buffer", (long long)row0,
             (long long)(row0 + nrows), (long long)c->n, c->pinned_bytes);
  va_cuda_enter(c);
  if (c->chunk_rows) {
    if (c->pinned[0]) host_copy_rows(c, c->pinned[0], row0, nrows); /* padded rows; else read in place */
    return;
  }
  const size_t rowb = (size_t)c->d * 4;
  const int b = c->pin_next;
  c->pin_next ^= 1;
  /* float32 rows: into place; 16-bit: into X32 while preprocessed on the device, else via Xup (the
   * stream orders its reuse) */
  const int via_up = elem_lp(c->precision) && !c->defer_convert;
  if (via_up && !c->Xup) { /* until va_cuda_finish_rows */
    const size_t up = c->pinned_bytes / rowb * (size_t)c->dp * 4;
    dalloc(&c->Xup, up, "row staging (float32)");
    VA_CUDA(cudaMemsetAsync(c->Xup, 0, up, c->stream)); /* padding columns: never written by the copies */
  }
  float *dst = via_up ? c->Xup : c->X32 + row0 * c->dp;
  VA_CUDA(cudaMemcpy2DAsync(dst, (size_t)c->dp * 4, c->pinned[b], rowb, rowb, (size_t)nrows, cudaMemcpyHostToDevice,
                            c->stream));
  VA_CUDA(cudaEventRecord(c->staged[b], c->stream));
  if (via_up) convert_rows(c, dst, (char *)c->Xlp + (size_t)row0 * (size_t)c->dp * 2, nrows * c->dp);
}

extern "C" void va_cuda_upload_rows(va_cuda_t *c, const float *rows, int64_t row0, int64_t nrows) {
  if (nrows <= 0) return;
  if (row0 < 0 || row0 + nrows > c->n)
    VA_FATAL("va_cuda_upload_rows: rows [%lld, %lld) outside the %lld local rows", (long long)row0,
             (long long)(row0 + nrows), (long long)c->n);
  va_cuda_enter(c);
  if (c->chunk_rows) {
    host_copy_rows(c, rows, row0, nrows);
    return;
  }
  const int64_t per = va_cuda_upload_buffer_rows(c);
  if (per < 1)
    VA_FATAL("a row of %lld floats does not fit the %zu-byte staging buffer", (long long)c->d, c->pinned_bytes);
  for (int64_t off = 0; off < nrows; off += per) {
    const int64_t nr = nrows - off < per ? nrows - off : per;
    /* on the rank's threads: one thread's copy is a large part of a big upload (docs/performance.md) */
    va_copy_rows_padded(va_cuda_upload_buffer(c, row0 + off), c->d, rows + off * c->d, c->d, nr, c->host_threads);
    va_cuda_upload_buffered(c, row0 + off, nr);
  }
}

/* Rows to be preprocessed on the device: 16-bit rows are held in float32 (X32) until va_cuda_finish_rows
 * converts them in place (rows_vmm: the float32 rows take the 16-bit ones' place, and half of them is
 * given back after; va_cuda_prep_bytes: the memory that takes beyond the loop's). Streamed rows are
 * preprocessed in their pinned host copy. */
extern "C" void va_cuda_defer_conversion(va_cuda_t *c) {
  if (c->chunk_rows || c->defer_convert) return;
  va_cuda_enter(c);
  if (elem_lp(c->precision)) {
    const size_t bytes = (size_t)c->npad * (size_t)c->dp * 4;
    dfree(&c->Xlp); /* untouched yet; cudaFree waits for the creation's memset */
    va_vmm_alloc(&c->rows_vmm, c->device, bytes / 2, bytes / 2, "rows (float32, until converted)");
    c->X32 = (float *)c->rows_vmm.base;
    VA_CUDA(cudaMemsetAsync(c->X32, 0, bytes, c->stream));
  }
  c->defer_convert = 1;
}

/* X32's npad rows to 16 bits in the first half of the same memory (rows_vmm's head), in row order. Rows
 * [a, b) go from bytes [4 a dp, 4 b dp) to [2 a dp, 2 b dp), apart when b <= 2 a: so the first rows go
 * through a small buffer and the others in ranges that double, [a, 2 a), each launch after the one that
 * read what it overwrites (one stream). Then the second half (the tail) is given back. */
static void convert_rows_in_place(va_cuda_t *c) {
  const int64_t n = c->npad, dp = c->dp;
  int64_t first = (int64_t)(((size_t)4 << 20) / ((size_t)dp * 2));
  if (first > n) first = n;
  if (first < 1) first = 1;
  void *head = NULL;
  dalloc(&head, (size_t)first * (size_t)dp * 2, "rows (16-bit, first rows)");
  char *lp = (char *)c->X32;
  convert_rows(c, c->X32, head, first * dp);
  for (int64_t a = first; a < n; a *= 2) {
    const int64_t b = 2 * a < n ? 2 * a : n;
    convert_rows(c, c->X32 + a * dp, lp + (size_t)a * (size_t)dp * 2, (b - a) * dp);
  }
  VA_CUDA(cudaMemcpyAsync(lp, head, (size_t)first * (size_t)dp * 2, cudaMemcpyDeviceToDevice, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  dfree(&head);
  va_vmm_release_tail(&c->rows_vmm);
  c->Xlp = lp;
  c->X32 = NULL;
}

static void stream_rows_to_16(va_cuda_t *c);

extern "C" void va_cuda_finish_rows(va_cuda_t *c) {
  va_cuda_enter(c);
  stream_rows_to_16(c);
  if (c->defer_convert && elem_lp(c->precision)) convert_rows_in_place(c);
  c->defer_convert = 0;
  dfree(&c->Xup);
}

/* --- rows from device memory (compress --embed: the embedder's vectors never leave the GPU) ------------ */
extern "C" void va_cuda_adopt_rows(va_cuda_t *c, const float *drows) {
  if (c->chunk_rows) VA_FATAL("va_cuda_adopt_rows: the context streams its rows from the host");
  va_cuda_defer_conversion(c);
  va_cuda_enter(c);
  if (c->n > 0)
    VA_CUDA(cudaMemcpy2DAsync(c->X32, (size_t)c->dp * 4, drows, (size_t)c->d * 4, (size_t)c->d * 4, (size_t)c->n,
                              cudaMemcpyDeviceToDevice, c->stream));
}

/* As compress.c's host preprocessing for cosine, to the bit: one thread per row sums the squares in
 * double in column order and divides in double (IEEE on both sides). */
__global__ void unit_rows_kernel(float *X, int64_t n, int64_t dp, int d, unsigned long long *zero_rows) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float *x = X + i * dp;
    double s = 0;
    for (int t = 0; t < d; t++) s += (double)x[t] * x[t];
    if (s > 0) {
      const double r = sqrt(s);
      for (int t = 0; t < d; t++) x[t] = (float)(x[t] / r);
    } else {
      atomicAdd(zero_rows, 1ull);
    }
  }
}

extern "C" int64_t va_cuda_unit_rows(va_cuda_t *c) {
  if (!c->defer_convert)
    VA_FATAL("va_cuda_unit_rows: the rows were converted on upload (va_cuda_defer_conversion first)");
  va_cuda_enter(c);
  unsigned long long *h = (unsigned long long *)va_cuda_host_scratch(c, 8);
  VA_CUDA(cudaMemsetAsync(c->counter, 0, 8, c->stream));
  if (c->n > 0) {
    unit_rows_kernel<<<grid_for(c->n, 128), 128, 0, c->stream>>>(c->X32, c->n, c->dp, (int)c->d, c->counter);
    VA_LAUNCHED();
  }
  VA_CUDA(cudaMemcpyAsync(h, c->counter, 8, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  return (int64_t)h[0];
}

/* compress.c's column_sums for one block of rows per (block, column): the rows of block b in order, one
 * running double sum per column (and of squares); with center, each value is first replaced by
 * (float)(x - center[t]) in place. The same operations in the same order as the host's loop, so the
 * same bits ((double)x * x is exact, so a fused multiply-add changes nothing). */
__global__ void block_column_sums_kernel(float *X, int64_t n, int64_t dp, int d, int64_t block, const double *center,
                                         int squares, double *part) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t b = blockIdx.y;
  if (t >= d) return;
  const int64_t end = (b + 1) * block < n ? (b + 1) * block : n;
  const double ct = center ? center[t] : 0.0;
  double s = 0, s2 = 0;
  for (int64_t i = b * block; i < end; i++) {
    float *x = X + i * dp + t;
    float v = *x;
    if (center) {
      v = (float)((double)v - ct);
      *x = v;
    }
    s += v;
    if (squares) s2 += (double)v * v;
  }
  const int64_t w = squares ? 2 * (int64_t)d : d;
  part[b * w + t] = s;
  if (squares) part[b * w + d + t] = s2;
}

extern "C" void va_cuda_block_column_sums(va_cuda_t *c, int64_t block, const double *center_host, int squares,
                                          double *part_host) {
  if (!c->defer_convert)
    VA_FATAL("va_cuda_block_column_sums: the rows were converted on upload (va_cuda_defer_conversion first)");
  va_cuda_enter(c);
  const int d = (int)c->d;
  const int64_t nblocks = (c->n + block - 1) / block, w = squares ? 2 * (int64_t)d : d;
  if (nblocks <= 0) return;
  if (nblocks > 65535) VA_FATAL("va_cuda_block_column_sums: %lld blocks", (long long)nblocks);
  double *part = NULL, *center = NULL;
  dalloc(&part, (size_t)(nblocks * w) * 8, "column sums");
  if (center_host) {
    dalloc(&center, (size_t)d * 8, "centre");
    VA_CUDA(cudaMemcpyAsync(center, center_host, (size_t)d * 8, cudaMemcpyHostToDevice, c->stream));
  }
  block_column_sums_kernel<<<dim3((unsigned)((d + 127) / 128), (unsigned)nblocks), 128, 0, c->stream>>>(
      c->X32, c->n, c->dp, d, block, center, squares, part);
  VA_LAUNCHED();
  VA_CUDA(cudaMemcpyAsync(part_host, part, (size_t)(nblocks * w) * 8, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  dfree(&part);
  dfree(&center);
}

extern "C" void va_cuda_free_device(void *dptr) {
  if (dptr) VA_CUDA(cudaFree(dptr));
}

extern "C" void va_cuda_copy_to_host(void *host, const void *dptr, size_t bytes) {
  if (bytes) VA_CUDA(cudaMemcpy(host, dptr, bytes, cudaMemcpyDeviceToHost));
}

/* --- out-of-core chunks ----------------------------------------------------------------------------- */
/* Queues the copy of chunk q into buffer q & 1 on the copy stream, after the last work on that buffer,
 * unless the buffer already holds it (the two chunks of a small shard stay put; each pass starts with
 * chunks 0 and 1, fetched at the end of the previous one). */
static void fetch_chunk(va_cuda_t *c, int64_t q) {
  const int b = (int)(q & 1);
  if (c->held[b] == q) return;
  int64_t row0 = q * c->chunk_rows, nr = c->n - row0 < c->chunk_rows ? c->n - row0 : c->chunk_rows;
  const size_t es = c->host16 ? 2 : 4, bytes = (size_t)nr * (size_t)c->dp * es;
  VA_CUDA(cudaStreamWaitEvent(c->copy_stream, c->consumed[b], 0));
  VA_CUDA(cudaMemcpyAsync(c->Xc[b], (const char *)c->Xh + (size_t)row0 * (size_t)c->dp * es, bytes,
                          cudaMemcpyHostToDevice, c->copy_stream));
  VA_CUDA(cudaEventRecord(c->copied[b], c->copy_stream));
  c->held[b] = q;
  c->copied_bytes += (double)bytes;
}

/* Streamed fp16/bf16: the pinned copy's float32 rows (preprocessed) become the 16-bit rows, in place,
 * once: chunk by chunk up to the device, converted there (convert_rows: the resident rows' rounding and
 * fp16 range check), and back down into the copy's first half. In order on one stream, chunk q's 16-bit
 * rows land on float32 rows below (q + 1) chunk_rows / 2, all of them already sent up. From then on
 * every pass copies half the bytes and converts nothing. Run by va_cuda_finish_rows, or by the first
 * pass or fetch of rows when the caller made none (tests). */
static void stream_rows_to_16(va_cuda_t *c) {
  if (!c->chunk_rows || c->precision < VA_CUDA_FP16 || c->host16) return;
  VA_CUDA(cudaStreamSynchronize(c->copy_stream));
  float *up = NULL;
  dalloc(&up, (size_t)c->chunk_rows * (size_t)c->dp * 4, "row chunk (float32, for the conversion)");
  for (int64_t row0 = 0; row0 < c->n; row0 += c->chunk_rows) {
    const int64_t nr = c->n - row0 < c->chunk_rows ? c->n - row0 : c->chunk_rows;
    const size_t e = (size_t)nr * (size_t)c->dp;
    VA_CUDA(cudaMemcpyAsync(up, c->Xh + row0 * c->dp, e * 4, cudaMemcpyHostToDevice, c->stream));
    convert_rows(c, up, c->Xc[0], (int64_t)e);
    VA_CUDA(cudaMemcpyAsync((char *)c->Xh + (size_t)row0 * (size_t)c->dp * 2, c->Xc[0], e * 2, cudaMemcpyDeviceToHost,
                            c->stream));
  }
  VA_CUDA(cudaStreamSynchronize(c->stream));
  dfree(&up);
  c->held[0] = c->held[1] = -1;
  c->host16 = 1;
}

/* Streamed: while chunk q is worked on (main stream), chunk q + 1 is copied in (copy stream); the main
 * stream waits for `copied`, the copy stream for `consumed`. The chunks come in the same order in every
 * pass, so reductions over them are reproducible. */
void va_cuda_each_rows(va_cuda_t *c, va_cuda_rows_fn fn, void *arg) {
  if (c->defer_convert) VA_FATAL("a pass over the rows before va_cuda_finish_rows");
  if (!c->chunk_rows) {
    const va_cuda_rows_t v = va_cuda_resident_rows(c);
    fn(c, &v, arg);
    return;
  }
  stream_rows_to_16(c);
  const int64_t nq = (c->n + c->chunk_rows - 1) / c->chunk_rows;
  for (int64_t q = 0; q < nq; q++) {
    const int b = (int)(q & 1);
    fetch_chunk(c, q);
    if (q + 1 < nq) fetch_chunk(c, q + 1);
    VA_CUDA(cudaStreamWaitEvent(c->stream, c->copied[b], 0));
    int64_t row0 = q * c->chunk_rows, nr = c->n - row0 < c->chunk_rows ? c->n - row0 : c->chunk_rows;
    va_cuda_rows_t v = {c->host16 ? NULL : (const float *)c->Xc[b], c->host16 ? c->Xc[b] : NULL, row0, nr};
    fn(c, &v, arg);
    VA_CUDA(cudaEventRecord(c->consumed[b], c->stream));
  }
  for (int64_t q = 0; q < 2 && q < nq; q++) fetch_chunk(c, q);
}

/* --- anchors --------------------------------------------------------------------------------------- */
/* Everything derived from the anchors A32, in one pass over them: the half biases (the argmax of
 * x.a - ||a||^2 / 2 (l2) or of x.a (cosine) is the nearest anchor; anchors past k get +inf so they never
 * win), the norm the caller's or va_row_norms's (double products and sums in order, no fused
 * multiply-add, rounded to float), and the 16-bit copy for the product (T = float: none) of the first
 * k_lp rows, a finite value that fp16 turns into inf flagged as convert_kernel does.
 * A thread per anchor: its sum is one chain in order whatever the layout, so the loads go ahead of it,
 * 16 x 16 bytes at a time (one float per step is slower, and a separate 16-bit conversion costs its own
 * pass and launch; docs/performance.md). The padding columns hold zeros: s + 0 is s. */
template <typename T>
__global__ void anchors_derived_kernel(const float *__restrict__ A32, int64_t dp, int64_t k, int64_t k_lp,
                                       int64_t k_cap, const float *__restrict__ given, float *b_l2, float *b_cos,
                                       T *__restrict__ Alp, int *overflow) {
  constexpr bool LP = !std::is_same<T, float>::value;
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < k_cap; j += (int64_t)gridDim.x * blockDim.x) {
    const bool norm = j < k && !given, conv = LP && j < k_lp;
    double s = 0;
    if (norm || conv) {
      const float4 *row = (const float4 *)(A32 + j * dp);
      const int64_t nq = dp / 4; /* dp: a multiple of 32 */
      for (int64_t q0 = 0; q0 < nq; q0 += 16) {
        /* 16 loads issued before anything uses them: with the stores in the same loop the compiler keeps
         * one load in flight, and the thread waits for memory on every step (docs/performance.md) */
        float4 v[16];
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = q0 + i < nq ? row[q0 + i] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int i = 0; i < 16; i++) {
          const float e[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
          if (norm)
#pragma unroll
            for (int m = 0; m < 4; m++) s = __dadd_rn(s, __dmul_rn((double)e[m], (double)e[m]));
          if constexpr (LP) {
            if (conv && q0 + i < nq) {
              T h[4];
#pragma unroll
              for (int m = 0; m < 4; m++) {
                h[m] = elem_from_float<T>(e[m]);
                if (isinf((float)h[m]) && isfinite(e[m])) *overflow = 1;
              }
              *(uint2 *)(Alp + j * dp + 4 * (q0 + i)) = *(const uint2 *)h;
            }
          }
        }
      }
    }
    if (j >= k) b_l2[j] = b_cos[j] = INFINITY;
    else {
      b_l2[j] = 0.5f * (given ? given[j] : (float)s); /* exact: a power of two */
      b_cos[j] = 0.0f;
    }
  }
}

/* A32 changed: the arrays derived from it, queued (the half biases from the norms given on the device,
 * or computed; the 16-bit copy for the product). Every change of the anchors ends here. */
static void anchors_changed(va_cuda_t *c, const float *norms_dev) {
  const int64_t k_lp = VA_ROUND_UP(c->k, VA_CUDA_KPAD);
  const unsigned blocks = (unsigned)((c->k_cap + 31) / 32); /* a warp per SM: the chains run side by side */
  if (c->precision == VA_CUDA_FP16)
    anchors_derived_kernel<__half><<<blocks, 32, 0, c->stream>>>(
        c->A32, c->dp, c->k, k_lp, c->k_cap, norms_dev, c->bias_l2, c->bias_cos, (__half *)c->Alp, c->overflow);
  else if (c->precision == VA_CUDA_BF16)
    anchors_derived_kernel<__nv_bfloat16><<<blocks, 32, 0, c->stream>>>(
        c->A32, c->dp, c->k, k_lp, c->k_cap, norms_dev, c->bias_l2, c->bias_cos, (__nv_bfloat16 *)c->Alp, c->overflow);
  else
    anchors_derived_kernel<float><<<blocks, 32, 0, c->stream>>>(c->A32, c->dp, c->k, k_lp, c->k_cap, norms_dev,
                                                                c->bias_l2, c->bias_cos, NULL, c->overflow);
  VA_LAUNCHED();
}

/* The anchors go up from a pinned staging buffer without waiting for the device: only for the previous
 * upload out of that buffer, long done by then. */
extern "C" void va_cuda_set_anchors(va_cuda_t *c, const float *A, const float *anorm, int64_t k) {
  if (k <= 0) VA_FATAL("va_cuda_set_anchors: k = %lld", (long long)k);
  va_cuda_enter(c);
  if (k > c->k_cap) {
    VA_CUDA(cudaStreamSynchronize(c->stream));
    free_anchor_arrays(c);
    int64_t cap = 2 * c->k_cap;
    c->k_cap = VA_ROUND_UP(k > cap ? k : cap, VA_CUDA_KPAD);
    alloc_anchor_arrays(c);
  }
  c->k = k;
  VA_CUDA(cudaEventSynchronize(c->anchors_staged));
  float *h = c->h_anchors, *hn = c->h_anchors + c->k_cap * c->dp;
  if (c->dp == c->d) memcpy(h, A, (size_t)(k * c->d) * 4);
  else
    for (int64_t j = 0; j < k; j++) {
      memcpy(h + j * c->dp, A + j * c->d, (size_t)c->d * 4);
      memset(h + j * c->dp + c->d, 0, (size_t)(c->dp - c->d) * 4);
    }
  VA_CUDA(cudaMemcpyAsync(c->A32, h, (size_t)(k * c->dp) * 4, cudaMemcpyHostToDevice, c->stream));
  if (anorm) {
    memcpy(hn, anorm, (size_t)k * 4);
    VA_CUDA(cudaMemcpyAsync(c->norms_in, hn, (size_t)k * 4, cudaMemcpyHostToDevice, c->stream));
  }
  VA_CUDA(cudaEventRecord(c->anchors_staged, c->stream));
  anchors_changed(c, anorm ? c->norms_in : NULL);
}

/* Rows idx[q] of the anchors <- stage row q (padding included), their momentum <- 0. */
__global__ void replace_rows_kernel(float *__restrict__ A32, double *__restrict__ vel, int64_t dp, int d,
                                    const float *__restrict__ stage, const uint32_t *__restrict__ idx, int64_t m) {
  for (int64_t q = blockIdx.x; q < m; q += gridDim.x) {
    const int64_t j = idx[q];
    for (int t = threadIdx.x; t < dp; t += blockDim.x) A32[j * dp + t] = stage[q * dp + t];
    for (int t = threadIdx.x; t < d; t += blockDim.x) vel[j * d + t] = 0.0;
  }
}

/* Reseeding edits a few anchors of a set the device owns: only those rows travel (not the whole set
 * down and back up, 1.5 MB each way at k 1024, d 128, with two waits), then every norm and the
 * 16-bit copy are recomputed as va_cuda_set_anchors does (a few microseconds at that size). */
extern "C" void va_cuda_replace_anchor_rows(va_cuda_t *c, const int64_t *idx, int64_t m, const float *A) {
  if (m <= 0) return;
  if (m > c->k)
    VA_FATAL("va_cuda_replace_anchor_rows: %lld rows, the context has %lld anchors", (long long)m, (long long)c->k);
  va_cuda_enter(c);
  VA_CUDA(cudaEventSynchronize(c->anchors_staged));
  float *h = c->h_anchors;
  uint32_t *hi = (uint32_t *)(c->h_anchors + c->k_cap * c->dp);
  for (int64_t q = 0; q < m; q++) {
    if (idx[q] < 0 || idx[q] >= c->k)
      VA_FATAL("va_cuda_replace_anchor_rows: anchor %lld outside [0, %lld)", (long long)idx[q], (long long)c->k);
    hi[q] = (uint32_t)idx[q];
    memcpy(h + q * c->dp, A + idx[q] * c->d, (size_t)c->d * 4);
    memset(h + q * c->dp + c->d, 0, (size_t)(c->dp - c->d) * 4);
  }
  VA_CUDA(cudaMemcpyAsync(c->A_stage, h, (size_t)(m * c->dp) * 4, cudaMemcpyHostToDevice, c->stream));
  uint32_t *d_idx = (uint32_t *)(c->A_stage + c->k_cap * c->dp);
  VA_CUDA(cudaMemcpyAsync(d_idx, hi, (size_t)m * 4, cudaMemcpyHostToDevice, c->stream));
  VA_CUDA(cudaEventRecord(c->anchors_staged, c->stream));
  replace_rows_kernel<<<(unsigned)(m < 1024 ? m : 1024), 128, 0, c->stream>>>(c->A32, c->vel, c->dp, (int)c->d,
                                                                              c->A_stage, d_idx, m);
  VA_LAUNCHED();
  anchors_changed(c, NULL);
}

/* s2.3 for anchor j = blockIdx.x, as va_update_anchor and then va_unit_normalise (cosine) compute it on
 * the host: the same double operations in the same order, each rounded on its own (the _rn intrinsics
 * keep the compiler from fusing multiply-adds), so the anchors are the host's bit for bit. Anchors
 * without members or weight keep their place and momentum. */
__global__ void update_kernel(float *__restrict__ A32, double *__restrict__ vel, const double *__restrict__ acc,
                              int64_t dp, int d, double eta, double beta, double max_step, int cosine) {
  const int64_t j = blockIdx.x, W = d + 3;
  const double *sum = acc + j * W;
  const double w = sum[d], cnt = sum[d + 1];
  if (!(cnt > 0 && w > 0)) return;
  float *a = A32 + j * dp;
  double *v = vel + j * d;
  for (int q = threadIdx.x; q < d; q += blockDim.x) {
    double step = __dmul_rn(eta, __dsub_rn(__ddiv_rn(sum[q], w), (double)a[q]));
    if (max_step > 0) step = step > max_step ? max_step : step < -max_step ? -max_step : step;
    const double nv = __dadd_rn(__dmul_rn(beta, v[q]), __dmul_rn(__dsub_rn(1.0, beta), step));
    v[q] = nv;
    a[q] = (float)__dadd_rn((double)a[q], nv);
  }
  if (!cosine) return;
  __shared__ double inv;
  __syncthreads();
  if (threadIdx.x == 0) { /* the norm in order, as the host sums it */
    double s = 0;
    for (int t = 0; t < d; t++) s = __dadd_rn(s, __dmul_rn((double)a[t], (double)a[t]));
    inv = s > 0 ? __ddiv_rn(1.0, __dsqrt_rn(s)) : 0.0;
  }
  __syncthreads();
  if (inv > 0)
    for (int q = threadIdx.x; q < d; q += blockDim.x) a[q] = (float)__dmul_rn((double)a[q], inv);
}

extern "C" void va_cuda_update_anchors(va_cuda_t *c, double eta, double beta, double max_step, int cosine) {
  if (c->k <= 0) return;
  va_cuda_enter(c);
  update_kernel<<<(unsigned)c->k, 128, 0, c->stream>>>(c->A32, c->vel, c->acc, c->dp, (int)c->d, eta, beta, max_step,
                                                       cosine);
  VA_LAUNCHED();
  anchors_changed(c, NULL);
}

extern "C" void va_cuda_set_velocity(va_cuda_t *c, const double *vel, int64_t k) {
  if (k != c->k) VA_FATAL("va_cuda_set_velocity: %lld anchors, the context has %lld", (long long)k, (long long)c->k);
  if (k <= 0) return;
  va_cuda_enter(c);
  double *h = (double *)va_cuda_host_scratch(c, (size_t)(k * c->d) * 8);
  memcpy(h, vel, (size_t)(k * c->d) * 8);
  VA_CUDA(cudaMemcpyAsync(c->vel, h, (size_t)(k * c->d) * 8, cudaMemcpyHostToDevice, c->stream));
}

extern "C" void va_cuda_get_anchors(va_cuda_t *c, float *A, double *vel) {
  const int64_t k = c->k, d = c->d, dp = c->dp;
  if (k <= 0) return;
  va_cuda_enter(c);
  char *h = (char *)va_cuda_host_scratch(c, (size_t)(k * dp) * 4 + (size_t)(k * d) * 8);
  float *ha = (float *)h;
  double *hv = (double *)(h + (size_t)(k * dp) * 4);
  VA_CUDA(cudaMemcpyAsync(ha, c->A32, (size_t)(k * dp) * 4, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaMemcpyAsync(hv, c->vel, (size_t)(k * d) * 8, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  if (A)
    for (int64_t j = 0; j < k; j++) memcpy(A + j * d, ha + j * dp, (size_t)d * 4);
  if (vel) memcpy(vel, hv, (size_t)(k * d) * 8);
}

/* --- downloads, fetches, remaps --------------------------------------------------------------------- */
extern "C" void va_cuda_download(va_cuda_t *c, uint32_t *assign_host, float *r_host) {
  if (c->n <= 0) return;
  va_cuda_enter(c);
  if (r_host) va_cuda_ensure_r(c);
  if (assign_host)
    VA_CUDA(cudaMemcpyAsync(assign_host, c->assign, (size_t)c->n * 4, cudaMemcpyDeviceToHost, c->stream));
  if (r_host) VA_CUDA(cudaMemcpyAsync(r_host, c->r, (size_t)c->n * 4, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
}

/* va_cuda_set_assign: cuda_set_assign.cu */

template <typename T>
__global__ void gather_kernel(const T *__restrict__ X, int64_t dp, int64_t d, const int64_t *__restrict__ rows,
                              int64_t m, float *__restrict__ out) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < m * d; e += (int64_t)gridDim.x * blockDim.x) {
    int64_t q = e / d, t = e % d;
    out[e] = elem_to_float(X[rows[q] * dp + t]);
  }
}

/* Room for m fetched rows; cudaFree waits for the whole device, so the loop's sizes (up to k rows:
 * reseeding, splits) are allocated with the context. */
static void ensure_fetch_rows(va_cuda_t *c, int64_t m) {
  if (m <= c->rows_cap) return;
  dfree(&c->d_rows);
  dfree(&c->d_rows_out);
  c->rows_cap = m;
  dalloc(&c->d_rows, (size_t)m * 8, "row indices");
  dalloc(&c->d_rows_out, (size_t)(m * c->d) * 4, "fetched rows");
}

extern "C" void va_cuda_get_rows(va_cuda_t *c, const int64_t *local_rows, int64_t m, float *out) {
  if (m <= 0) return;
  for (int64_t q = 0; q < m; q++)
    if (local_rows[q] < 0 || local_rows[q] >= c->n)
      VA_FATAL("va_cuda_get_rows: local row %lld outside [0, %lld)", (long long)local_rows[q], (long long)c->n);
  if (c->chunk_rows) { /* the rows are on the host, as stored */
    va_cuda_enter(c);
    stream_rows_to_16(c);
    for (int64_t q = 0; q < m; q++) {
      const int64_t at = local_rows[q] * c->dp;
      float *o = out + q * c->d;
      if (c->precision == VA_CUDA_FP16)
        for (int64_t t = 0; t < c->d; t++) o[t] = __half2float(((const __half *)c->Xh)[at + t]);
      else if (c->precision == VA_CUDA_BF16)
        for (int64_t t = 0; t < c->d; t++) o[t] = __bfloat162float(((const __nv_bfloat16 *)c->Xh)[at + t]);
      else memcpy(o, c->Xh + at, (size_t)c->d * 4);
    }
    return;
  }
  va_cuda_enter(c);
  ensure_fetch_rows(c, m);
  VA_CUDA(cudaMemcpyAsync(c->d_rows, local_rows, (size_t)m * 8, cudaMemcpyHostToDevice, c->stream));
  if (c->defer_convert) VA_FATAL("va_cuda_get_rows before va_cuda_finish_rows");
  const va_cuda_rows_t v = va_cuda_resident_rows(c);
  va_cuda_with_rows(c, &v, [&](auto X) {
    gather_kernel<<<grid_for(m * c->d, 256), 256, 0, c->stream>>>(X, c->dp, c->d, c->d_rows, m, c->d_rows_out);
  });
  VA_LAUNCHED();
  /* Up to the pinned scratch's size (k rows and more, from the context's creation) through it: a copy
   * straight into pageable memory, which the driver stages page by page, took milliseconds for a few hundred
   * rows of d 3072. Larger fetches (codes, search) go straight, not growing the pinned buffer. */
  const size_t bytes = (size_t)(m * c->d) * 4;
  float *h = bytes <= c->h_buf_bytes ? (float *)c->h_buf : out;
  VA_CUDA(cudaMemcpyAsync(h, c->d_rows_out, bytes, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  if (h != out) memcpy(out, h, bytes);
}

__global__ void remap_kernel(uint32_t *a, int64_t n, const uint32_t *__restrict__ map, int64_t k_old) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t j = a[i];
    if (j < (uint64_t)k_old) a[i] = map[j];
  }
}

extern "C" void va_cuda_remap_assign(va_cuda_t *c, const int64_t *newidx, int64_t k_old) {
  if (c->n <= 0 || k_old <= 0) return;
  va_cuda_enter(c);
  va_cuda_ensure_segments(c, k_old); /* seg_start doubles as the map's device buffer */
  uint32_t *h = (uint32_t *)va_cuda_host_scratch(c, (size_t)k_old * 4);
  for (int64_t j = 0; j < k_old; j++) h[j] = (uint32_t)newidx[j];
  VA_CUDA(cudaMemcpyAsync(c->seg_start, h, (size_t)k_old * 4, cudaMemcpyHostToDevice, c->stream));
  remap_kernel<<<grid_for(c->n, 256), 256, 0, c->stream>>>(c->assign, c->n, (const uint32_t *)c->seg_start, k_old);
  VA_LAUNCHED();
  VA_CUDA(cudaStreamSynchronize(c->stream));
}

/* --- segmented-reduction buffers (cuda_stats.cu) --------------------------------------------------- */
void va_cuda_cub_scratch(va_cuda_t *c, size_t need) {
  if (need <= c->cub_tmp_bytes) return;
  VA_CUDA(cudaStreamSynchronize(c->stream));
  VA_CUDA(cudaFree(c->cub_tmp));
  VA_CUDA(cudaMalloc(&c->cub_tmp, need));
  c->cub_tmp_bytes = need;
}
void va_cuda_ensure_segments(va_cuda_t *c, int64_t nseg) {
  if (nseg + 1 <= c->seg_cap && c->cub_tmp) return;
  VA_CUDA(cudaStreamSynchronize(c->stream));
  int64_t cap = nseg + 1;
  if (cap < c->k_cap + 1) cap = c->k_cap + 1;
  dfree(&c->seg_start);
  dfree(&c->seg_end);
  dfree(&c->npieces);
  dfree(&c->pstart);
  dfree(&c->acc);
  dfree(&c->ptable);
  dfree(&c->partial);
  dfree(&c->cub_tmp);
  size_t W = (size_t)VA_STATS_W(c->d);
  dalloc(&c->seg_start, (size_t)cap * 4, "segments");
  dalloc(&c->seg_end, (size_t)cap * 4, "segments");
  dalloc(&c->npieces, (size_t)cap * 4, "segments");
  dalloc(&c->pstart, (size_t)cap * 4, "segments");
  dalloc(&c->acc, (size_t)cap * W * 8, "statistics");
  /* pieces of one view: at most ceil(rows / P) + nseg, P >= 256 */
  c->partial_cap = c->view_rows / 256 + cap + 1;
  dalloc(&c->ptable, (size_t)c->partial_cap * 4, "piece table");
  dalloc(&c->partial, (size_t)c->partial_cap * W * 8, "partial sums");
  size_t b1 = 0, b2 = 0;
  int items = (int)c->view_rows;
  VA_CUDA(cub::DeviceRadixSort::SortPairs(NULL, b1, c->keys, c->keys_sorted, c->iota, c->vals_sorted, items, 0, 32,
                                          c->stream));
  VA_CUDA(cub::DeviceScan::ExclusiveSum(NULL, b2, c->npieces, c->pstart, (int)cap, c->stream));
  c->cub_tmp_bytes = b1 > b2 ? b1 : b2;
  dalloc(&c->cub_tmp, c->cub_tmp_bytes, "sort scratch");
  c->seg_cap = cap;
}
