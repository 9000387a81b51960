/* cuda_assign.cu: the assign pass on the device, two ways.
 *  GEMM:  cuBLAS products of a chunk of rows by all anchors (chunk x k floats of scratch, never n x k),
 *         then one warp per row scans its k values for the argmin and recomputes r exactly.
 *  FUSED: an argmin kernel that streams the anchors through shared memory in tiles (cp.async) and
 *         multiplies on the tensor cores (mma.sync: tf32 m16n8k8, or fp16/bf16 m16n8k16; fp32
 *         accumulate), keeping the running argmin in registers (the distances are never written); the
 *         rows sit either in shared memory (configuration 1, any d whose tiles fit) or, for d up to 128,
 *         as mma fragments in registers (2); on Hopper (sm_90) kernels on wgmma (cuda_assign_wgmma.cu: 3,
 *         rows of 32 to 736 elements at 16 bits, 32 to 352 at tf32; 4, any row, both operands loaded by
 *         the TMA, the one for longer rows). It writes a[] and counts the
 *         changed rows; then r_rows_kernel recomputes r for the winners in double from the rows as
 *         stored (a memory-bound pass).
 * Both rank by s * (x . a) - bias with s = 2, bias = ||a||^2 (l2) or s = 1, bias = 0 (cosine), i.e. the
 * largest wins; ties go to the lowest anchor; padding anchors carry bias = +inf. */
#include <math.h>
#include <stdlib.h>

#include "cuda/assign_wgmma.cuh"
#include "cuda/async.cuh"
#include "cuda/internal.cuh"
#include "cuda/mma.cuh"

static const int THREADS = 256;

/* r for anchor j of row x: the exact distance in double, as va_row_distance; one warp, the sum
 * reduced by butterfly shuffles (a fixed order). */
template <typename T>
__device__ __forceinline__ float row_distance_warp(const T *__restrict__ x, const float *__restrict__ a, int d,
                                                   int cosine, int lane) {
  double s = 0;
  if (cosine)
    for (int t = lane; t < d; t += 32) s += (double)elem_to_float(x[t]) * (double)a[t];
  else
    for (int t = lane; t < d; t += 32) {
      double df = (double)elem_to_float(x[t]) - (double)a[t];
      s += df * df;
    }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (cosine) {
    s = 1.0 - s;
    return (float)(s > 0 ? s : 0);
  }
  return (float)s;
}

__device__ __forceinline__ void better(float &bv, int &bi, float ov, int oi) {
  if (ov > bv || (ov == bv && oi < bi)) {
    bv = ov;
    bi = oi;
  }
}
__device__ __forceinline__ void better_min(float &bv, int &bi, float ov, int oi) {
  if (ov < bv || (ov == bv && oi < bi)) {
    bv = ov;
    bi = oi;
  }
}

/* The block's changed rows (lane 0 of each warp holds its warp's) added to the pass's count: one atomic
 * per block. Every thread of the block calls it. */
__device__ __forceinline__ void add_block_changed(unsigned changed, unsigned long long *counter) {
  __shared__ unsigned wsum[THREADS / 32];
  if ((threadIdx.x & 31) == 0) wsum[threadIdx.x >> 5] = changed;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned s = 0;
    for (int w = 0; w < THREADS / 32; w++) s += wsum[w];
    if (s) atomicAdd(counter, (unsigned long long)s);
  }
}

/* --- GEMM path ----------------------------------------------------------------------------------- */
/* Rows [row0, row0 + rows): C (rows x kp, row-major) holds x . a. One warp per row. */
template <typename T>
__global__ void __launch_bounds__(THREADS)
    argmin_rows_kernel(const float *__restrict__ C, int64_t kp, const float *__restrict__ hb, int64_t row0,
                       int64_t rows, const T *__restrict__ X, const float *__restrict__ A32, int64_t dp, int d,
                       int cosine, uint32_t *__restrict__ assign, float *__restrict__ r, unsigned long long *counter) {
  const int lane = threadIdx.x & 31;
  const int64_t ii = (int64_t)blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5);
  unsigned changed = 0;
  if (ii < rows) {
    const float4 *c4 = (const float4 *)(C + ii * kp);
    const float4 *b4 = (const float4 *)hb;
    float best = -INFINITY;
    int bi = 0;
    for (int64_t q = lane; q < kp / 4; q += 32) {
      float4 cv = c4[q], bv = __ldg(b4 + q);
      float v0 = cv.x - bv.x, v1 = cv.y - bv.y, v2 = cv.z - bv.z, v3 = cv.w - bv.w;
      int j = (int)(4 * q);
      if (v0 > best) {
        best = v0;
        bi = j;
      }
      if (v1 > best) {
        best = v1;
        bi = j + 1;
      }
      if (v2 > best) {
        best = v2;
        bi = j + 2;
      }
      if (v3 > best) {
        best = v3;
        bi = j + 3;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      better(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
    int64_t i = row0 + ii;
    float rv = row_distance_warp(X + i * dp, A32 + (int64_t)bi * dp, d, cosine, lane);
    if (lane == 0) {
      r[i] = rv;
      changed = assign[i] != (uint32_t)bi;
      assign[i] = (uint32_t)bi;
    }
  }
  add_block_changed(changed, counter);
}

static int64_t gemm_chunk(const va_cuda_t *c) {
  /* about 128 MB of scratch, or as asked: fewer, larger products pay more than keeping the scratch in
   * L2 (docs/performance.md) */
  int64_t ch = c->gemm_rows > 0 ? c->gemm_rows : ((int64_t)32 << 20) / c->k_cap;
  ch = ch / VA_CUDA_ROWPAD * VA_CUDA_ROWPAD;
  if (ch < VA_CUDA_ROWPAD) ch = VA_CUDA_ROWPAD;
  if (ch > c->npad) ch = c->npad;
  return ch;
}

static void gemm_assign(va_cuda_t *c, const va_cuda_rows_t *v, int cosine, int gemm_only) {
  if (!c->blas) { /* at the first product: a job that never needs cuBLAS does not pay for its start */
    VA_CUBLAS(va_blas().cublasCreate(&c->blas));
    VA_CUBLAS(va_blas().cublasSetStream(c->blas, c->stream));
  }
  int64_t kp = VA_ROUND_UP(c->k, 128);
  int64_t chunk = gemm_chunk(c);
  if (!c->C || c->C_cap < chunk * c->k_cap) {
    if (c->C) VA_CUDA(cudaFree(c->C));
    c->C = NULL;
    c->C_cap = chunk * c->k_cap;
    VA_CUDA(cudaMalloc((void **)&c->C, (size_t)c->C_cap * 4));
  }
  const float one = 1.0f, zero = 0.0f;
  const void *Ap = c->A32, *Xp = v->X32;
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t comp = CUBLAS_COMPUTE_32F;
  size_t es = 4;
  if (c->precision == VA_CUDA_TF32) comp = CUBLAS_COMPUTE_32F_FAST_TF32;
  if (c->precision >= VA_CUDA_FP16) {
    Ap = c->Alp;
    Xp = v->Xlp;
    es = 2;
    type = c->precision == VA_CUDA_FP16 ? CUDA_R_16F : CUDA_R_16BF;
  }
  const float *hb = cosine ? c->bias_cos : c->bias_l2;
  for (int64_t r0 = 0; r0 < v->n; r0 += chunk) {
    int64_t rows = v->n - r0 < chunk ? v->n - r0 : chunk;
    /* column-major view: C^T (kp x rows) = A (kp x dp, stored row-major = op T) * X^T (dp x rows) */
    VA_CUBLAS(va_blas().cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)kp, (int)rows, (int)c->dp, &one, Ap, type,
                                     (int)c->dp, (const char *)Xp + (size_t)r0 * (size_t)c->dp * es, type, (int)c->dp,
                                     &zero, c->C, CUDA_R_32F, (int)kp, comp, CUBLAS_GEMM_DEFAULT));
    if (gemm_only) continue;
    int64_t blocks = (rows + THREADS / 32 - 1) / (THREADS / 32);
    va_cuda_with_rows(c, v, [&](auto X) {
      argmin_rows_kernel<<<(unsigned)blocks, THREADS, 0, c->stream>>>(
          c->C, kp, hb, r0, rows, X, c->A32, c->dp, (int)c->d, cosine, c->assign + v->row0, c->r + v->row0, c->counter);
    });
    VA_LAUNCHED();
  }
}

