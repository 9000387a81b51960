/* cuda_stats.cu: per-anchor reductions over the device's a[] and r[]: farthest member, trim histogram,
 * the k x (d + 3) statistics, and the split's 2-means sums. The passes that read rows work view by view
 * (va_cuda_each_rows: all rows at once, or streamed chunks whose sums are added in chunk order).
 * Statistics, two ways:
 *  SORT (default): the rows grouped stably by segment (anchor) with their bounds (cuda_seg_sort.cu: a
 *    counting sort, or cub's radix sort for many segments), then pieces of at most P consecutive members,
 *    each summed by one block in a fixed order into a partial row, and a last pass adding each segment's
 *    partials in order. No floating-point atomics: the result is the same bit for bit on every run.
 *  ATOMIC: one warp per row adds its weighted row into the anchor's accumulator with fp64 atomicAdd.
 *    The order of the additions varies from run to run, so the last bits do.
 * Farthest, histogram and changed counts use integer atomics only (max/min/add), so they are exact. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <type_traits>

#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "cuda/async.cuh"
#include "cuda/internal.cuh"

extern "C" {
#include "core/config.h"
}

static const int THREADS = 256;
static const int PIECE = 256;     /* rows per piece of the sorted reduction: one per thread of a block */
static const int CR_MAX_DP = 256; /* r computed in the statistics pass: the whole row in one column pass */

static int grid_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 65535 * 16) b = 65535 * 16;
  return (int)b;
}

__device__ __forceinline__ int64_t hist_bin(float r, float rmax, int64_t bins) {
  if (!(rmax > 0)) return 0;
  int64_t b = (int64_t)((double)r / (double)rmax * (double)bins);
  return b < 0 ? 0 : b >= bins ? bins - 1 : b;
}

/* Weight of one member as va_stats_accumulate: 0 = not summed (trimmed), else the weight. */
__device__ __forceinline__ double member_weight(const rule_dev &ru, uint32_t j, float r) {
  if (ru.mode == VA_ROBUST_TRIM) {
    int64_t b = hist_bin(r, ru.rmax[j], ru.bins);
    return (b < ru.lo[j] || b > ru.hi[j]) ? 0.0 : 1.0;
  }
  if (ru.mode == VA_ROBUST_HUBER) {
    double delta = ru.delta[j], dist = sqrt((double)r);
    return (delta > 0 && dist > delta) ? delta / dist : 1.0;
  }
  return 1.0;
}

/* --- farthest -------------------------------------------------------------------------------------- */
/* r >= 0, so its bits order as the floats do and atomicMax on them is exact. SHARED: each block takes
 * the maxima of its rows in shared memory first and adds one atomic per anchor it saw to the global
 * array, not a million atomics on a thousand addresses straight to global memory, a cost every reseeding
 * iteration would pay (docs/performance.md). */
static const int FARTHEST_SMEM_K = 8192;
template <bool SHARED>
__global__ void farthest_max_kernel(const uint32_t *__restrict__ a, const float *__restrict__ r, int64_t n, int64_t k,
                                    unsigned *rmax_bits) {
  __shared__ unsigned best[SHARED ? FARTHEST_SMEM_K : 1];
  if (SHARED) {
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) best[j] = 0;
    __syncthreads();
  }
  unsigned *to = SHARED ? best : rmax_bits;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x, n4 = n / 4;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += stride) { /* 16-byte loads */
    const uint4 av = ((const uint4 *)a)[i];
    const float4 rv = ((const float4 *)r)[i];
    atomicMax(to + av.x, __float_as_uint(rv.x));
    atomicMax(to + av.y, __float_as_uint(rv.y));
    atomicMax(to + av.z, __float_as_uint(rv.z));
    atomicMax(to + av.w, __float_as_uint(rv.w));
  }
  for (int64_t i = 4 * n4 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride)
    atomicMax(to + a[i], __float_as_uint(r[i]));
  if (SHARED) {
    __syncthreads();
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x)
      if (best[j]) atomicMax(rmax_bits + j, best[j]);
  }
}
__global__ void farthest_arg_kernel(const uint32_t *__restrict__ a, const float *__restrict__ r, int64_t n,
                                    const unsigned *__restrict__ rmax_bits, unsigned long long *rarg) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t j = a[i];
    if (__float_as_uint(r[i]) == rmax_bits[j]) atomicMin(rarg + j, (unsigned long long)i);
  }
}

void va_cuda_farthest_launch(va_cuda_t *c) {
  VA_CUDA(cudaMemsetAsync(c->rmax_bits, 0, (size_t)c->k * 4, c->stream));
  VA_CUDA(cudaMemsetAsync(c->rarg, 0xFF, (size_t)c->k * 8, c->stream));
  if (c->k <= FARTHEST_SMEM_K) {
    const int blocks = std::min(grid_for(c->n, THREADS), 2 * c->prop.multiProcessorCount);
    farthest_max_kernel<true><<<blocks, THREADS, 0, c->stream>>>(c->assign, c->r, c->n, c->k, c->rmax_bits);
  } else {
    farthest_max_kernel<false>
        <<<grid_for(c->n, THREADS), THREADS, 0, c->stream>>>(c->assign, c->r, c->n, c->k, c->rmax_bits);
  }
  VA_LAUNCHED();
  farthest_arg_kernel<<<grid_for(c->n, THREADS), THREADS, 0, c->stream>>>(c->assign, c->r, c->n, c->rmax_bits, c->rarg);
  VA_LAUNCHED();
}

