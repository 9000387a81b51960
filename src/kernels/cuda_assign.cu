/* cuda_assign.cu: the assign pass on the device, two ways.
 *  GEMM:  cuBLAS products of a chunk of rows by all anchors (chunk x k floats of scratch, never n x k),
 *         then one warp per row scans its k values for the argmin and recomputes r exactly.
 *  FUSED: one kernel: a block keeps 128 rows in shared memory, streams the anchors through in tiles
 *         (cp.async, double buffered), multiplies on the tensor cores (mma.sync: tf32 m16n8k8, or
 *         fp16/bf16 m16n8k16; fp32 accumulate), keeps the running argmin in registers (the distances
 *         are never written), then recomputes r for the winner in double.
 * Both rank by s * (x . a) - bias with s = 2, bias = ||a||^2 (l2) or s = 1, bias = 0 (cosine), i.e. the
 * largest wins; ties go to the lowest anchor; padding anchors carry bias = +inf. */
#include <math.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda_internal.cuh"

static const int THREADS = 256;

/* r for anchor j of row x: the exact distance in double, as va_row_distance; one warp, the sum
 * reduced by butterfly shuffles (a fixed order). */
__device__ __forceinline__ float row_distance_warp(const float *__restrict__ x, const float *__restrict__ a, int d,
                                                   int cosine, int lane) {
  double s = 0;
  if (cosine)
    for (int t = lane; t < d; t += 32) s += (double)x[t] * (double)a[t];
  else
    for (int t = lane; t < d; t += 32) {
      double df = (double)x[t] - (double)a[t];
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
  if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
}

/* --- GEMM path ----------------------------------------------------------------------------------- */
/* Rows [row0, row0 + rows): C (rows x kp, row-major) holds x . a. One warp per row. */
__global__ void __launch_bounds__(THREADS)
argmin_rows_kernel(const float *__restrict__ C, int64_t kp, const float *__restrict__ hb,
                   int64_t row0, int64_t rows, const float *__restrict__ X32, const float *__restrict__ A32,
                   int64_t dp, int d, int cosine, uint32_t *__restrict__ assign, float *__restrict__ r,
                   unsigned long long *counter) {
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
      if (v0 > best) { best = v0; bi = j; }
      if (v1 > best) { best = v1; bi = j + 1; }
      if (v2 > best) { best = v2; bi = j + 2; }
      if (v3 > best) { best = v3; bi = j + 3; }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) better(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
    int64_t i = row0 + ii;
    float rv = row_distance_warp(X32 + i * dp, A32 + (int64_t)bi * dp, d, cosine, lane);
    if (lane == 0) {
      r[i] = rv;
      changed = assign[i] != (uint32_t)bi;
      assign[i] = (uint32_t)bi;
    }
  }
  /* one atomic per block */
  __shared__ unsigned wsum[THREADS / 32];
  if (lane == 0) wsum[threadIdx.x >> 5] = changed;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned s = 0;
    for (int w = 0; w < THREADS / 32; w++) s += wsum[w];
    if (s) atomicAdd(counter, (unsigned long long)s);
  }
}

extern "C" void va_cuda_set_gemm_rows(va_cuda_t *c, int64_t rows) { c->gemm_rows = rows; }

static int64_t gemm_chunk(const va_cuda_t *c) {
  /* about 128 MB of scratch, or as asked: fewer, larger products pay more than keeping the scratch in
   * L2 (H200, k 1024, fp16: 4096-row chunks 5.5 ms, 16384 4.9, 65536 4.4; docs/CUDA.md) */
  int64_t ch = c->gemm_rows > 0 ? c->gemm_rows : ((int64_t)32 << 20) / c->k_cap;
  ch = ch / VA_CUDA_ROWPAD * VA_CUDA_ROWPAD;
  if (ch < VA_CUDA_ROWPAD) ch = VA_CUDA_ROWPAD;
  if (ch > c->npad) ch = c->npad;
  return ch;
}