/* --- DIRECT path (small passes) ---------------------------------------------------------------------
 * The CPU's fused kernel (cpu_assign.c fused_block) on the GPU, value for value: each (row, anchor) dot
 * product is one float32 FMA chain over t = 0..d-1, the value fma(scale, dot, bias) with scale -2 and
 * bias ||a||^2 (l2; the device's norms are va_row_norms' bit for bit, twice the half biases, exactly)
 * or -1 and 0 (cosine), the smallest wins, ties to the lowest anchor. So a job on the CPU backend and one
 * whose passes take this path make the same decisions (the parity case: the same index bit for bit),
 * where cuBLAS's products differ from the CPU's in the last bits. Slower per product than cuBLAS, but a
 * pass this small takes microseconds, while cuBLAS's first product has to load its kernel
 * (docs/performance.md). Block: 8 rows (a warp each); anchors in tiles of 32 (a lane each), staged
 * through shared memory t-major (row stride 33: no bank conflicts either way) in slices of DIRECT_TS of
 * d; a row's value of x[t] is a broadcast read. */
static const int DIRECT_TS = 128;
template <typename T>
__global__ void __launch_bounds__(THREADS)
    direct_assign_kernel(const T *__restrict__ X, const float *__restrict__ A32, const float *__restrict__ hb_l2,
                         int64_t rows, int64_t dp, int d, int64_t k, int cosine, uint32_t *__restrict__ assign,
                         float *__restrict__ r, unsigned long long *counter) {
  __shared__ float As[DIRECT_TS][33];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t i = (int64_t)blockIdx.x * (THREADS / 32) + warp;
  const T *x = X + (i < rows ? i : 0) * dp;
  const float scale = cosine ? -1.0f : -2.0f;
  float best = INFINITY;
  int bi = 0;
  for (int64_t j0 = 0; j0 < k; j0 += 32) {
    const int64_t j = j0 + lane;
    float dot = 0.0f;
    for (int t0 = 0; t0 < d; t0 += DIRECT_TS) {
      const int ts = d - t0 < DIRECT_TS ? d - t0 : DIRECT_TS;
      __syncthreads();
      for (int e = threadIdx.x; e < 32 * DIRECT_TS;
           e += THREADS) { /* consecutive threads: consecutive t of one anchor */
        const int l = e / DIRECT_TS, t = e % DIRECT_TS;
        As[t][l] = (t < ts && j0 + l < k) ? A32[(j0 + l) * dp + t0 + t] : 0.0f;
      }
      __syncthreads();
      for (int t = 0; t < ts; t++) dot = fmaf(elem_to_float(x[t0 + t]), As[t][lane], dot);
    }
    if (j < k) {
      const float v = fmaf(scale, dot, cosine ? 0.0f : 2.0f * __ldg(hb_l2 + j));
      if (v < best) {
        best = v;
        bi = (int)j;
      }
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    better_min(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
  unsigned changed = 0;
  if (i < rows) {
    const float rv = row_distance_warp(x, A32 + (int64_t)bi * dp, d, cosine, lane);
    if (lane == 0) {
      r[i] = rv;
      changed = assign[i] != (uint32_t)bi;
      assign[i] = (uint32_t)bi;
    }
  }
  add_block_changed(changed, counter);
}

static void direct_assign(va_cuda_t *c, const va_cuda_rows_t *v, int cosine) {
  const int64_t blocks = (v->n + THREADS / 32 - 1) / (THREADS / 32);
  if (blocks <= 0) return;
  va_cuda_with_rows(c, v, [&](auto X) {
    direct_assign_kernel<<<(unsigned)blocks, THREADS, 0, c->stream>>>(
        X, c->A32, c->bias_l2, v->n, c->dp, (int)c->d, c->k, cosine, c->assign + v->row0, c->r + v->row0, c->counter);
  });
  VA_LAUNCHED();
}

/* --- FUSED path ---------------------------------------------------------------------------------- */
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

/* --- FUSED path, rows in shared memory (configuration 1: any d whose tiles fit) ---------------------- */
template <int BM, int BN, int WN>
static size_t fused_smem(int64_t dp, size_t es) {
  size_t stride = (size_t)dp * es + 16;
  return (size_t)(BM + 2 * BN) * stride + (size_t)WN * BM * 8;
}

/* Block: BM rows x all anchors, 8 warps as WM x WN, warp tile (BM/WM) x (BN/WN).
 * hb: the half bias (||a||^2 / 2, or 0 for cosine; +inf for padding). The accumulators start at -hb,
 * so the tensor cores leave x.a - hb, whose largest value is the nearest anchor: the epilogue is a
 * max per row and, when a row improves, the search for the first column that reached it. Writes a[]
 * and counts the changed rows; r comes after, from r_rows_kernel. */
template <typename T, int BM, int BN, int WM, int WN>
__global__ void __launch_bounds__(THREADS, 1)
    fused_assign_kernel(const T *__restrict__ X, const T *__restrict__ A, const float *__restrict__ hb, int64_t n,
                        int dp, int ntiles, uint32_t *__restrict__ assign, unsigned long long *counter) {
  constexpr int WTM = BM / WM, WTN = BN / WN, MT = WTM / 16, NT = WTN / 8;
  static_assert(WM * WN == THREADS / 32, "8 warps");
  static_assert(MT >= 1 && NT >= 2 && NT % 2 == 0, "warp tile");
  extern __shared__ __align__(16) unsigned char smem[];
  const int rowbytes = dp * (int)sizeof(T), stride = rowbytes + 16, cpr = rowbytes / 16;
  unsigned char *Xs = smem;
  float *red_val = (float *)(smem + (size_t)(BM + 2 * BN) * stride);
  int *red_idx = (int *)(red_val + WN * BM);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WM, wn = warp / WM, g = lane >> 2, tq = lane & 3;
  const int64_t row0 = (int64_t)blockIdx.x * BM;
  const uint32_t xs_base = (uint32_t)__cvta_generic_to_shared(Xs);
  const uint32_t as_base0 = xs_base + BM * stride;

  {
    const unsigned char *Xg = (const unsigned char *)(X + row0 * dp);
    for (int cidx = tid; cidx < BM * cpr; cidx += THREADS) {
      int rr = cidx / cpr, cc = cidx - rr * cpr;
      cp_async16(xs_base + rr * stride + cc * 16, Xg + (size_t)rr * rowbytes + cc * 16);
    }
  }
  /* this thread's 16-byte chunks of an anchor tile: (row, chunk) stepped without divisions */
  const int rr0 = tid / cpr, cc0 = tid - rr0 * cpr, drr = THREADS / cpr, dcc = THREADS - drr * cpr;
  auto load_tile = [&](int t, int buf) {
    const unsigned char *Ag = (const unsigned char *)(A + (int64_t)t * BN * dp);
    const uint32_t base = as_base0 + buf * BN * stride;
    int rr = rr0, cc = cc0;
    while (rr < BN) {
      cp_async16(base + rr * stride + cc * 16, Ag + (size_t)rr * rowbytes + cc * 16);
      rr += drr;
      cc += dcc;
      if (cc >= cpr) {
        cc -= cpr;
        rr++;
      }
    }
  };
  load_tile(0, 0);
  cp_async_commit();

  float best[MT][2];
  int bidx[MT][2];
#pragma unroll
  for (int mi = 0; mi < MT; mi++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      best[mi][h] = -INFINITY;
      bidx[mi][h] = 0;
    }

  const int KS = rowbytes / 32; /* even: dp is a multiple of 32 */
  const uint32_t a_off = (uint32_t)((wm * WTM + (lane & 15)) * stride + (lane >> 4) * 16);
  const uint32_t b_off = (uint32_t)((wn * WTN + (lane >> 4) * 8 + (lane & 7)) * stride + ((lane >> 3) & 1) * 16);
  /* the half bias of the next tile, loaded a tile ahead */
  float2 bnext[NT];
#pragma unroll
  for (int ni = 0; ni < NT; ni++) bnext[ni] = __ldg((const float2 *)(hb + wn * WTN + 2 * tq + ni * 8));
  for (int t = 0; t < ntiles; t++) {
    if (t + 1 < ntiles) {
      load_tile(t + 1, (t + 1) & 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    const int colbase = t * BN + wn * WTN + 2 * tq;
    float acc[MT][NT][4];
#pragma unroll
    for (int ni = 0; ni < NT; ni++) {
      const float2 bb = bnext[ni];
#pragma unroll
      for (int mi = 0; mi < MT; mi++) {
        acc[mi][ni][0] = -bb.x;
        acc[mi][ni][1] = -bb.y;
        acc[mi][ni][2] = -bb.x;
        acc[mi][ni][3] = -bb.y;
      }
    }
    if (t + 1 < ntiles)
#pragma unroll
      for (int ni = 0; ni < NT; ni++) bnext[ni] = __ldg((const float2 *)(hb + colbase + BN + ni * 8));
    __syncthreads();
    const uint32_t as_base = as_base0 + (t & 1) * BN * stride;
    /* fragments double buffered: the loads of step ks + 1 are in flight during the products of ks */
    uint32_t af[2][MT][4], bf[2][NT][2];
    auto load_frags = [&](int ks, int buf) {
#pragma unroll
      for (int mi = 0; mi < MT; mi++)
        ldsm_x4(xs_base + a_off + mi * 16 * stride + ks * 32, af[buf][mi][0], af[buf][mi][1], af[buf][mi][2],
                af[buf][mi][3]);
#pragma unroll
      for (int nj = 0; nj < NT / 2; nj++)
        ldsm_x4(as_base + b_off + nj * 16 * stride + ks * 32, bf[buf][2 * nj][0], bf[buf][2 * nj][1],
                bf[buf][2 * nj + 1][0], bf[buf][2 * nj + 1][1]);
    };
    auto products = [&](int buf) {
#pragma unroll
      for (int mi = 0; mi < MT; mi++)
#pragma unroll
        for (int ni = 0; ni < NT; ni++) Mma<T>::run(acc[mi][ni], af[buf][mi], bf[buf][ni]);
    };
    load_frags(0, 0);
    for (int ks = 0; ks < KS; ks += 2) {
      load_frags(ks + 1, 1);
      products(0);
      if (ks + 2 < KS) load_frags(ks + 2, 0);
      products(1);
    }
    /* epilogue: the tile's best per row, then (rarely, after the first tiles) its first column */
#pragma unroll
    for (int mi = 0; mi < MT; mi++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        float m = acc[mi][0][2 * h];
#pragma unroll
        for (int ni = 0; ni < NT; ni++) m = fmaxf(m, fmaxf(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]));
        if (m > best[mi][h]) {
          int jj = 0;
#pragma unroll
          for (int ni = NT - 1; ni >= 0; ni--) {
            if (acc[mi][ni][2 * h + 1] == m) jj = colbase + ni * 8 + 1;
            if (acc[mi][ni][2 * h] == m) jj = colbase + ni * 8;
          }
          best[mi][h] = m;
          bidx[mi][h] = jj;
        }
      }
    __syncthreads(); /* the buffer of tile t is refilled at t + 1 */
  }
  /* quad (the 4 threads sharing a row), then warps along N, ties to the lowest anchor */
#pragma unroll
  for (int mi = 0; mi < MT; mi++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
#pragma unroll
      for (int o = 1; o <= 2; o <<= 1)
        better(best[mi][h], bidx[mi][h], __shfl_xor_sync(0xffffffffu, best[mi][h], o),
               __shfl_xor_sync(0xffffffffu, bidx[mi][h], o));
      if (tq == 0) {
        int row = wm * WTM + mi * 16 + h * 8 + g;
        red_val[wn * BM + row] = best[mi][h];
        red_idx[wn * BM + row] = bidx[mi][h];
      }
    }
  __syncthreads();
  unsigned changed = 0;
  for (int row = tid; row < BM; row += THREADS) {
    float bv = red_val[row];
    int bi = red_idx[row];
    for (int w = 1; w < WN; w++) better(bv, bi, red_val[w * BM + row], red_idx[w * BM + row]);
    const int64_t i = row0 + row;
    if (i < n) { /* rows past n are padding: computed, not written */
      changed += assign[i] != (uint32_t)bi;
      assign[i] = (uint32_t)bi;
    }
  }
  changed = __reduce_add_sync(0xffffffffu, changed);
  if (lane == 0 && changed) atomicAdd(counter, (unsigned long long)changed);
}

/* --- FUSED path, rows in registers (configuration 2: d up to 128) -----------------------------------
 * Each warp keeps the product-precision mma A fragments of its 16 * MT rows, over the whole of dp, in
 * registers for the whole pass (loaded once from global memory: KS 32-byte steps x 4 words x MT).
 * Shared memory holds only the anchor tiles, STAGES deep (cp.async), each with its BN half biases, so
 * every B fragment that ldmatrix reads feeds MT products and no A fragment is re-read. The warps
 * split the rows only: each warp scans every anchor, the argmax never crosses warps. One barrier per
 * anchor tile (the ring's refill). KS is a compile-time step count (no run-time guards in the product
 * loop: they cost register copies at every merge); a row shorter than KS steps (dp * es < 32 KS) is
 * zero padded: zero A fragments, and the tail of every shared row zeroed once (0 * garbage could be
 * NaN). */
template <int NT, int KS, int STAGES>
static size_t rx_smem() {
  return (size_t)STAGES * ((size_t)NT * 8 * (KS * 32 + 16) + (size_t)NT * 8 * 4);
}

template <typename T, int MT, int NT, int KS, int WARPS, int STAGES, int MINB>
__global__ void __launch_bounds__(WARPS * 32, MINB)
    fused_rx_kernel(const T *__restrict__ X, const T *__restrict__ A, const float *__restrict__ hb, int64_t n, int dp,
                    int ntiles, uint32_t *__restrict__ assign, unsigned long long *counter) {
  constexpr int NTH = WARPS * 32, BN = NT * 8, stride = KS * 32 + 16, stage_bytes = BN * stride + BN * 4;
  static_assert(NT % 2 == 0 && MT >= 1 && STAGES >= 2 && BN / 4 <= NTH, "tile");
  extern __shared__ __align__(16) unsigned char smem[];
  const int rowbytes = dp * (int)sizeof(T), cpr = rowbytes / 16, ks_data = rowbytes / 32; /* rowbytes <= 32 KS */
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tq = lane & 3;
  const int64_t wrow0 = ((int64_t)blockIdx.x * WARPS + warp) * (16 * MT); /* this warp's first row */
  const uint32_t s_base = (uint32_t)__cvta_generic_to_shared(smem);

  /* A fragments (m16n8k16 fp16/bf16 and m16n8k8 tf32 alike in bytes): word 0 = row g, bytes 4tq of the
   * 32-byte step; 1 = row g + 8, same bytes; 2 = row g, bytes 16 + 4tq; 3 = row g + 8, 16 + 4tq.
   * Rows up to the grid's end are readable: the row storage is padded to VA_CUDA_ROWPAD.
   * The rows are negated (sign bits flipped: exact), so the accumulators start at +hb straight from the
   * shared biases and end at hb - x.a = -(x.a - hb), exactly the negation of the other kernels' value
   * (the products are exact in fp32 and the rounding is sign-symmetric): the smallest wins, ties to the
   * lowest anchor as before. */
  constexpr uint32_t NEG = sizeof(T) == 4 ? 0x80000000u : 0x80008000u;
  uint32_t af[MT][KS][4];
#pragma unroll
  for (int mi = 0; mi < MT; mi++) {
    const uint32_t *x0 = (const uint32_t *)((const unsigned char *)X + (size_t)(wrow0 + mi * 16 + g) * rowbytes);
    const uint32_t *x1 = (const uint32_t *)((const unsigned char *)x0 + (size_t)8 * rowbytes);
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
      if (ks < ks_data) {
        af[mi][ks][0] = __ldg(x0 + ks * 8 + tq) ^ NEG;
        af[mi][ks][1] = __ldg(x1 + ks * 8 + tq) ^ NEG;
        af[mi][ks][2] = __ldg(x0 + ks * 8 + 4 + tq) ^ NEG;
        af[mi][ks][3] = __ldg(x1 + ks * 8 + 4 + tq) ^ NEG;
      } else {
        af[mi][ks][0] = af[mi][ks][1] = af[mi][ks][2] = af[mi][ks][3] = 0;
      }
    }
  }

  if (ks_data < KS) /* the zero tail of every shared row, [rowbytes, 32 KS) */
    for (int e = tid; e < STAGES * BN * (KS - ks_data) * 2; e += NTH) {
      const int half = e % ((KS - ks_data) * 2), row = e / ((KS - ks_data) * 2);
      *(uint4 *)(smem + (row / BN) * stage_bytes + (row % BN) * stride + rowbytes + half * 16) = make_uint4(0, 0, 0, 0);
    }
  /* this thread's 16-byte chunks of an anchor tile; the tile's half biases follow its rows */
  /* Full rows (dp * es = 32 KS, e.g. d 128): every offset is a compile-time step from the thread's first
   * chunk, one cp.async instruction per chunk; otherwise (row, chunk) stepped without divisions (about
   * 25 instructions per chunk: at d 128 more than the products' own instruction count). */
  constexpr int CPR = 2 * KS; /* 16-byte chunks of a full row */
  constexpr bool FAST = NTH % CPR == 0 && (BN * CPR) % NTH == 0;
  const bool full = FAST && rowbytes == KS * 32;
  const uint32_t s_first = s_base + (tid / CPR) * stride + (tid % CPR) * 16;
  const int rr0 = tid / cpr, cc0 = tid - rr0 * cpr, drr = NTH / cpr, dcc = NTH - drr * cpr;
  auto load_tile = [&](int t, int stage) {
    const uint32_t base = s_base + stage * stage_bytes;
    if (full) {
      const unsigned char *Ag = (const unsigned char *)A + (size_t)t * (BN * KS * 32) + tid * 16;
      const uint32_t sb = s_first + stage * stage_bytes;
#pragma unroll
      for (int q = 0; q < (FAST ? BN * CPR / NTH : 1); q++)
        cp_async16(sb + q * (NTH / CPR) * stride, Ag + q * NTH * 16);
    } else {
      const unsigned char *Ag = (const unsigned char *)A + (size_t)t * BN * rowbytes;
      int rr = rr0, cc = cc0;
      while (rr < BN) {
        cp_async16(base + rr * stride + cc * 16, Ag + (size_t)rr * rowbytes + cc * 16);
        rr += drr;
        cc += dcc;
        if (cc >= cpr) {
          cc -= cpr;
          rr++;
        }
      }
    }
    if (tid < BN / 4) cp_async16(base + BN * stride + tid * 16, hb + (size_t)t * BN + tid * 4);
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < ntiles) load_tile(s, s);
    cp_async_commit();
  }

  float best[MT][2];
  int bidx[MT][2];
#pragma unroll
  for (int mi = 0; mi < MT; mi++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      best[mi][h] = INFINITY;
      bidx[mi][h] = 0;
    }
  const uint32_t b_off = (uint32_t)(((lane >> 4) * 8 + (lane & 7)) * stride + ((lane >> 3) & 1) * 16);
  int cstage = 0, fstage = STAGES - 1; /* the stage computed now, the stage refilled now */
  for (int t = 0; t < ntiles; t++) {
    cp_async_wait<STAGES - 2>(); /* this thread's part of tile t has landed */
    __syncthreads();             /* everyone's part; and tile t - 1's stage is free */
    if (t + STAGES - 1 < ntiles) load_tile(t + STAGES - 1, fstage);
    cp_async_commit();
    fstage = fstage + 1 == STAGES ? 0 : fstage + 1;
    const uint32_t tb = s_base + cstage * stage_bytes;
    const float *bias_s = (const float *)(smem + cstage * stage_bytes + BN * stride);
    cstage = cstage + 1 == STAGES ? 0 : cstage + 1;
    float acc[MT][NT][4];
#pragma unroll
    for (int ni = 0; ni < NT; ni++) {
      const float2 bb = *(const float2 *)(bias_s + ni * 8 + 2 * tq);
#pragma unroll
      for (int mi = 0; mi < MT; mi++) {
        acc[mi][ni][0] = bb.x;
        acc[mi][ni][1] = bb.y;
        acc[mi][ni][2] = bb.x;
        acc[mi][ni][3] = bb.y;
      }
    }
    /* B fragments double buffered: step ks + 1's ldmatrix in flight during step ks's products */
    uint32_t bf[2][NT][2];
    auto load_b = [&](int ks, int buf) {
#pragma unroll
      for (int nj = 0; nj < NT / 2; nj++)
        ldsm_x4(tb + b_off + nj * 16 * stride + ks * 32, bf[buf][2 * nj][0], bf[buf][2 * nj][1], bf[buf][2 * nj + 1][0],
                bf[buf][2 * nj + 1][1]);
    };
    load_b(0, 0);
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
      if (ks + 1 < KS) load_b(ks + 1, (ks + 1) & 1);
#pragma unroll
      for (int mi = 0; mi < MT; mi++)
#pragma unroll
        for (int ni = 0; ni < NT; ni++) Mma<T>::run(acc[mi][ni], af[mi][ks], bf[ks & 1][ni]);
    }
    /* epilogue: the tile's smallest per row, then (when it improves) its first column */
    const int colbase = t * BN + 2 * tq;
#pragma unroll
    for (int mi = 0; mi < MT; mi++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        float m = acc[mi][0][2 * h];
#pragma unroll
        for (int ni = 0; ni < NT; ni++) m = fminf(m, fminf(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]));
        if (m < best[mi][h]) {
          int jj = 0;
#pragma unroll
          for (int ni = NT - 1; ni >= 0; ni--) {
            if (acc[mi][ni][2 * h + 1] == m) jj = colbase + ni * 8 + 1;
            if (acc[mi][ni][2 * h] == m) jj = colbase + ni * 8;
          }
          best[mi][h] = m;
          bidx[mi][h] = jj;
        }
      }
  }
  /* the quad (4 threads) sharing a row, ties to the lowest anchor; then a[] and the changed count */
  unsigned changed = 0;
#pragma unroll
  for (int mi = 0; mi < MT; mi++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      float bv = best[mi][h];
      int bi = bidx[mi][h];
#pragma unroll
      for (int o = 1; o <= 2; o <<= 1)
        better_min(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
      const int64_t i = wrow0 + mi * 16 + h * 8 + g;
      if (tq == 0 && i < n) { /* rows past n are padding: computed, not written */
        changed += assign[i] != (uint32_t)bi;
        assign[i] = (uint32_t)bi;
      }
    }
  changed = __reduce_add_sync(0xffffffffu, changed);
  if (lane == 0 && changed) atomicAdd(counter, (unsigned long long)changed);
}

/* --- r after the argmin ------------------------------------------------------------------------------
 * r[i] = the exact distance from row i to its anchor a[i], in double as va_row_distance, from the rows
 * as stored and the float32 anchors (both zero padded to dp: the padding adds 0). One warp per RPW
 * rows: per step each lane loads four elements of each of its RPW rows and of their anchors (all in
 * flight together), accumulates them in double in order, and the warp's sums are reduced by butterfly
 * shuffles. */
static const int R_RPW = 4;
template <typename T>
__global__ void __launch_bounds__(THREADS)
    r_rows_kernel(const T *__restrict__ X, const float *__restrict__ A32, const uint32_t *__restrict__ assign,
                  int64_t n, int dp, int cosine, float *__restrict__ r) {
  const int lane = threadIdx.x & 31;
  const int64_t i0 = ((int64_t)blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5)) * R_RPW;
  if (i0 >= n) return; /* whole warps */
  const T *xr[R_RPW];
  int64_t i[R_RPW];
  double s[R_RPW];
#pragma unroll
  for (int u = 0; u < R_RPW; u++) {
    i[u] = i0 + u < n ? i0 + u : n - 1; /* past n: a duplicate, computed, not written */
    xr[u] = X + i[u] * dp;
    s[u] = 0;
  }
  /* the first step's row loads go out before a[] is read (the anchor rows' addresses wait for it), so
   * the two latencies overlap */
  const int q4 = dp >> 2;
  int q = lane;
  float4 xv[R_RPW];
  if (q < q4)
#pragma unroll
    for (int u = 0; u < R_RPW; u++) xv[u] = row_load4<true>(xr[u] + 4 * q);
  uint32_t j[R_RPW];
#pragma unroll
  for (int u = 0; u < R_RPW; u++) j[u] = assign[i[u]];
  for (;;) {
    if (q < q4) {
      float4 av[R_RPW];
#pragma unroll
      for (int u = 0; u < R_RPW; u++) av[u] = __ldg((const float4 *)(A32 + (int64_t)j[u] * dp) + q);
#pragma unroll
      for (int u = 0; u < R_RPW; u++) s[u] = dist_acc4(xv[u], av[u], cosine, s[u]);
    }
    q += 32;
    if (q - lane >= q4) break;
    if (q < q4)
#pragma unroll
      for (int u = 0; u < R_RPW; u++) xv[u] = row_load4<true>(xr[u] + 4 * q);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int u = 0; u < R_RPW; u++) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
  if (lane == 0)
#pragma unroll
    for (int u = 0; u < R_RPW; u++) {
      if (i0 + u >= n) break;
      double v = s[u];
      if (cosine) {
        v = 1.0 - v;
        v = v > 0 ? v : 0;
      }
      r[i0 + u] = (float)v;
    }
}