extern "C" void va_cuda_farthest(va_cuda_t *c, float *rmax_host, int64_t *rarg_host) {
  va_cuda_enter(c);
  int64_t k = c->k;
  if (c->n <= 0) {
    for (int64_t j = 0; j < k; j++) {
      rmax_host[j] = 0;
      rarg_host[j] = -1;
    }
    return;
  }
  va_cuda_ensure_r(c);
  va_cuda_farthest_launch(c);
  char *h = (char *)va_cuda_host_scratch(c, (size_t)k * 12);
  unsigned *hb = (unsigned *)h;
  unsigned long long *ha = (unsigned long long *)(h + (size_t)k * 4);
  VA_CUDA(cudaMemcpyAsync(hb, c->rmax_bits, (size_t)k * 4, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaMemcpyAsync(ha, c->rarg, (size_t)k * 8, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  for (int64_t j = 0; j < k; j++) {
    memcpy(&rmax_host[j], &hb[j], 4);
    rarg_host[j] = ha[j] == ~0ull ? -1 : (int64_t)ha[j];
  }
}

/* --- histogram ------------------------------------------------------------------------------------- */
__global__ void hist_kernel(const uint32_t *__restrict__ a, const float *__restrict__ r, int64_t n,
                            const float *__restrict__ rmax, int64_t bins, unsigned *hist) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t j = a[i];
    atomicAdd(hist + (int64_t)j * bins + hist_bin(r[i], rmax[j], bins), 1u);
  }
}

void va_cuda_hist_launch(va_cuda_t *c, const float *rmax_host, int64_t bins) {
  int64_t k = c->k;
  if (k * bins > c->hist_cap) {
    VA_CUDA(cudaStreamSynchronize(c->stream));
    if (c->hist) VA_CUDA(cudaFree(c->hist));
    c->hist_cap = k * bins;
    VA_CUDA(cudaMalloc((void **)&c->hist, (size_t)c->hist_cap * 4));
  }
  VA_CUDA(cudaMemcpyAsync(c->rmax_in, rmax_host, (size_t)k * 4, cudaMemcpyHostToDevice, c->stream));
  VA_CUDA(cudaMemsetAsync(c->hist, 0, (size_t)(k * bins) * 4, c->stream));
  hist_kernel<<<grid_for(c->n, THREADS), THREADS, 0, c->stream>>>(c->assign, c->r, c->n, c->rmax_in, bins, c->hist);
  VA_LAUNCHED();
}

extern "C" void va_cuda_hist(va_cuda_t *c, const float *rmax_host, int64_t bins, double *hist_host) {
  if (c->n <= 0 || bins <= 0) return;
  va_cuda_enter(c);
  int64_t k = c->k;
  VA_CUDA(cudaStreamSynchronize(c->stream)); /* rmax_host may be pageable: plain ordering is enough */
  va_cuda_ensure_r(c);
  va_cuda_hist_launch(c, rmax_host, bins);
  unsigned *h = (unsigned *)va_cuda_host_scratch(c, (size_t)(k * bins) * 4);
  VA_CUDA(cudaMemcpyAsync(h, c->hist, (size_t)(k * bins) * 4, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  for (int64_t e = 0; e < k * bins; e++) hist_host[e] += (double)h[e];
}

/* --- sorted segmented reduction: the rows grouped by segment (cuda_seg_sort.cu), then summed -------- */
/* Pieces of segment j (0 for the excluded segment nseg), and their entries in the piece table. */
__device__ __forceinline__ int32_t seg_pieces(const int32_t *start, const int32_t *end, int64_t nseg, int64_t j) {
  return j < nseg ? (end[j] - start[j] + PIECE - 1) / PIECE : 0;
}
__device__ __forceinline__ void seg_table_fill(int32_t *table, int32_t first, int32_t count, int64_t j) {
  for (int32_t p = 0; p < count; p++) table[first + p] = (int32_t)j;
}
__global__ void seg_pieces_kernel(const int32_t *__restrict__ start, const int32_t *__restrict__ end, int64_t nseg,
                                  int32_t *np) {
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j <= nseg; j += (int64_t)gridDim.x * blockDim.x)
    np[j] = seg_pieces(start, end, nseg, j);
}
__global__ void seg_table_kernel(const int32_t *__restrict__ np, const int32_t *__restrict__ pstart, int64_t nseg,
                                 int32_t *table) {
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < nseg; j += (int64_t)gridDim.x * blockDim.x)
    seg_table_fill(table, pstart[j], np[j], j);
}

/* The three steps above in one block when the segments are few (nseg + 1 <= BOOK_THREADS * BOOK_PER, k up
 * to 8191 anchors): each thread counts the pieces of BOOK_PER consecutive segments, one block scan gives
 * the offsets in segment order (the same pstart as the device-wide scan), and each thread fills its
 * segments' table entries. One launch instead of four (pieces, the scan's two kernels, table): one block
 * is slow at filling the table, but no kernel waits on three others (docs/performance.md). */
static const int BOOK_THREADS = 1024, BOOK_PER = 8;
__global__ void __launch_bounds__(BOOK_THREADS)
    seg_book_kernel(const int32_t *__restrict__ start, const int32_t *__restrict__ end, int64_t nseg, int32_t *np,
                    int32_t *pstart, int32_t *table) {
  using Scan = cub::BlockScan<int32_t, BOOK_THREADS>;
  __shared__ typename Scan::TempStorage scan_tmp;
  const int64_t j0 = (int64_t)threadIdx.x * BOOK_PER;
  int32_t cnt[BOOK_PER], sum = 0;
#pragma unroll
  for (int q = 0; q < BOOK_PER; q++) {
    cnt[q] = seg_pieces(start, end, nseg, j0 + q);
    sum += cnt[q];
  }
  int32_t off;
  Scan(scan_tmp).ExclusiveSum(sum, off);
#pragma unroll
  for (int q = 0; q < BOOK_PER; q++) {
    const int64_t j = j0 + q;
    if (j > nseg) break;
    np[j] = cnt[q];
    pstart[j] = off; /* pstart[nseg]: every piece */
    seg_table_fill(table, off, cnt[q], j);
    off += cnt[q];
  }
}

/* One block per piece: its rows (sorted positions) are spread one per thread; each warp then walks
 * its 32 rows in order, every lane adding CQ columns (lane + 32 q) in double; the 8 warps' sums are
 * added in warp order. Columns beyond 32 CQ take further passes. Scalars: count, weight, rsum.
 * CR (segments are anchors, dp <= 32 CQ, rule none or huber): r is not read but computed here from the
 * row the lanes hold anyway and anchor j's columns kept in registers, as row_distance_warp does (lane
 * partial sums over the same columns, the same butterfly: the same value), written to r[], and the
 * member's weight taken from it; the deferred assign pass skipped its own r pass for this.
 * The rows are sorted by anchor, so each is a random read of one row: a warp stages G of them
 * (stage_rows) at a time in shared memory with cp.async (no registers held while they are in flight), then
 * works through them; reading one row at a time keeps too few bytes in flight per SM to approach the
 * memory's bandwidth. The arithmetic, and so every sum, is unchanged.
 * UNIT (CR under rule none: every weight is 1): each element, converted to double once, goes both into
 * r's partial sum and into the column sum (1.0 * x is x, so the sums are the weighted loop's bit for bit),
 * so the staged rows are read once; the weighted loop, which needs r's weights first, reads and converts
 * every element a second time. */
/* Rows staged per warp. The pass that reads r stages twice as many 16-bit rows (the same bytes in
 * flight); the pass that computes r does not (16 rows' partial sums held at once make it slower;
 * docs/performance.md). The grouping changes no sum: rows are added in order either way. */
template <int CQ, bool CR, typename T>
struct stage_rows {
  static const int G = (CQ >= 8 ? 2 : 8) * (CR ? 1 : (int)(4 / sizeof(T)));
};
/* The sums over the warp's lanes of G values per lane (G a power of two up to 32), by the xor butterfly's
 * tree: at offset 16 each lane keeps half of its values and adds its partner's copy of that half, and
 * so on while more than one value is left; the last value is then summed over the remaining offsets as
 * a butterfly does. Every sum is computed by the same tree as `s += shfl_xor(s, o)` for o = 16 .. 1 on
 * one value (a + b == b + a in IEEE arithmetic), so bit for bit the same, in G - 1 + 5 - log2 G
 * shuffles instead of 5 G. held: which of the G sums this lane ends with. */
template <int G>
__device__ __forceinline__ double rows_reduce(double (&part)[G], int lane, int &held) {
  held = 0;
  int o = 16;
#pragma unroll
  for (int m = G; m > 1; m >>= 1, o >>= 1) {
    const int half = m >> 1;
    const bool up = (lane & o) != 0;
#pragma unroll
    for (int r = 0; r < half; r++) {
      const double keep = up ? part[r + half] : part[r], send = up ? part[r] : part[r + half];
      part[r] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
    held += up ? half : 0;
  }
  double s = part[0];
  for (; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

template <int CQ, bool CR, bool UNIT, typename T>
__global__ void __launch_bounds__(THREADS)
    seg_partial_kernel(const T *__restrict__ X, int64_t dp, int d, const uint32_t *__restrict__ rows_sorted,
                       float *__restrict__ r, const int32_t *__restrict__ start, const int32_t *__restrict__ end,
                       const int32_t *__restrict__ pstart, const int32_t *__restrict__ table, int64_t nseg, rule_dev ru,
                       const float *__restrict__ A32, int cosine, double *__restrict__ partial) {
  constexpr int G = stage_rows<CQ, CR, T>::G;
  constexpr int PER16 = 16 / (int)sizeof(T); /* elements per 16-byte copy */
  const int64_t b = blockIdx.x;
  if (b >= pstart[nseg]) return;
  const int W = d + 3;
  const int j = table[b];
  const int p = (int)(b - pstart[j]);
  const int s0 = start[j] + p * PIECE, s1 = min(end[j], s0 + PIECE);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  __shared__ double red[THREADS / 32][32 * CQ];
  __shared__ double sred[THREADS / 32][3];
  __shared__ __align__(16) T stage[THREADS / 32][G][32 * CQ];
  __shared__ double wstage[THREADS / 32][G];
  __shared__ float rstage[THREADS / 32][G];
  /* this thread's row */
  const int pos = s0 + tid;
  uint32_t myrow = 0;
  double myw = 0, myr = 0, mycnt = 0, mywsum = 0;
  if (pos < s1) {
    myrow = rows_sorted[pos];
    mycnt = 1;
    if (!CR) {
      float rv = r[myrow];
      myr = rv;
      myw = member_weight(ru, (uint32_t)j, rv);
      mywsum = myw;
    }
  }
  float av[CR ? CQ : 1];
  if (CR) {
#pragma unroll
    for (int q = 0; q < CQ; q++) av[q] = lane + 32 * q < dp ? A32[(int64_t)j * dp + lane + 32 * q] : 0.0f;
  }
  const int wrows = min(32, max(0, s1 - (s0 + warp * 32)));
  for (int c0 = 0; c0 < d; c0 += 32 * CQ) {
    const int cw = (int)min((int64_t)32 * CQ, dp - c0); /* columns of this pass held by the rows: a multiple of 32 */
    double acc[CQ];
#pragma unroll
    for (int q = 0; q < CQ; q++) acc[q] = 0;
    for (int g0 = 0; g0 < wrows; g0 += G) {
      const int gn = min(G, wrows - g0);
      /* FULL (G rows, every column of the pass: nearly every group at d = 32 CQ): the bounds are
       * compile-time constants, so the loops unroll and lose their tests (without them the pass is bound
       * by the instructions it issues, not by the memory, on 16-bit rows; docs/performance.md). The
       * arithmetic, and so every value, is the same in both instances. */
      auto group = [&](auto full) {
        constexpr bool FULL = decltype(full)::value;
        const int un = FULL ? G : gn, cn = FULL ? 32 * CQ : cw;
#pragma unroll
        for (int u = 0; u < G; u++) {
          if (!FULL && u >= un) break;
          const uint32_t row = __shfl_sync(0xffffffffu, myrow, g0 + u);
          const T *x = X + (int64_t)row * dp + c0;
#pragma unroll
          for (int e0 = 0; e0 < 32 * CQ; e0 += 32 * PER16) {
            const int e = e0 + PER16 * lane;
            if (e < cn) cp_async16((uint32_t)__cvta_generic_to_shared(&stage[warp][u][e]), x + e);
          }
        }
        cp_async_commit();
        cp_async_wait<0>();
        __syncwarp();
        if (CR) {
          /* every staged row's lane partial sums (rows past gn: zeros, discarded), then one transposed
           * reduction for all of them (rows_reduce: the butterfly's tree, so each row's r is the value a
           * butterfly per row gives, in a fifth of the shuffles), r and the weight by the lanes that hold
           * each row, handed round through shared memory; then the rows' weighted sums in row order */
          double part[G];
#pragma unroll
          for (int u = 0; u < G; u++) {
            const T *xs = stage[warp][u];
            double s = 0;
#pragma unroll
            for (int q = 0; q < CQ; q++) {
              const int col = lane + 32 * q;
              /* padded columns hold zeros, in the anchors too */
              const double xd = FULL || (u < un && col < cn) ? (double)elem_to_float(xs[col]) : 0.0;
              if (cosine) s += xd * (double)av[q];
              else {
                double df = xd - (double)av[q];
                s += df * df;
              }
              if (UNIT && (FULL || u < un)) acc[q] += xd; /* 1.0 * x is x: the weighted loop's sum */
            }
            part[u] = s;
          }
          int held;
          double s = rows_reduce<G>(part, lane, held);
          if (cosine) s = 1.0 - s > 0 ? 1.0 - s : 0.0;
          const float rv = (float)s;
          /* (huber's double square root is a call with a slow path; around it ptxas keeps 8 bytes on the
           * stack in some instances, the spills it reports here) */
          const double w = UNIT ? 1.0 : member_weight(ru, (uint32_t)j, rv);
          if ((lane & (32 / G - 1)) == 0) {
            wstage[warp][held] = w;
            rstage[warp][held] = rv;
          }
          __syncwarp();
          const int mine = lane - g0; /* this lane's own row */
          if (mine >= 0 && mine < un) {
            myr = (double)rstage[warp][mine];
            mywsum = wstage[warp][mine];
          }
#pragma unroll
          for (int u = 0; u < (UNIT ? 0 : G); u++) {
            if (!FULL && u >= un) break;
            const double wu = wstage[warp][u];
            const T *xs = stage[warp][u];
#pragma unroll
            for (int q = 0; q < CQ; q++) {
              const int col = lane + 32 * q;
              const float xv = FULL || col < cn ? elem_to_float(xs[col]) : 0.0f;
              acc[q] += wu * (double)xv;
            }
          }
        } else {
#pragma unroll
          for (int u = 0; u < G; u++) {
            if (!FULL && u >= un) break;
            const T *xs = stage[warp][u];
            double w = __shfl_sync(0xffffffffu, myw, g0 + u);
            if (w == 0) continue;
#pragma unroll
            for (int q = 0; q < CQ; q++) {
              const int col = lane + 32 * q;
              if (FULL || col < cn) acc[q] += w * (double)elem_to_float(xs[col]); /* padded columns hold zeros */
            }
          }
        }
      };
      if (gn == G && cw == 32 * CQ) group(std::true_type{});
      else group(std::false_type{});
      __syncwarp(); /* the stage is refilled next */
    }
#pragma unroll
    for (int q = 0; q < CQ; q++) red[warp][lane + 32 * q] = acc[q];
    __syncthreads();
    for (int col = tid; col < 32 * CQ; col += THREADS) {
      double s = 0;
      for (int w = 0; w < THREADS / 32; w++) s += red[w][col];
      if (c0 + col < d) partial[b * W + c0 + col] = s;
    }
    __syncthreads();
  }
  if (CR && pos < s1) r[myrow] = (float)myr;
    /* scalars: fixed butterfly in the warp, then warps in order */
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    mycnt += __shfl_xor_sync(0xffffffffu, mycnt, o);
    mywsum += __shfl_xor_sync(0xffffffffu, mywsum, o);
    myr += __shfl_xor_sync(0xffffffffu, myr, o);
  }
  if (lane == 0) {
    sred[warp][0] = mywsum;
    sred[warp][1] = mycnt;
    sred[warp][2] = myr;
  }
  __syncthreads();
  if (tid < 3) {
    double s = 0;
    for (int w = 0; w < THREADS / 32; w++) s += sred[w][tid];
    partial[b * W + d + tid] = s;
  }
}

/* add: out += the view's sums (a later chunk), else out = them. */
__global__ void seg_final_kernel(const double *__restrict__ partial, const int32_t *__restrict__ np,
                                 const int32_t *__restrict__ pstart, int W, int add, double *__restrict__ out) {
  const int64_t j = blockIdx.x;
  const int m = np[j];
  const int64_t p0 = pstart[j];
  for (int col = threadIdx.x; col < W; col += blockDim.x) {
    double s = 0;
    for (int p = 0; p < m; p++) s += partial[(p0 + p) * W + col];
    out[j * W + col] = add ? out[j * W + col] + s : s;
  }
}

template <int CQ, typename T>
static void launch_partial_rows(va_cuda_t *c, const T *X, const va_cuda_rows_t *v, int64_t blocks, int64_t nseg,
                                const rule_dev &ru, const float *anchors_r, int cosine) {
  float *r = c->r + v->row0;
  if (anchors_r && ru.mode == VA_ROBUST_NONE)
    seg_partial_kernel<CQ, true, true, T>
        <<<(unsigned)blocks, THREADS, 0, c->stream>>>(X, c->dp, (int)c->d, c->vals_sorted, r, c->seg_start, c->seg_end,
                                                      c->pstart, c->ptable, nseg, ru, anchors_r, cosine, c->partial);
  else if (anchors_r)
    seg_partial_kernel<CQ, true, false, T>
        <<<(unsigned)blocks, THREADS, 0, c->stream>>>(X, c->dp, (int)c->d, c->vals_sorted, r, c->seg_start, c->seg_end,
                                                      c->pstart, c->ptable, nseg, ru, anchors_r, cosine, c->partial);
  else
    seg_partial_kernel<CQ, false, false, T>
        <<<(unsigned)blocks, THREADS, 0, c->stream>>>(X, c->dp, (int)c->d, c->vals_sorted, r, c->seg_start, c->seg_end,
                                                      c->pstart, c->ptable, nseg, ru, NULL, 0, c->partial);
  VA_LAUNCHED();
}
/* At fp16/bf16 the pass reads the 16-bit rows, half the bytes of float32 ones: on float32 rows the pass
 * that reads r is bound by the memory's bandwidth (docs/performance.md). */
template <int CQ>
static void launch_partial(va_cuda_t *c, const va_cuda_rows_t *v, int64_t blocks, int64_t nseg, const rule_dev &ru,
                           const float *anchors_r, int cosine) {
  va_cuda_with_rows(c, v, [&](auto X) { launch_partial_rows<CQ>(c, X, v, blocks, nseg, ru, anchors_r, cosine); });
}

/* Over the view's rows: keys[i] (view row i) in [0, nseg]; nseg marks a row that joins no segment.
 * out: nseg x (d + 3), written by the view starting at row 0, added to by the others. anchors_r: the
 * segments are these anchors and r is computed (and written) here rather than read (dp <= CR_MAX_DP). */
static void seg_reduce(va_cuda_t *c, const va_cuda_rows_t *v, const uint32_t *keys, int64_t nseg, const rule_dev &ru,
                       const float *anchors_r, int cosine, double *out) {
  va_cuda_ensure_segments(c, nseg);
  va_cuda_segment_rows(c, keys, v->n, nseg, c->seg_way);
  if (nseg + 1 <= (int64_t)BOOK_THREADS * BOOK_PER) {
    seg_book_kernel<<<1, BOOK_THREADS, 0, c->stream>>>(c->seg_start, c->seg_end, nseg, c->npieces, c->pstart,
                                                       c->ptable);
    VA_LAUNCHED();
  } else {
    seg_pieces_kernel<<<grid_for(nseg + 1, THREADS), THREADS, 0, c->stream>>>(c->seg_start, c->seg_end, nseg,
                                                                              c->npieces);
    VA_LAUNCHED();
    size_t tmp = 0;
    VA_CUDA(cub::DeviceScan::ExclusiveSum(NULL, tmp, c->npieces, c->pstart, (int)(nseg + 1), c->stream));
    va_cuda_cub_scratch(c, tmp);
    tmp = c->cub_tmp_bytes;
    VA_CUDA(cub::DeviceScan::ExclusiveSum(c->cub_tmp, tmp, c->npieces, c->pstart, (int)(nseg + 1), c->stream));
    seg_table_kernel<<<grid_for(nseg, THREADS), THREADS, 0, c->stream>>>(c->npieces, c->pstart, nseg, c->ptable);
    VA_LAUNCHED();
  }
  int64_t maxp = v->n / PIECE + nseg + 1;
  int W = (int)VA_STATS_W(c->d);
  if (anchors_r && c->dp > CR_MAX_DP) VA_FATAL("seg_reduce: r computed in the pass needs d <= %d", CR_MAX_DP);
  if (c->dp <= 32) launch_partial<1>(c, v, maxp, nseg, ru, anchors_r, cosine);
  else if (c->dp <= 64) launch_partial<2>(c, v, maxp, nseg, ru, anchors_r, cosine);
  else if (c->dp <= 128) launch_partial<4>(c, v, maxp, nseg, ru, anchors_r, cosine);
  else launch_partial<8>(c, v, maxp, nseg, ru, anchors_r, cosine);
  seg_final_kernel<<<(unsigned)nseg, 128, 0, c->stream>>>(c->partial, c->npieces, c->pstart, W, v->row0 > 0, out);
  VA_LAUNCHED();
}

/* --- atomic reduction ------------------------------------------------------------------------------ */
template <typename T>
__global__ void __launch_bounds__(THREADS)
    stats_atomic_kernel(const T *__restrict__ X, int64_t dp, int d, const uint32_t *__restrict__ a,
                        const float *__restrict__ r, int64_t n, rule_dev ru, double *acc) {
  const int lane = threadIdx.x & 31;
  const int W = d + 3;
  for (int64_t i = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; i < n;
       i += ((int64_t)gridDim.x * blockDim.x) >> 5) {
    uint32_t j = a[i];
    float rv = r[i];
    double w = member_weight(ru, j, rv);
    double *dst = acc + (int64_t)j * W;
    if (lane == 0) {
      atomicAdd(dst + d + 1, 1.0);
      atomicAdd(dst + d + 2, (double)rv);
      if (w != 0) atomicAdd(dst + d, w);
    }
    if (w == 0) continue;
    const T *x = X + i * dp;
    for (int t = lane; t < d; t += 32) atomicAdd(dst + t, w * (double)elem_to_float(x[t]));
  }
}

/* Host values to the device through the context's pinned upload buffer (a copy from pageable memory may
 * wait for the stream, which would stall the queue behind a deferred assign pass). `at` is the byte
 * offset in that buffer; the buffer is reused once its previous uploads are done (up_done). */
static void upload_staged(va_cuda_t *c, void *dst, const void *src, size_t bytes, size_t at) {
  if (at + bytes > c->h_up_bytes)
    VA_FATAL("upload of %zu bytes at %zu exceeds the %zu-byte staging buffer", bytes, at, c->h_up_bytes);
  memcpy((char *)c->h_up + at, src, bytes);
  VA_CUDA(cudaMemcpyAsync(dst, (char *)c->h_up + at, bytes, cudaMemcpyHostToDevice, c->stream));
}

/* Layout of the upload buffer per statistics call: the rule's arrays (at most 12 k bytes), then the
 * appended values. */
rule_dev va_cuda_upload_rule(va_cuda_t *c, const va_stats_rule_t *rule) {
  rule_dev ru = {rule ? rule->mode : VA_ROBUST_NONE, c->rmax_in, c->bin_lo, c->bin_hi, rule ? rule->bins : 0, c->huber};
  size_t k = (size_t)c->k;
  if (ru.mode == VA_ROBUST_TRIM) {
    if (!rule->rmax || !rule->bin_lo || !rule->bin_hi || rule->bins <= 0) VA_FATAL("trim rule without its arrays");
    upload_staged(c, c->rmax_in, rule->rmax, k * 4, 0);
    upload_staged(c, c->bin_lo, rule->bin_lo, k * 4, k * 4);
    upload_staged(c, c->bin_hi, rule->bin_hi, k * 4, k * 8);
  } else if (ru.mode == VA_ROBUST_HUBER) {
    if (!rule->huber_delta) VA_FATAL("huber rule without its deltas");
    upload_staged(c, c->huber, rule->huber_delta, k * 8, 0);
  }
  return ru;
}

/* acc[0] <- the changed-row count of the deferred assign pass (in place of the caller's x[0]). */
__global__ void put_count_kernel(const unsigned long long *counter, double *acc) { acc[0] = (double)*counter; }

struct stats_args {
  rule_dev ru;
  int compute_r; /* r computed in the pass (seg_partial_kernel CR) */
  /* the owed assign pass, chunk by chunk before the chunk's statistics (assign: 1); its r kernel too
   * when r is neither computed by its kernel (part ALL) nor in the statistics pass */
  int assign, assign_part, assign_variant, assign_r;
};

static void stats_rows(va_cuda_t *c, const va_cuda_rows_t *v, void *arg) {
  const stats_args &sa = *(const stats_args *)arg;
  const rule_dev &ru = sa.ru;
  if (sa.assign) {
    va_cuda_assign_launch(c, v, c->cosine_last, sa.assign_variant, sa.assign_part);
    if (sa.assign_r) va_cuda_assign_launch(c, v, c->cosine_last, sa.assign_variant, VA_ASSIGN_PART_R);
  }
  if (c->stats_variant == VA_CUDA_STATS_ATOMIC) {
    int64_t blocks = (v->n + THREADS / 32 - 1) / (THREADS / 32);
    if (blocks > 132 * 64) blocks = 132 * 64;
    va_cuda_with_rows(c, v, [&](auto X) {
      stats_atomic_kernel<<<(unsigned)blocks, THREADS, 0, c->stream>>>(X, c->dp, (int)c->d, c->assign + v->row0,
                                                                       c->r + v->row0, v->n, ru, c->acc);
    });
    VA_LAUNCHED();
  } else {
    seg_reduce(c, v, c->assign + v->row0, c->k, ru, sa.compute_r ? c->A32 : NULL, c->cosine_last, c->acc);
  }
}

/* c->acc (k x W) <- the statistics; no rows: zeros. r still owed by a deferred assign pass is computed in
 * the pass where it can be (sorted reduction, rule none or huber, d small enough), else first. With
 * assign_owed (streamed rows), the assign pass runs inside this one, chunk by chunk, the same kernels
 * in the same order as on its own (va_cuda_settle_assign, then this pass): the same bits. */
void va_cuda_stats_launch(va_cuda_t *c, const rule_dev &ru, int assign_owed) {
  int64_t W = VA_STATS_W(c->d);
  va_cuda_ensure_segments(c, c->k);
  stats_args sa = {ru, 0, 0, 0, 0, 0};
  const int r_here = c->stats_variant == VA_CUDA_STATS_SORT && ru.mode != VA_ROBUST_TRIM && c->dp <= CR_MAX_DP;
  if (assign_owed) {
    sa.assign = 1;
    sa.assign_variant = va_cuda_assign_variant(c);
    const int argmin_only = sa.assign_variant == VA_CUDA_ASSIGN_FUSED;
    sa.assign_part = argmin_only ? VA_ASSIGN_PART_ARGMIN : VA_ASSIGN_PART_ALL;
    sa.compute_r = argmin_only && r_here;
    sa.assign_r = argmin_only && !r_here;
    c->r_pending = 0;
  } else if (c->r_pending) {
    sa.compute_r = r_here;
    if (!sa.compute_r) va_cuda_ensure_r(c);
    c->r_pending = 0;
  }
  if (c->stats_variant == VA_CUDA_STATS_ATOMIC || c->n <= 0)
    VA_CUDA(cudaMemsetAsync(c->acc, 0, (size_t)(c->k * W) * 8, c->stream));
  if (c->n > 0) va_cuda_each_rows(c, stats_rows, &sa);
}

extern "C" double *va_cuda_stats_device(va_cuda_t *c, const va_stats_rule_t *rule, const double *x, int64_t nx) {
  int64_t kw = c->k * VA_STATS_W(c->d);
  if (nx < 0 || nx > VA_STATS_W(c->d)) VA_FATAL("va_cuda_stats_device: %lld extra values", (long long)nx);
  const int assign_owed = c->assign_owed; /* this pass runs it (not va_cuda_enter) */
  c->assign_owed = 0;
  va_cuda_enter(c);
  va_cuda_ensure_segments(c, c->k);          /* may reallocate acc: before anything is written into it */
  VA_CUDA(cudaEventSynchronize(c->up_done)); /* the upload buffer is free again */
  rule_dev ru = va_cuda_upload_rule(c, rule);
  if (nx > 0) upload_staged(c, c->acc + kw, x, (size_t)nx * 8, (size_t)c->k * 12);
  VA_CUDA(cudaEventRecord(c->up_done, c->stream));
  va_cuda_stats_launch(c, ru, assign_owed); /* writes acc[0, kw) only */
  if (c->count_pending && nx > 0) {
    put_count_kernel<<<1, 1, 0, c->stream>>>(c->counter, c->acc + kw);
    VA_LAUNCHED();
  }
  c->count_pending = 0;
  return c->acc;
}

extern "C" void va_cuda_fetch_f64(va_cuda_t *c, const double *dbuf, int64_t count, double *host) {
  if (count <= 0) return;
  va_cuda_enter(c);
  double *h = (double *)va_cuda_host_scratch(c, (size_t)count * 8);
  VA_CUDA(cudaMemcpyAsync(h, dbuf, (size_t)count * 8, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  memcpy(host, h, (size_t)count * 8);
}

extern "C" void va_cuda_put_f64(va_cuda_t *c, double *dbuf, const double *host, int64_t count) {
  if (count <= 0) return;
  va_cuda_enter(c);
  double *h = (double *)va_cuda_host_scratch(c, (size_t)count * 8);
  memcpy(h, host, (size_t)count * 8);
  VA_CUDA(cudaMemcpyAsync(dbuf, h, (size_t)count * 8, cudaMemcpyHostToDevice, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
}

extern "C" void va_cuda_sync(va_cuda_t *c) {
  va_cuda_enter(c);
  VA_CUDA(cudaStreamSynchronize(c->stream));
}

extern "C" void *va_cuda_work_stream(const va_cuda_t *c) { return (void *)c->stream; }

/* out[3 j + f] = acc[j W + d + f] (weight, count, r sum), out[3 k + e] = acc[k W + e], then the fp16
 * overflow flag. */
__global__ void gather_scalars_kernel(const double *__restrict__ acc, int64_t k, int d, int64_t nx,
                                      const int *__restrict__ overflow, double *__restrict__ out) {
  const int64_t W = d + 3, total = 3 * k + nx + 1;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    if (e < 3 * k) out[e] = acc[(e / 3) * W + d + e % 3];
    else if (e < 3 * k + nx) out[e] = acc[k * W + (e - 3 * k)];
    else out[e] = (double)*overflow;
  }
}

extern "C" void va_cuda_queue_scalars(va_cuda_t *c, const double *dacc, int64_t nx) {
  va_cuda_enter(c);
  int64_t k = c->k, total = 3 * k + nx + 1;
  if (nx < 0 || nx > VA_STATS_W(c->d) || total > c->scal_cap)
    VA_FATAL("va_cuda_queue_scalars: %lld values", (long long)nx);
  gather_scalars_kernel<<<grid_for(total, THREADS), THREADS, 0, c->stream>>>(dacc, k, (int)c->d, nx, c->overflow,
                                                                             c->scal);
  VA_LAUNCHED();
  VA_CUDA(cudaMemcpyAsync(c->h_scal, c->scal, (size_t)total * 8, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaEventRecord(c->scal_ready, c->stream));
  c->scal_k = k;
  c->scal_nx = nx;
}

extern "C" void va_cuda_take_scalars(va_cuda_t *c, int64_t nx, double *host) {
  va_cuda_enter(c);
  if (nx != c->scal_nx || c->scal_k != c->k) VA_FATAL("va_cuda_take_scalars without its queue call");
  VA_CUDA(cudaEventSynchronize(c->scal_ready));
  const int64_t k = c->k, d = c->d, W = VA_STATS_W(d);
  const double *h = c->h_scal;
  if (c->precision == VA_CUDA_FP16 && h[3 * k + nx] != 0)
    VA_FATAL("a row or anchor value exceeds the fp16 range (|x| > 65504): use bf16 or tf32 products");
  for (int64_t j = 0; j < k; j++)
    for (int f = 0; f < 3; f++) host[j * W + d + f] = h[3 * j + f];
  for (int64_t e = 0; e < nx; e++) host[k * W + e] = h[3 * k + e];
}

extern "C" void va_cuda_warm_up(va_cuda_t *c, int cosine) {
  /* streamed rows: each pass costs a full copy of the rows from host memory, far more than the loading */
  if (c->n <= 0 || c->k <= 0 || c->chunk_rows) return;
  va_cuda_enter(c);
  const int64_t k = c->k, W = VA_STATS_W(c->d);
  const double x[2] = {0, 0};
  double *host = (double *)va_malloc((size_t)(k * W + 2) * sizeof(double), "warm-up statistics");
  float *rmax = (float *)va_malloc((size_t)k * sizeof(float), "warm-up");
  int64_t *rarg = (int64_t *)va_malloc((size_t)k * sizeof(int64_t), "warm-up");
  va_cuda_assign_deferred(c, cosine, 1);                            /* argmin and r kernels */
  va_cuda_queue_scalars(c, va_cuda_stats_device(c, NULL, x, 2), 2); /* r read */
  va_cuda_take_scalars(c, 2, host);
  c->r_pending = 1; /* r computed in the pass: the same values */
  va_cuda_stats_device(c, NULL, NULL, 0);
  VA_CUDA(cudaMemsetAsync(c->acc, 0, (size_t)(k * W) * 8, c->stream)); /* no members: nothing moves */
  va_cuda_update_anchors(c, 0.0, 0.0, 0.0, cosine);
  va_cuda_farthest(c, rmax, rarg); /* waits */
  free(host);
  free(rmax);
  free(rarg);
}

/* --- split: 2-means sums --------------------------------------------------------------------------- */
template <typename T>
__global__ void __launch_bounds__(THREADS)
    split_keys_kernel(const T *__restrict__ X, int64_t dp, int d, const uint32_t *__restrict__ a, int64_t n,
                      const int32_t *__restrict__ slot, const float *__restrict__ cent, int64_t m, uint32_t *keys) {
  const int lane = threadIdx.x & 31;
  for (int64_t i = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; i < n;
       i += ((int64_t)gridDim.x * blockDim.x) >> 5) {
    int32_t q = slot[a[i]];
    if (q < 0) {
      if (lane == 0) keys[i] = (uint32_t)(2 * m);
      continue;
    }
    const T *x = X + i * dp;
    const float *c0 = cent + (int64_t)(2 * q) * dp, *c1 = c0 + dp;
    double d0 = 0, d1 = 0;
    for (int t = lane; t < d; t += 32) {
      const double xt = (double)elem_to_float(x[t]), e0 = xt - c0[t], e1 = xt - c1[t];
      d0 += e0 * e0;
      d1 += e1 * e1;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      d0 += __shfl_xor_sync(0xffffffffu, d0, o);
      d1 += __shfl_xor_sync(0xffffffffu, d1, o);
    }
    if (lane == 0) keys[i] = (uint32_t)(2 * q + (d1 < d0));
  }
}

static void split_rows(va_cuda_t *c, const va_cuda_rows_t *v, void *arg) {
  const int64_t m = *(const int64_t *)arg;
  int64_t blocks = (v->n + THREADS / 32 - 1) / (THREADS / 32);
  if (blocks > 132 * 64) blocks = 132 * 64;
  va_cuda_with_rows(c, v, [&](auto X) {
    split_keys_kernel<<<(unsigned)blocks, THREADS, 0, c->stream>>>(X, c->dp, (int)c->d, c->assign + v->row0, v->n,
                                                                   c->slot, c->cent, m, c->keys);
  });
  VA_LAUNCHED();
  const rule_dev ru = {VA_ROBUST_NONE, NULL, NULL, NULL, 0, NULL};
  seg_reduce(c, v, c->keys, 2 * m, ru, NULL, 0, c->acc);
}

extern "C" void va_cuda_split_accumulate(va_cuda_t *c, const int64_t *slot, int64_t m, const float *cent,
                                         double *sums_host) {
  if (c->n <= 0 || m <= 0) return;
  va_cuda_enter(c);
  int64_t k = c->k, d = c->d, W = VA_STATS_W(d), h2 = 2 * m;
  if (h2 > c->split_cap || k > c->split_cap || !c->slot) {
    VA_CUDA(cudaStreamSynchronize(c->stream));
    if (c->slot) VA_CUDA(cudaFree(c->slot));
    if (c->cent) VA_CUDA(cudaFree(c->cent));
    c->split_cap = h2 > c->k_cap ? h2 : c->k_cap; /* >= k */
    VA_CUDA(cudaMalloc((void **)&c->slot, (size_t)c->split_cap * 4));
    VA_CUDA(cudaMalloc((void **)&c->cent, (size_t)(c->split_cap * c->dp) * 4));
    VA_CUDA(cudaMemsetAsync(c->cent, 0, (size_t)(c->split_cap * c->dp) * 4, c->stream));
  }
  VA_CUDA(cudaStreamSynchronize(c->stream));
  int32_t *hs = (int32_t *)va_cuda_host_scratch(c, (size_t)k * 4);
  for (int64_t j = 0; j < k; j++) hs[j] = slot[j] < 0 ? -1 : (int32_t)slot[j];
  VA_CUDA(cudaMemcpyAsync(c->slot, hs, (size_t)k * 4, cudaMemcpyHostToDevice, c->stream));
  VA_CUDA(cudaMemcpy2DAsync(c->cent, (size_t)c->dp * 4, cent, (size_t)d * 4, (size_t)d * 4, (size_t)h2,
                            cudaMemcpyHostToDevice, c->stream));
  va_cuda_each_rows(c, split_rows, &m);
  double *h = (double *)va_cuda_host_scratch(c, (size_t)(h2 * W) * 8);
  VA_CUDA(cudaMemcpyAsync(h, c->acc, (size_t)(h2 * W) * 8, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  for (int64_t q = 0; q < h2; q++) {
    for (int64_t u = 0; u < d; u++) sums_host[q * (d + 1) + u] += h[q * W + u];
    sums_host[q * (d + 1) + d] += h[q * W + VA_ST_COUNT(d)];
  }
}