static void gemm_assign(va_cuda_t *c, int cosine, int gemm_only) {
  int64_t kp = VA_ROUND_UP(c->k, 128);
  int64_t chunk = gemm_chunk(c);
  if (!c->C || c->C_cap < chunk * c->k_cap) {
    if (c->C) VA_CUDA(cudaFree(c->C));
    c->C = NULL;
    c->C_cap = chunk * c->k_cap;
    VA_CUDA(cudaMalloc((void **)&c->C, (size_t)c->C_cap * 4));
  }
  const float one = 1.0f, zero = 0.0f;
  const void *Ap = c->A32, *Xp = c->X32;
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t comp = CUBLAS_COMPUTE_32F;
  size_t es = 4;
  if (c->precision == VA_CUDA_TF32) comp = CUBLAS_COMPUTE_32F_FAST_TF32;
  if (c->precision >= VA_CUDA_FP16) {
    Ap = c->Alp;
    Xp = c->Xlp;
    es = 2;
    type = c->precision == VA_CUDA_FP16 ? CUDA_R_16F : CUDA_R_16BF;
  }
  const float *hb = cosine ? c->bias_cos : c->bias_l2;
  for (int64_t r0 = 0; r0 < c->n; r0 += chunk) {
    int64_t rows = c->n - r0 < chunk ? c->n - r0 : chunk;
    /* column-major view: C^T (kp x rows) = A (kp x dp, stored row-major = op T) * X^T (dp x rows) */
    VA_CUBLAS(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)kp, (int)rows, (int)c->dp, &one, Ap, type,
                           (int)c->dp, (const char *)Xp + (size_t)r0 * (size_t)c->dp * es, type, (int)c->dp, &zero,
                           c->C, CUDA_R_32F, (int)kp, comp, CUBLAS_GEMM_DEFAULT));
    if (gemm_only) continue;
    int64_t blocks = (rows + THREADS / 32 - 1) / (THREADS / 32);
    argmin_rows_kernel<<<(unsigned)blocks, THREADS, 0, c->stream>>>(c->C, kp, hb, r0, rows, c->X32, c->A32,
                                                                   c->dp, (int)c->d, cosine, c->assign, c->r, c->counter);
    VA_LAUNCHED();
  }
}

/* --- FUSED path ---------------------------------------------------------------------------------- */
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void cp_async16(uint32_t saddr, const void *g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(saddr), "l"(g));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* One 32-byte k-step of a 16 x 8 output tile: fp16/bf16 m16n8k16, tf32 m16n8k8 (the fragments that
 * ldmatrix gives are laid out alike in bytes for both). */