static void launch_r(va_cuda_t *c, const va_cuda_rows_t *v, int cosine) {
  const int64_t per_block = (THREADS / 32) * R_RPW;
  unsigned blocks = (unsigned)((v->n + per_block - 1) / per_block);
  va_cuda_with_rows(c, v, [&](auto X) {
    r_rows_kernel<<<blocks, THREADS, 0, c->stream>>>(X, c->A32, c->assign + v->row0, v->n, (int)c->dp, cosine,
                                                     c->r + v->row0);
  });
  VA_LAUNCHED();
}

/* --- configurations -----------------------------------------------------------------------------------
 *   1: rows in shared memory, 128x64 (warps 4x2, warp tile 32x32), one block per SM; any d whose tiles
 *      fit (up to 192 tf32 / 416 16-bit at 227 KB).
 *   2: rows in registers (d up to 128): 128 rows x 64 anchors (fp16/bf16) or 32 (tf32), 4 warps, two
 *      blocks per SM (MT 2; KSMAX 8 16-bit, 16 tf32).
 *   3: wgmma (sm_90 only; rows up to 768 bytes: 16-bit d up to 384, tf32 d 32, 64 and 128;
 *      cuda_assign_wgmma.cu says which row lengths take which form): rows held in shared memory or
 *      registers, anchors in tiles of 128 or 64.
 *   4: TMA (sm_90 only, any d): rows and anchors both stream through shared memory in 128-byte columns,
 *      128 rows x 256 anchors a block; on sm_90 the automatic choice for every row 3 does not take. */
#define RX16 2, 8, 8, 4, 4, 2
#define RX32 2, 4, 16, 4, 4, 2

template <int MT, int NT, int KSMAX, int WARPS, int STAGES, int MINB>
static bool rx_fits(const va_cuda_t *c, size_t es) {
  if ((size_t)c->dp * es > (size_t)KSMAX * 32) return false;
  size_t sm = rx_smem<NT, KSMAX, STAGES>(); /* the larger of the two instances (KSMAX, KSMAX / 2 steps) */
  return sm <= (size_t)c->prop.sharedMemPerBlockOptin &&
         MINB * (sm + 1024) <= (size_t)c->prop.sharedMemPerMultiprocessor;
}

static bool fused_fits(const va_cuda_t *c, int cfg) {
  const size_t es = c->precision == VA_CUDA_TF32 ? 4 : 2, lim = (size_t)c->prop.sharedMemPerBlockOptin;
  switch (cfg) {
  case 1: return fused_smem<128, 64, 2>(c->dp, es) <= lim;
  case 2: return es == 4 ? rx_fits<RX32>(c, es) : rx_fits<RX16>(c, es);
  case 3: { /* sm_90a code runs on compute capability 9.0 alone */
    const size_t sm = va_wgmma_smem(c->precision, c->dp);
    return c->prop.major == 9 && c->prop.minor == 0 && sm > 0 && sm <= lim;
  }
  case 4: {
    const size_t sm = va_tma_smem(c->precision, c->dp);
    return c->prop.major == 9 && c->prop.minor == 0 && sm > 0 && sm <= lim;
  }
  }
  return false;
}