template <typename T> struct Mma;
template <> struct Mma<__half> {
  static __device__ __forceinline__ void run(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <> struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <> struct Mma<float> { /* tf32: the hardware reads the top 19 bits of each float */
  static __device__ __forceinline__ void run(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

template <int BM, int BN, int WN> static size_t fused_smem(int64_t dp, size_t es) {
  size_t stride = (size_t)dp * es + 16;
  return (size_t)(BM + 2 * BN) * stride + (size_t)WN * BM * 8 + (size_t)BM * 4;
}

/* Block: BM rows x all anchors, 8 warps as WM x WN, warp tile (BM/WM) x (BN/WN).
 * hb: the half bias (||a||^2 / 2, or 0 for cosine; +inf for padding). The accumulators start at -hb,
 * so the tensor cores leave x.a - hb, whose largest value is the nearest anchor: the epilogue is a
 * max per row and, when a row improves, the search for the first column that reached it. */
template <typename T, int BM, int BN, int WM, int WN, int MINB>
__global__ void __launch_bounds__(THREADS, MINB)
fused_assign_kernel(const T *__restrict__ X, const T *__restrict__ A, const float *__restrict__ hb,
                    const float *__restrict__ X32, const float *__restrict__ A32, int64_t n, int d, int dp, int ntiles,
                    int cosine, uint32_t *__restrict__ assign, float *__restrict__ r, unsigned long long *counter) {
  constexpr int WTM = BM / WM, WTN = BN / WN, MT = WTM / 16, NT = WTN / 8;
  static_assert(WM * WN == THREADS / 32, "8 warps");
  static_assert(MT >= 1 && NT >= 2 && NT % 2 == 0, "warp tile");
  extern __shared__ __align__(16) unsigned char smem[];
  const int rowbytes = dp * (int)sizeof(T), stride = rowbytes + 16, cpr = rowbytes / 16;
  unsigned char *Xs = smem;
  float *red_val = (float *)(smem + (size_t)(BM + 2 * BN) * stride);
  int *red_idx = (int *)(red_val + WN * BM);
  int *s_idx = red_idx + WN * BM;
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
      if (cc >= cpr) { cc -= cpr; rr++; }
    }
  };
  load_tile(0, 0);
  cp_async_commit();

  float best[MT][2];
  int bidx[MT][2];
#pragma unroll
  for (int mi = 0; mi < MT; mi++)
#pragma unroll
    for (int h = 0; h < 2; h++) { best[mi][h] = -INFINITY; bidx[mi][h] = 0; }

  const int KS = rowbytes / 32; /* even: dp is a multiple of 32 */
  const uint32_t a_off = (uint32_t)((wm * WTM + (lane & 15)) * stride + (lane >> 4) * 16);
  const uint32_t b_off = (uint32_t)((wn * WTN + (lane >> 4) * 8 + (lane & 7)) * stride + ((lane >> 3) & 1) * 16);
  /* the half bias of the next tile, loaded a tile ahead (not under a 128-register cap: it spills) */
  constexpr bool PREF = MINB == 1;
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
      float2 bb = PREF ? bnext[ni] : __ldg((const float2 *)(hb + colbase + ni * 8));
#pragma unroll
      for (int mi = 0; mi < MT; mi++) {
        acc[mi][ni][0] = -bb.x; acc[mi][ni][1] = -bb.y;
        acc[mi][ni][2] = -bb.x; acc[mi][ni][3] = -bb.y;
      }
    }
    if (PREF && t + 1 < ntiles)
#pragma unroll
      for (int ni = 0; ni < NT; ni++) bnext[ni] = __ldg((const float2 *)(hb + colbase + BN + ni * 8));
    __syncthreads();
    const uint32_t as_base = as_base0 + (t & 1) * BN * stride;
    /* fragments double buffered (MINB 1): the loads of step ks + 1 are in flight during the products of ks */
    uint32_t af[2][MT][4], bf[2][NT][2];
    auto load_frags = [&](int ks, int buf) {
#pragma unroll
      for (int mi = 0; mi < MT; mi++)
        ldsm_x4(xs_base + a_off + mi * 16 * stride + ks * 32, af[buf][mi][0], af[buf][mi][1], af[buf][mi][2], af[buf][mi][3]);
#pragma unroll
      for (int nj = 0; nj < NT / 2; nj++)
        ldsm_x4(as_base + b_off + nj * 16 * stride + ks * 32, bf[buf][2 * nj][0], bf[buf][2 * nj][1], bf[buf][2 * nj + 1][0],
                bf[buf][2 * nj + 1][1]);
    };
    auto products = [&](int buf) {
#pragma unroll
      for (int mi = 0; mi < MT; mi++)
#pragma unroll
        for (int ni = 0; ni < NT; ni++) Mma<T>::run(acc[mi][ni], af[buf][mi], bf[buf][ni]);
    };
    if (MINB == 1) { /* room for two fragment sets */
      load_frags(0, 0);
      for (int ks = 0; ks < KS; ks += 2) {
        load_frags(ks + 1, 1);
        products(0);
        if (ks + 2 < KS) load_frags(ks + 2, 0);
        products(1);
      }
    } else { /* under the 128-register cap one set, else it spills */
#pragma unroll 2
      for (int ks = 0; ks < KS; ks++) {
        load_frags(ks, 0);
        products(0);
      }
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
        better(best[mi][h], bidx[mi][h], __shfl_xor_sync(0xffffffffu, best[mi][h], o), __shfl_xor_sync(0xffffffffu, bidx[mi][h], o));
      if (tq == 0) {
        int row = wm * WTM + mi * 16 + h * 8 + g;
        red_val[wn * BM + row] = best[mi][h];
        red_idx[wn * BM + row] = bidx[mi][h];
      }
    }
  __syncthreads();
  for (int row = tid; row < BM; row += THREADS) {
    float bv = red_val[row];
    int bi = red_idx[row];
    for (int w = 1; w < WN; w++) better(bv, bi, red_val[w * BM + row], red_idx[w * BM + row]);
    s_idx[row] = bi;
  }
  __syncthreads();
  /* r for the winners, in double; each warp takes its rows four at a time so that the loads of four
   * rows are in flight together (rows past n are padding: computed, not written) */
  unsigned changed = 0;
  constexpr int RB = 4, WROWS = BM / (THREADS / 32);
  static_assert(WROWS % RB == 0, "rows per warp");
#pragma unroll 1
  for (int b0 = 0; b0 < WROWS; b0 += RB) {
    const float *xr[RB], *ar[RB];
    double s[RB];
#pragma unroll
    for (int u = 0; u < RB; u++) {
      int row = warp + (THREADS / 32) * (b0 + u);
      xr[u] = sizeof(T) == 4 ? (const float *)(Xs + (size_t)row * stride) : X32 + (row0 + row) * dp;
      ar[u] = A32 + (int64_t)s_idx[row] * dp;
      s[u] = 0;
    }
    for (int t2 = lane; t2 < d; t2 += 32) {
      float xv[RB], av[RB];
#pragma unroll
      for (int u = 0; u < RB; u++) { xv[u] = xr[u][t2]; av[u] = __ldg(ar[u] + t2); }
#pragma unroll
      for (int u = 0; u < RB; u++) {
        if (cosine) s[u] += (double)xv[u] * (double)av[u];
        else { double df = (double)xv[u] - (double)av[u]; s[u] += df * df; }
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int u = 0; u < RB; u++) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
    if (lane == 0) {
#pragma unroll
      for (int u = 0; u < RB; u++) {
        int row = warp + (THREADS / 32) * (b0 + u);
        int64_t i = row0 + row;
        if (i >= n) continue;
        double v = s[u];
        if (cosine) { v = 1.0 - v; v = v > 0 ? v : 0; }
        uint32_t j = (uint32_t)s_idx[row];
        r[i] = (float)v;
        changed += assign[i] != j;
        assign[i] = j;
      }
    }
  }
  if (lane == 0 && changed) atomicAdd(counter, (unsigned long long)changed);
}

/* Tile configurations (rows x anchors per block, warps M x N, min blocks per SM):
 *   1: 128x128, 2x4 (warp 64x32)   2: 128x64, 4x2 (32x32)   3, 4: as 1, 2 with two blocks per SM
 *   5: 256x128, 4x2 (warp 64x64)   6: 128x256, 2x4 (64x64) */
static size_t fused_cfg_smem(const va_cuda_t *c, int cfg) {
  size_t es = c->precision == VA_CUDA_TF32 ? 4 : 2;
  switch (cfg) {
  case 1: case 3: return fused_smem<128, 128, 4>(c->dp, es);
  case 2: case 4: return fused_smem<128, 64, 2>(c->dp, es);
  case 5: return fused_smem<256, 128, 2>(c->dp, es);
  case 6: return fused_smem<128, 256, 4>(c->dp, es);
  }
  return (size_t)1 << 40;
}
static bool fused_fits(const va_cuda_t *c, int cfg) {
  size_t sm = fused_cfg_smem(c, cfg), lim = (size_t)c->prop.sharedMemPerBlockOptin;
  if (cfg == 3 || cfg == 4) return 2 * (sm + 1024) <= (size_t)c->prop.sharedMemPerMultiprocessor && sm <= lim;
  return sm <= lim;
}

int va_cuda_fused_config(const va_cuda_t *c) {
  if (c->precision == VA_CUDA_FP32 || c->prop.major < 8) return 0;
  if (c->fused_force) return fused_fits(c, c->fused_force) ? c->fused_force : 0;
  /* fastest first, as measured on an H200 at n 1M, d 128, k 1024 (docs/CUDA.md): tf32 128x128 (2.79 ms)
   * before 128x64 (3.24); 16-bit 128x64 (1.99 ms) before 128x128 two per SM (2.13) and one per SM (2.98) */
  static const int order32[] = {1, 2}, order16[] = {2, 3, 1, 4};
  const int *order = c->precision == VA_CUDA_TF32 ? order32 : order16;
  int m = c->precision == VA_CUDA_TF32 ? 2 : 4;
  for (int q = 0; q < m; q++)
    if (fused_fits(c, order[q])) return order[q];
  return 0;
}

extern "C" int va_cuda_set_fused_config(va_cuda_t *c, int cfg) {
  c->fused_force = cfg;
  c->fused_cfg = va_cuda_fused_config(c);
  return c->fused_cfg;
}

template <typename T, int BM, int BN, int WM, int WN, int MINB>
static void launch_fused(va_cuda_t *c, const void *X, const void *A, int cosine) {
  size_t smem = fused_smem<BM, BN, WN>(c->dp, sizeof(T));
  auto kern = fused_assign_kernel<T, BM, BN, WM, WN, MINB>;
  VA_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int ntiles = (int)((c->k + BN - 1) / BN); /* anchors past k (to k_cap) are padding with hb = +inf */
  unsigned blocks = (unsigned)((c->n + BM - 1) / BM);
  kern<<<blocks, THREADS, smem, c->stream>>>((const T *)X, (const T *)A, cosine ? c->bias_cos : c->bias_l2, c->X32,
                                              c->A32, c->n, (int)c->d, (int)c->dp, ntiles, cosine, c->assign, c->r,
                                              c->counter);
  VA_LAUNCHED();
}

template <typename T> static void fused_dispatch(va_cuda_t *c, const void *X, const void *A, int cosine) {
  switch (c->fused_cfg) {
  case 1: launch_fused<T, 128, 128, 2, 4, 1>(c, X, A, cosine); break;
  case 2: launch_fused<T, 128, 64, 4, 2, 1>(c, X, A, cosine); break;
  case 3: launch_fused<T, 128, 128, 2, 4, 2>(c, X, A, cosine); break;
  case 4: launch_fused<T, 128, 64, 4, 2, 2>(c, X, A, cosine); break;
  case 5: launch_fused<T, 256, 128, 4, 2, 1>(c, X, A, cosine); break;
  case 6: launch_fused<T, 128, 256, 2, 4, 1>(c, X, A, cosine); break;
  default: VA_FATAL("no fused kernel configuration for this shape");
  }
}

void va_cuda_assign_launch(va_cuda_t *c, int cosine, int variant, int gemm_only) {
  if (variant == VA_CUDA_ASSIGN_GEMM || gemm_only) {
    gemm_assign(c, cosine, gemm_only);
    return;
  }
  switch (c->precision) {
  case VA_CUDA_TF32: fused_dispatch<float>(c, c->X32, c->A32, cosine); break;
  case VA_CUDA_FP16: fused_dispatch<__half>(c, c->Xlp, c->Alp, cosine); break;
  case VA_CUDA_BF16: fused_dispatch<__nv_bfloat16>(c, c->Xlp, c->Alp, cosine); break;
  default: VA_FATAL("no fused kernel for fp32 products");
  }
}

static void check_ready(va_cuda_t *c) {
  if (c->k <= 0) VA_FATAL("va_cuda_assign before va_cuda_set_anchors");
  if (c->precision == VA_CUDA_FP16) {
    int of = 0;
    VA_CUDA(cudaMemcpyAsync(&of, c->overflow, sizeof of, cudaMemcpyDeviceToHost, c->stream));
    VA_CUDA(cudaStreamSynchronize(c->stream));
    if (of) VA_FATAL("a row or anchor value exceeds the fp16 range (|x| > 65504): use bf16 or tf32 products");
  }
}

extern "C" int64_t va_cuda_assign(va_cuda_t *c, int cosine) {
  if (c->n <= 0) return 0;
  va_cuda_enter(c);
  check_ready(c);
  VA_CUDA(cudaMemsetAsync(c->counter, 0, sizeof(unsigned long long), c->stream));
  va_cuda_assign_launch(c, cosine, va_cuda_assign_variant(c), 0);
  VA_CUDA(cudaMemcpyAsync(c->h_counter, c->counter, sizeof(unsigned long long), cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  return (int64_t)*c->h_counter;
}

/* The tensor-core ceiling of mma.sync here: registers only, 8 independent accumulators per warp. */
template <typename T>
__global__ void __launch_bounds__(THREADS) mma_peak_kernel(float *out, int iters, uint32_t one) {
  uint32_t a[4] = {one, one, one, one}, b[2] = {one, one};
  float acc[8][4];
#pragma unroll
  for (int q = 0; q < 8; q++)
#pragma unroll
    for (int e = 0; e < 4; e++) acc[q][e] = 0;
  for (int it = 0; it < iters; it++)
#pragma unroll
    for (int q = 0; q < 8; q++) Mma<T>::run(acc[q], a, b);
  float s = 0;
#pragma unroll
  for (int q = 0; q < 8; q++) s += acc[q][0] + acc[q][1] + acc[q][2] + acc[q][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

extern "C" double va_cuda_bench_mma_peak(va_cuda_t *c, int precision, int blocks_per_sm) {
  va_cuda_enter(c);
  int blocks = c->prop.multiProcessorCount * blocks_per_sm, iters = 4096;
  float *out = NULL;
  VA_CUDA(cudaMalloc((void **)&out, (size_t)blocks * THREADS * 4));
  double flop_per = precision == VA_CUDA_TF32 ? 2.0 * 16 * 8 * 8 : 2.0 * 16 * 8 * 16;
  float best = 1e30f;
  for (int rep = 0; rep < 6; rep++) {
    VA_CUDA(cudaEventRecord(c->ev0, c->stream));
    if (precision == VA_CUDA_TF32) mma_peak_kernel<float><<<blocks, THREADS, 0, c->stream>>>(out, iters, 0x3F800000u);
    else if (precision == VA_CUDA_BF16) mma_peak_kernel<__nv_bfloat16><<<blocks, THREADS, 0, c->stream>>>(out, iters, 0x3F803F80u);
    else mma_peak_kernel<__half><<<blocks, THREADS, 0, c->stream>>>(out, iters, 0x3C003C00u);
    VA_LAUNCHED();
    VA_CUDA(cudaEventRecord(c->ev1, c->stream));
    VA_CUDA(cudaEventSynchronize(c->ev1));
    float ms = 0;
    VA_CUDA(cudaEventElapsedTime(&ms, c->ev0, c->ev1));
    if (rep > 0 && ms < best) best = ms;
  }
  VA_CUDA(cudaFree(out));
  double flops = (double)blocks * (THREADS / 32) * iters * 8 * flop_per;
  return flops / (best * 1e-3) / 1e12;
}

static double median_ms(std::vector<float> &v, double *min_ms) {
  std::sort(v.begin(), v.end());
  if (min_ms) *min_ms = v.empty() ? 0 : v[0];
  return v.empty() ? 0 : v[v.size() / 2];
}

extern "C" double va_cuda_bench_assign(va_cuda_t *c, int cosine, int warmup, int reps, int gemm_only, double *min_ms) {
  if (c->n <= 0) return 0;
  va_cuda_enter(c);
  check_ready(c);
  int variant = gemm_only ? VA_CUDA_ASSIGN_GEMM : va_cuda_assign_variant(c);
  for (int w = 0; w < warmup; w++) va_cuda_assign_launch(c, cosine, variant, gemm_only);
  std::vector<float> t;
  for (int rep = 0; rep < reps; rep++) {
    VA_CUDA(cudaEventRecord(c->ev0, c->stream));
    va_cuda_assign_launch(c, cosine, variant, gemm_only);
    VA_CUDA(cudaEventRecord(c->ev1, c->stream));
    VA_CUDA(cudaEventSynchronize(c->ev1));
    float ms = 0;
    VA_CUDA(cudaEventElapsedTime(&ms, c->ev0, c->ev1));
    t.push_back(ms);
  }
  return median_ms(t, min_ms);
}