int va_cuda_fused_config(const va_cuda_t *c) {
  if (c->precision == VA_CUDA_FP32 || c->prop.major < 8) return 0;
  if (c->fused_force) return fused_fits(c, c->fused_force) ? c->fused_force : 0;
  /* fastest first (docs/performance.md): on sm_90 wgmma where it applies, else the TMA kernel (faster than
   * 1 and 2 at every d either takes); before sm_90 the rows in registers (d up to 128), beyond that the
   * rows in shared memory */
  static const int order[] = {3, 4, 2, 1};
  for (int q = 0; q < (int)(sizeof order / sizeof order[0]); q++)
    if (fused_fits(c, order[q])) return order[q];
  return 0;
}

/* Anchor slices of the TMA kernel for a launch over n rows: each block reads its 128 rows once per 256-anchor
 * tile, from L2 while the row blocks of all SMs fit there beside the anchors, else from DRAM again for every tile.
 * Two blocks per row block, each scanning half the tiles, halve the rows live at once: taken where the rows exceed
 * three quarters of the L2 (docs/performance.md, "Anchor slices"). Argmin kernel alone, one NVIDIA H200 and one
 * NVIDIA H100 80GB HBM3: two slices gained 4-13% at 16-bit d 1536 and tf32 d 768 and 1024 on both, and at tf32
 * d 1536 and every d 3072 on the H200; on the H100 tf32 d 1536 was equal and d 3072 within 2% either way. Rows
 * that fit lost 4-10% split (16-bit d 768 and 1024). Four slices gained up to 3% more at d 3072 on the H200 but
 * lost 7-51% there on the H100 (tf32 57.3 ms against 38.0 unsplit). */
int va_cuda_tma_splits(const va_cuda_t *c, int64_t n) {
  const int64_t tiles = (c->k + VA_TMA_TILE_ANCHORS - 1) / VA_TMA_TILE_ANCHORS;
  int64_t s = c->tma_splits_force;
  if (s <= 0) {
    const int64_t blocks = (n + 127) / 128, sms = c->prop.multiProcessorCount;
    const int64_t es = c->precision == VA_CUDA_TF32 ? 4 : 2, budget = (int64_t)c->prop.l2CacheSize / 4 * 3;
    const int64_t live = (blocks < sms ? blocks : sms) * 128 * c->dp * es;
    s = budget > 0 && live > budget ? 2 : 1;
  }
  if (s > tiles) s = tiles;
  return s < 1 ? 1 : (int)s;
}

static void tma_argmin(va_cuda_t *c, const va_cuda_rows_t *v, const void *X, const void *A, int cosine) {
  const int splits = va_cuda_tma_splits(c, v->n);
  if (splits > 1 && !c->tma_merged) {
    const int64_t blocks = (c->view_rows + 127) / 128;
    dalloc(&c->tma_merged, (size_t)c->view_rows * 8, "the TMA kernel's merge keys");
    dalloc(&c->tma_tickets, (size_t)blocks * 4, "the TMA kernel's tickets");
    VA_CUDA(cudaMemsetAsync(c->tma_merged, 0xff, (size_t)c->view_rows * 8, c->stream));
    VA_CUDA(cudaMemsetAsync(c->tma_tickets, 0, (size_t)blocks * 4, c->stream));
  }
  VA_CUDA(va_tma_argmin(c->precision, X, A, cosine ? c->bias_cos : c->bias_l2, v->n, c->dp, c->k, splits,
                        c->assign + v->row0, c->counter, c->tma_merged, c->tma_tickets, c->stream));
}

template <typename T, int BM, int BN, int WM, int WN>
static void launch_fused(va_cuda_t *c, const va_cuda_rows_t *v, const void *X, const void *A, int cosine) {
  size_t smem = fused_smem<BM, BN, WN>(c->dp, sizeof(T));
  auto kern = fused_assign_kernel<T, BM, BN, WM, WN>;
  VA_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int ntiles = (int)((c->k + BN - 1) / BN); /* anchors past k (to k_cap) are padding with hb = +inf */
  unsigned blocks = (unsigned)((v->n + BM - 1) / BM);
  kern<<<blocks, THREADS, smem, c->stream>>>((const T *)X, (const T *)A, cosine ? c->bias_cos : c->bias_l2, v->n,
                                             (int)c->dp, ntiles, c->assign + v->row0, c->counter);
  VA_LAUNCHED();
}

/* d in (KSMAX / 2, KSMAX] steps: the KSMAX instance; up to KSMAX / 2: the half one */
template <typename T, int MT, int NT, int KSMAX, int WARPS, int STAGES, int MINB>
static void launch_rx(va_cuda_t *c, const va_cuda_rows_t *v, const void *X, const void *A, int cosine) {
  constexpr int BM = WARPS * 16 * MT, BN = NT * 8, KSH = KSMAX / 2;
  static_assert(VA_CUDA_ROWPAD % BM == 0 && VA_CUDA_KPAD % BN == 0 && KSH % 2 == 0, "padding");
  const bool half = (size_t)c->dp * sizeof(T) <= (size_t)KSH * 32;
  size_t smem = half ? rx_smem<NT, KSH, STAGES>() : rx_smem<NT, KSMAX, STAGES>();
  auto kern = half ? fused_rx_kernel<T, MT, NT, KSH, WARPS, STAGES, MINB>
                   : fused_rx_kernel<T, MT, NT, KSMAX, WARPS, STAGES, MINB>;
  VA_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int ntiles = (int)((c->k + BN - 1) / BN);
  unsigned blocks = (unsigned)((v->n + BM - 1) / BM);
  kern<<<blocks, WARPS * 32, smem, c->stream>>>((const T *)X, (const T *)A, cosine ? c->bias_cos : c->bias_l2, v->n,
                                                (int)c->dp, ntiles, c->assign + v->row0, c->counter);
  VA_LAUNCHED();
}

template <typename T>
static void fused_dispatch(va_cuda_t *c, const va_cuda_rows_t *v, const void *X, const void *A, int cosine) {
  constexpr bool F32 = sizeof(T) == 4;
  switch (c->fused_cfg) {
  case 1: launch_fused<T, 128, 64, 4, 2>(c, v, X, A, cosine); break;
  case 2:
    if constexpr (F32) launch_rx<T, RX32>(c, v, X, A, cosine);
    else launch_rx<T, RX16>(c, v, X, A, cosine);
    break;
  case 3:
    VA_CUDA(va_wgmma_argmin(c->precision, X, A, cosine ? c->bias_cos : c->bias_l2, v->n, c->dp, c->k,
                            c->assign + v->row0, c->counter, c->prop.multiProcessorCount, c->stream));
    break;
  case 4: tma_argmin(c, v, X, A, cosine); break;
  default: VA_FATAL("no fused kernel configuration for this shape");
  }
}

void va_cuda_assign_launch(va_cuda_t *c, const va_cuda_rows_t *v, int cosine, int variant, int part) {
  if (variant == VA_CUDA_ASSIGN_GEMM || part == VA_ASSIGN_PART_PRODUCTS) {
    gemm_assign(c, v, cosine, part == VA_ASSIGN_PART_PRODUCTS);
    return;
  }
  if (variant == VA_CUDA_ASSIGN_DIRECT) {
    direct_assign(c, v, cosine);
    return;
  }
  if (part != VA_ASSIGN_PART_R) switch (c->precision) {
    case VA_CUDA_TF32: fused_dispatch<float>(c, v, v->X32, c->A32, cosine); break;
    case VA_CUDA_FP16: fused_dispatch<__half>(c, v, v->Xlp, c->Alp, cosine); break;
    case VA_CUDA_BF16: fused_dispatch<__nv_bfloat16>(c, v, v->Xlp, c->Alp, cosine); break;
    default: VA_FATAL("no fused kernel for fp32 products");
    }
  if (part != VA_ASSIGN_PART_ARGMIN) launch_r(c, v, cosine);
}

void va_cuda_check_ready(va_cuda_t *c) {
  if (c->k <= 0) VA_FATAL("va_cuda_assign before va_cuda_set_anchors");
}

void va_cuda_assign_rows(va_cuda_t *c, const va_cuda_rows_t *v, void *arg) {
  const assign_args *a = (const assign_args *)arg;
  va_cuda_assign_launch(c, v, a->cosine, a->variant, a->part);
}

/* The fp16 overflow flag (set by the conversions of rows and anchors; streamed rows are converted
 * during the pass) queued behind the pass's own copies, then the wait for all of them: a pass that met
 * one stops the job at its end. */
static void wait_checking_fp16_range(va_cuda_t *c) {
  VA_CUDA(cudaMemcpyAsync(c->h_counter + 1, c->overflow, sizeof(int), cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  if (c->precision == VA_CUDA_FP16 && *(const int *)(c->h_counter + 1))
    VA_FATAL("a row or anchor value exceeds the fp16 range (|x| > 65504): use bf16 or tf32 products");
}

extern "C" int64_t va_cuda_assign(va_cuda_t *c, int cosine) {
  c->count_pending = c->r_pending = 0;
  c->cosine_last = cosine;
  if (c->n <= 0) return 0;
  va_cuda_enter(c);
  va_cuda_check_ready(c);
  VA_CUDA(cudaMemsetAsync(c->counter, 0, sizeof(unsigned long long), c->stream));
  assign_args a = {cosine, va_cuda_assign_variant(c), VA_ASSIGN_PART_ALL};
  va_cuda_each_rows(c, va_cuda_assign_rows, &a);
  VA_CUDA(cudaMemcpyAsync(c->h_counter, c->counter, sizeof(unsigned long long), cudaMemcpyDeviceToHost, c->stream));
  wait_checking_fp16_range(c);
  return (int64_t)c->h_counter[0];
}

/* Rows rows[0..m) of X (dp elements each, as stored) into out, rows m..mpad zero: the padding the
 * assign kernels read past the last row. 16 bytes a thread (dp elements are a multiple of 64 bytes). */
template <typename T>
__global__ void gather_stored_kernel(const T *__restrict__ X, int64_t dp, const int64_t *__restrict__ rows, int64_t m,
                                     int64_t mpad, T *__restrict__ out) {
  const int64_t per_row = dp * (int64_t)sizeof(T) / 16;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < mpad * per_row;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t q = e / per_row, w = e % per_row;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (q < m) v = reinterpret_cast<const uint4 *>(X + rows[q] * dp)[w];
    reinterpret_cast<uint4 *>(out + q * dp)[w] = v;
  }
}

template <typename T>
static void gather_stored(va_cuda_t *c, const T *X, const int64_t *drows, int64_t m, int64_t mpad, void *out) {
  const int64_t words = mpad * c->dp * (int64_t)sizeof(T) / 16;
  const int blocks = (int)(words / 256 + 1 < 65535 ? words / 256 + 1 : 65535);
  gather_stored_kernel<T><<<blocks, 256, 0, c->stream>>>(X, c->dp, drows, m, mpad, (T *)out);
  VA_LAUNCHED();
}

extern "C" int va_cuda_assign_listed(va_cuda_t *c, int cosine, const int64_t *local_rows, int64_t m, uint32_t *a,
                                     float *r) {
  if (c->chunk_rows || m <= 0 || m > c->n / 4) return 0;
  for (int64_t q = 0; q < m; q++)
    if (local_rows[q] < 0 || local_rows[q] >= c->n)
      VA_FATAL("va_cuda_assign_listed: local row %lld outside [0, %lld)", (long long)local_rows[q], (long long)c->n);
  va_cuda_enter(c);
  va_cuda_check_ready(c);
  if (c->defer_convert) VA_FATAL("va_cuda_assign_listed before va_cuda_finish_rows");
  const int64_t mpad = VA_ROUND_UP(m, VA_CUDA_ROWPAD);
  const size_t es = c->precision == VA_CUDA_FP16 || c->precision == VA_CUDA_BF16 ? 2 : 4;
  /* one allocation, freed before returning (a handful of calls a job: kmeans||'s passes), cut into the
   * row list, the gathered rows, their anchors, distances and changed count; every part starts on a
   * 256-byte boundary (the rows: 16-byte loads, dp elements a multiple of 64 bytes) */
  const size_t rows_b = VA_ROUND_UP((size_t)m * 8, 256), x_b = VA_ROUND_UP((size_t)(mpad * c->dp) * es, 256),
               ar_b = VA_ROUND_UP((size_t)mpad * 4, 256);
  unsigned char *buf = NULL;
  dalloc(&buf, rows_b + x_b + 2 * ar_b + sizeof(unsigned long long), "the listed rows' pass");
  int64_t *drows = (int64_t *)buf;
  void *dX = buf + rows_b;
  uint32_t *da = (uint32_t *)(buf + rows_b + x_b);
  float *dr = (float *)(buf + rows_b + x_b + ar_b);
  unsigned long long *dcount = (unsigned long long *)(buf + rows_b + x_b + 2 * ar_b);
  VA_CUDA(cudaMemcpyAsync(drows, local_rows, (size_t)m * 8, cudaMemcpyHostToDevice, c->stream));
  VA_CUDA(cudaMemsetAsync(da, 0, (size_t)mpad * 4, c->stream)); /* the changed count reads it: defined, unused */
  const va_cuda_rows_t all = va_cuda_resident_rows(c);
  va_cuda_with_rows(c, &all, [&](auto X) { gather_stored(c, X, drows, m, mpad, dX); });
  /* The pass writes a[], r[] and the count through the context's pointers: pointed at the listed rows'
   * own arrays for this pass, so the rows' own a[] and r[] and a pending count are left as they were. */
  uint32_t *keep_a = c->assign;
  float *keep_r = c->r;
  unsigned long long *keep_count = c->counter;
  c->assign = da;
  c->r = dr;
  c->counter = dcount;
  const va_cuda_rows_t v = {es == 4 ? (const float *)dX : NULL, es == 2 ? dX : NULL, 0, m};
  va_cuda_assign_launch(c, &v, cosine, va_cuda_assign_variant(c), VA_ASSIGN_PART_ALL);
  c->assign = keep_a;
  c->r = keep_r;
  c->counter = keep_count;
  VA_CUDA(cudaMemcpyAsync(a, da, (size_t)m * 4, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaMemcpyAsync(r, dr, (size_t)m * 4, cudaMemcpyDeviceToHost, c->stream));
  wait_checking_fp16_range(c);
  dfree(&buf);
  return 1;
}

static void deferred_pass(va_cuda_t *c, int want_r) {
  const int variant = va_cuda_assign_variant(c);
  const int part = variant == VA_CUDA_ASSIGN_FUSED && !want_r ? VA_ASSIGN_PART_ARGMIN : VA_ASSIGN_PART_ALL;
  assign_args a = {c->cosine_last, variant, part};
  va_cuda_each_rows(c, va_cuda_assign_rows, &a);
  c->r_pending = part == VA_ASSIGN_PART_ARGMIN;
}

/* No wait: the count goes into the next statistics call (put_count_kernel), r into its pass or
 * va_cuda_ensure_r; the fp16 overflow flag comes back with the statistics' scalars. Streamed rows
 * without want_r: the pass itself is left to the statistics pass (assign_owed). */
extern "C" void va_cuda_assign_deferred(va_cuda_t *c, int cosine, int want_r) {
  va_cuda_enter(c);
  VA_CUDA(cudaMemsetAsync(c->counter, 0, sizeof(unsigned long long), c->stream));
  c->count_pending = 1;
  c->r_pending = 0;
  c->cosine_last = cosine;
  if (c->n <= 0) return;
  va_cuda_check_ready(c);
  if (c->chunk_rows && !want_r) c->assign_owed = 1;
  else deferred_pass(c, want_r);
}

void va_cuda_settle_assign(va_cuda_t *c) {
  if (!c->assign_owed) return;
  c->assign_owed = 0;
  deferred_pass(c, 0);
}

void va_cuda_ensure_r(va_cuda_t *c) {
  if (!c->r_pending) return;
  c->r_pending = 0;
  assign_args a = {c->cosine_last, VA_CUDA_ASSIGN_FUSED, VA_ASSIGN_PART_R};
  va_cuda_each_rows(c, va_cuda_assign_rows, &a);
}
