/* bert_cuda.cu: the BERT forward pass of bert_cpu.c on a GPU, same packed batch layout (sequences back
 * to back, no padding), the same operations:
 *   x = LN(word[id] + pos[p] + type0);  per layer: qkv = x Wqkv^T + b;  ctx = softmax(q k^T / sqrt(32)) v
 *   per sequence and head;  x = LN(x + ctx Wo^T + bo);  x = LN(x + GELU(x W1^T + b1) W2^T + b2)
 * then mean pooling and L2 normalisation.
 * Precision: weights and activations (the residual stream x, qkv, ctx, the FFN intermediate) in the
 * model precision, fp16/bf16 as PyTorch's half model holds them (or fp32); cuBLASLt, or in fp16/bf16 the
 * dense kernel here (VA_BERT_DENSE_MMA: no cuBLASLt in the process, whose first use costs a tenth of a
 * second), multiplies on tensor cores with fp32 accumulation and, in its epilogue, adds the bias and the
 * residual (x + ...) in fp32 and rounds once; LayerNorm, softmax and pooling compute in fp32 and round once on the way
 * out. (Not done on purpose: keeping the residual stream and the GEMM results feeding it in fp32, slower for accuracy
 * not needed; docs/performance.md.) GELU: in fp16/bf16 the FFN-in product's epilogue applies it before its one
 * rounding, in the tanh form 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))), which differs from the model's
 * erf GELU by at most 4.7e-4 and saves a pass over the 1536-wide intermediate (docs/embed.md gives both forms' accuracy
 * against sentence-transformers). fp32 keeps the model's erf GELU (gelu_kernel), the exact mode.
 * fp32 precision uses plain fp32 GEMMs (no TF32) and a CUDA-core attention kernel.
 * GEMM row counts are rounded up to a bucket (a multiple of 64 and of 1/16 of the count's power of two:
 * at most 6% padding; the extra rows hold stale finite data that never reaches a real row). cuBLASLt's algorithm is
 * chosen once per octave of buckets, at the octave's top: a heuristic query per bucket (about 64 buckets
 * x 4 layers on a length-sorted corpus) and the lazy load of each distinct kernel those queries name
 * cost more than the per-octave choice, which gives the same embeddings bit for bit on the benchmark
 * corpus (docs/performance.md). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <system_error> /* std::system_error: no thread to be had */
#include <thread>       /* std::thread: the weights' staging */
#include <type_traits>  /* std::is_same, std::integral_constant */
#include <vector>

#include "bert_cuda.h"
#include "cuda/async.cuh" /* cp_async16, cp_async_commit, cp_async_wait */
#include "cuda/blas.cuh"  /* va_blas */
#include "cuda/check.cuh" /* VA_CUDA, VA_CUBLAS, VA_LAUNCHED */
#include "cuda/elem.cuh"  /* elem_to_float, elem_from_float */

namespace {

constexpr int DH = 32;     /* head size the attention kernels are written for */
constexpr int ROWPAD = 64; /* GEMM rows are rounded up to this (and FFN slices are multiples of it) */
constexpr int ATT_THREADS = 128;
constexpr int ATT_WIDE_ABOVE = 128; /* batches with a longer line take the 64-key attention chunks */
constexpr int ROW_WARPS = 8;        /* warps per block of the LayerNorm kernels */

template <typename T>
struct pair_of;
template <>
struct pair_of<float> {
  using type = float2;
};
template <>
struct pair_of<__half> {
  using type = __half2;
};
template <>
struct pair_of<__nv_bfloat16> {
  using type = __nv_bfloat162;
};
template <typename T>
__device__ __forceinline__ float2 load2(const T *p) {
  typename pair_of<T>::type v = *reinterpret_cast<const typename pair_of<T>::type *>(p);
  return make_float2(elem_to_float(v.x), elem_to_float(v.y));
}
template <typename T>
__device__ __forceinline__ void store2(T *p, float a, float b) {
  typename pair_of<T>::type v;
  v.x = elem_from_float<T>(a);
  v.y = elem_from_float<T>(b);
  *reinterpret_cast<typename pair_of<T>::type *>(p) = v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* --- LayerNorm (one warp per token row; lane holds pairs 2 (lane + 32 i), i < NP = hidden / 64) ------ */
/* The row kernels are persistent: a grid of ln_grid blocks, each warp walking rows a grid's warps apart
 * with gamma and beta in registers for all its rows (read once, not once a row) and the next row's
 * values loaded while the current one is reduced. NP is a template argument (row_pairs picks it from
 * the hidden size) so that those arrays stay in registers. */
template <int NP>
struct ln_affine {
  float2 g[NP], b[NP];
  __device__ __forceinline__ void load(const float *gamma, const float *beta, int lane) {
#pragma unroll
    for (int i = 0; i < NP; i++) {
      g[i] = *reinterpret_cast<const float2 *>(gamma + 2 * (lane + 32 * i));
      b[i] = *reinterpret_cast<const float2 *>(beta + 2 * (lane + 32 * i));
    }
  }
};

/* Normalises the row in v (two-pass mean and variance in fp32, as bert_cpu.c) and writes it to x. */
template <typename T, int NP>
__device__ __forceinline__ void ln_store(const float (&v)[2 * NP], int lane, const ln_affine<NP> &a, float eps, T *x) {
  constexpr float H = 64 * NP;
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < NP; i++) s += v[2 * i] + v[2 * i + 1];
  const float mean = warp_sum(s) / H;
  float q = 0.f;
#pragma unroll
  for (int i = 0; i < NP; i++) {
    const float d0 = v[2 * i] - mean, d1 = v[2 * i + 1] - mean;
    q += d0 * d0 + d1 * d1;
  }
  const float inv = rsqrtf(warp_sum(q) / H + eps);
#pragma unroll
  for (int i = 0; i < NP; i++) {
    const float y0 = (v[2 * i] - mean) * inv * a.g[i].x + a.b[i].x;
    const float y1 = (v[2 * i + 1] - mean) * inv * a.g[i].y + a.b[i].y;
    store2(x + 2 * (lane + 32 * i), y0, y1);
  }
}

/* x = LN(word[id] + pos_type[position]) for the batch's T tokens (pos_type = position + token type 0). */
template <typename T, int NP>
__global__ void __launch_bounds__(ROW_WARPS * 32)
    embed_ln_kernel(const int32_t *__restrict__ ids, const int32_t *__restrict__ pos, int64_t ntok,
                    const T *__restrict__ word, const float *__restrict__ pos_type, const float *__restrict__ g,
                    const float *__restrict__ b, float eps, T *__restrict__ x) {
  constexpr int H = 64 * NP;
  const int lane = threadIdx.x & 31;
  const int64_t step = (int64_t)gridDim.x * ROW_WARPS;
  int64_t row = (int64_t)blockIdx.x * ROW_WARPS + (threadIdx.x >> 5);
  if (row >= ntok) return;
  ln_affine<NP> a;
  a.load(g, b, lane);
  for (; row < ntok; row += step) {
    const T *w = word + (int64_t)ids[row] * H;
    const float *p = pos_type + (int64_t)pos[row] * H;
    float v[2 * NP];
#pragma unroll
    for (int i = 0; i < NP; i++) {
      const int j = 2 * (lane + 32 * i);
      const float2 e = load2(w + j), c = *reinterpret_cast<const float2 *>(p + j);
      v[2 * i] = e.x + c.x;
      v[2 * i + 1] = e.y + c.y;
    }
    ln_store<T, NP>(v, lane, a, eps, x + row * H);
  }
}

/* x = LN(x) in place over rows [0, nrows) (the residual add is done by the GEMM before it, gemm_run). */
template <typename T, int NP>
__global__ void __launch_bounds__(ROW_WARPS * 32)
    ln_kernel(T *__restrict__ x, int64_t nrows, const float *__restrict__ g, const float *__restrict__ b, float eps) {
  using pair = typename pair_of<T>::type;
  constexpr int H = 64 * NP;
  const int lane = threadIdx.x & 31;
  const int64_t step = (int64_t)gridDim.x * ROW_WARPS;
  int64_t row = (int64_t)blockIdx.x * ROW_WARPS + (threadIdx.x >> 5);
  if (row >= nrows) return;
  ln_affine<NP> a;
  a.load(g, b, lane);
  pair next[NP];
#pragma unroll
  for (int i = 0; i < NP; i++) next[i] = reinterpret_cast<const pair *>(x + row * H)[lane + 32 * i];
  for (; row < nrows; row += step) {
    float v[2 * NP];
#pragma unroll
    for (int i = 0; i < NP; i++) {
      v[2 * i] = elem_to_float(next[i].x);
      v[2 * i + 1] = elem_to_float(next[i].y);
    }
    if (row + step < nrows) {
#pragma unroll
      for (int i = 0; i < NP; i++) next[i] = reinterpret_cast<const pair *>(x + (row + step) * H)[lane + 32 * i];
    }
    ln_store<T, NP>(v, lane, a, eps, x + row * H);
  }
}

/* The pair counts the row kernels are built for: hidden 128, 256, 384, 512, 768 and 1024 (checked at
 * create). call(np, f) calls f(std::integral_constant<int, np>). */
template <int... NP>
struct pair_counts {
  static bool has(int np) { return ((np == NP) || ...); }
  template <typename F>
  static void call(int np, F &&f) {
    ((np == NP ? (f(std::integral_constant<int, NP>{}), 0) : 0), ...);
  }
};
using row_pairs = pair_counts<2, 4, 6, 8, 12, 16>;

/* --- GELU (erf), in place, 16 bytes per thread and step (fp32 precision only: file comment) ---------- */
template <typename T>
__global__ void gelu_kernel(T *x, int64_t nvec) {
  constexpr int E = 16 / sizeof(T);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += (int64_t)gridDim.x * blockDim.x) {
    uint4 u = reinterpret_cast<uint4 *>(x)[i];
    T *e = reinterpret_cast<T *>(&u);
#pragma unroll
    for (int k = 0; k < E; k++) {
      const float v = elem_to_float(e[k]);
      e[k] = elem_from_float<T>(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
    }
    reinterpret_cast<uint4 *>(x)[i] = u;
  }
}

/* --- mean pooling + L2 normalisation (one block per sequence, two columns per thread) -------------- */
template <typename T>
__global__ void pool_kernel(const T *__restrict__ x, const int32_t *__restrict__ seqoff, int H,
                            float *__restrict__ out) {
  __shared__ float part[32];
  const int s = blockIdx.x, j = 2 * threadIdx.x;
  const int64_t a = seqoff[s], e = seqoff[s + 1];
  float s0 = 0.f, s1 = 0.f;
  for (int64_t t = a; t < e; t++) {
    const float2 v = load2(x + t * H + j);
    s0 += v.x;
    s1 += v.y;
  }
  const float invn = 1.0f / (float)(e - a);
  s0 *= invn;
  s1 *= invn;
  float q = warp_sum(s0 * s0 + s1 * s1);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = q;
  __syncthreads();
  if (threadIdx.x < 32) {
    q = threadIdx.x < (blockDim.x + 31) / 32 ? part[threadIdx.x] : 0.f;
    q = warp_sum(q);
    if (threadIdx.x == 0) part[0] = fmaxf(sqrtf(q), 1e-12f);
  }
  __syncthreads();
  const float nrm = part[0];
  *reinterpret_cast<float2 *>(out + (int64_t)s * H + j) = make_float2(s0 / nrm, s1 / nrm);
}

/* --- attention, fp16/bf16: tensor cores (mma.sync m16n8k16, fp32 accumulation) --------------------- */
/* One block per (sequence, head): the sequence's K and V go to shared memory row-major (rows padded to 40
 * elements, 80 bytes: the eight rows an ldmatrix reads fall in distinct banks), zero beyond the sequence's
 * n keys, by cp.async with all of them in flight at once (the kernel waits on memory more than it issues).
 * Each warp takes 16 query rows at a time and walks the keys 64 at a time (32 for a last rest of at
 * most 32) with an online softmax: K's fragments by ldmatrix, V's by ldmatrix.trans, the scores kept
 * unscaled (the max is taken on them) and the scale folded into the exponent, p = 2^(s c - m c) with
 * c = log2(e) / sqrt(32). Keys >= n (only in the last chunk) get -inf, so padding never gets weight.
 * Per score the softmax costs more issue slots than its two products (head size 32), so:
 *   - fp16 takes 2^x of a pair at once on the special-function unit (ex2.approx.f16x2), from the exponent
 *     rounded to fp16, straight into the P fragment that the P V product takes in fp16 anyway; bf16 keeps
 *     fp32 exponents (a bf16 exponent would carry 8 bits: 1.4% error at x = -10);
 *   - each row's sum of p is a fifth output block of the P V product, P times a column of ones, so the
 *     normaliser sums exactly the rounded p that weigh V, in fp32;
 *   - the running output is rescaled only when a row of the warp has a new maximum (otherwise the factor
 *     is exactly 1). */
__device__ __forceinline__ uint32_t ld32(const void *p) { return *reinterpret_cast<const uint32_t *>(p); }
template <typename T>
__device__ __forceinline__ uint32_t pack2(float a, float b);
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float a, float b) {
  __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<uint32_t *>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<uint32_t *>(&h);
}
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* ldmatrix .x4: four 8 x 8 16-bit matrices from shared memory, lane l giving the address p of row l % 8 of
 * matrix l / 8; TRANS: each matrix transposed on the way. */
template <bool TRANS>
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void *p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
/* 2^x on the special-function unit (relative error about 2^-22; 2^-inf = 0). */
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
/* 2^x of a pair of fp16 values on the special-function unit (relative error about 2^-9.9; 2^-inf = 0). */
__device__ __forceinline__ uint32_t exp2_approx_h2(uint32_t x) {
  uint32_t y;
  asm("ex2.approx.f16x2 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}
/* p = 2^(s c - mc) for a row's two neighbouring scores, packed as a P fragment pair. */
template <typename T>
__device__ __forceinline__ uint32_t prob2(float s0, float s1, float c, float mc);
template <>
__device__ __forceinline__ uint32_t prob2<__half>(float s0, float s1, float c, float mc) {
  return exp2_approx_h2(pack2<__half>(fmaf(s0, c, -mc), fmaf(s1, c, -mc)));
}
template <>
__device__ __forceinline__ uint32_t prob2<__nv_bfloat16>(float s0, float s1, float c, float mc) {
  return pack2<__nv_bfloat16>(exp2_approx(fmaf(s0, c, -mc)), exp2_approx(fmaf(s1, c, -mc)));
}
/* A B fragment of ones (both 16-bit halves 1.0): P times it sums each row of P. */
template <typename T>
__device__ __forceinline__ uint32_t ones2();
template <>
__device__ __forceinline__ uint32_t ones2<__half>() {
  return 0x3C003C00u;
}
template <>
__device__ __forceinline__ uint32_t ones2<__nv_bfloat16>() {
  return 0x3F803F80u;
}

constexpr int KROW = DH + 8; /* K and V row stride in shared memory (elements) */
size_t attention_mma_smem(int maxlen, size_t esize) {
  const size_t lk = (size_t)((maxlen + 31) & ~31);
  return 2 * lk * KROW * esize;
}

/* One chunk of NJ x 8 keys from kc for a warp's 16 query rows (lane: rows g and g + 8 of the tile, key
 * columns 2t, 2t + 1 of each 8): the scores, the online-softmax update of the maxima m and of o, then
 * o += P V; o[0..3] are the output's four 8-column blocks, o[4] the rows' sums of p (every column). */
template <typename T, int NJ>
__device__ __forceinline__ void attend_chunk(const uint32_t (&qa)[2][4], const T *k_lane, const T *v_lane, int kc,
                                             int n, int t, float c, float &m_a, float &m_b, float (&o)[5][4]) {
  float sc[NJ][4];
#pragma unroll
  for (int j = 0; j < NJ; j++) {
    uint32_t kb[4];
    ldsm_x4<false>(kb, k_lane + (kc + 8 * j) * KROW);
    sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
    mma16816<T>(sc[j], qa[0], kb[0], kb[1]);
    mma16816<T>(sc[j], qa[1], kb[2], kb[3]);
  }
  if (kc + 8 * NJ > n) {
#pragma unroll
    for (int j = 0; j < NJ; j++) {
      const int key = kc + 8 * j + 2 * t;
      if (key >= n) sc[j][0] = sc[j][2] = -INFINITY;
      if (key + 1 >= n) sc[j][1] = sc[j][3] = -INFINITY;
    }
  }
  float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
  for (int j = 0; j < NJ; j++) {
    mx_a = fmaxf(mx_a, fmaxf(sc[j][0], sc[j][1]));
    mx_b = fmaxf(mx_b, fmaxf(sc[j][2], sc[j][3]));
  }
  /* the row's four threads (t = 0..3) together hold the chunk's keys; key kc is valid, so the max is finite */
  mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
  mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
  mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
  mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
  const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
  if (__any_sync(0xffffffffu, mn_a != m_a || mn_b != m_b)) {
    const float al_a = exp2_approx((m_a - mn_a) * c), al_b = exp2_approx((m_b - mn_b) * c);
#pragma unroll
    for (int j = 0; j < 5; j++) {
      o[j][0] *= al_a; /* al is 0 on the first chunk (m = -inf), where o is 0 */
      o[j][1] *= al_a;
      o[j][2] *= al_b;
      o[j][3] *= al_b;
    }
    m_a = mn_a;
    m_b = mn_b;
  }
  const float ms_a = m_a * c, ms_b = m_b * c;
#pragma unroll
  for (int kk = 0; kk < NJ / 2; kk++) {
    /* P (the score accumulators, re-packed as A fragments) times V, and times ones */
    const uint32_t pa[4] = {prob2<T>(sc[2 * kk][0], sc[2 * kk][1], c, ms_a),
                            prob2<T>(sc[2 * kk][2], sc[2 * kk][3], c, ms_b),
                            prob2<T>(sc[2 * kk + 1][0], sc[2 * kk + 1][1], c, ms_a),
                            prob2<T>(sc[2 * kk + 1][2], sc[2 * kk + 1][3], c, ms_b)};
#pragma unroll
    for (int jj = 0; jj < 2; jj++) {
      uint32_t vb[4];
      ldsm_x4<true>(vb, v_lane + (kc + 16 * kk) * KROW + 16 * jj);
      mma16816<T>(o[2 * jj], pa, vb[0], vb[1]);
      mma16816<T>(o[2 * jj + 1], pa, vb[2], vb[3]);
    }
    mma16816<T>(o[4], pa, ones2<T>(), ones2<T>());
  }
}

/* Q's A fragments (two k16 halves of the head) of query rows ra and ra + 8; zero past the sequence's n. */
template <typename T>
__device__ __forceinline__ void load_q(uint32_t (&q)[2][4], const T *base, int64_t ld, int ra, int n, int t) {
  const int rb = ra + 8;
#pragma unroll
  for (int kk = 0; kk < 2; kk++) {
    const int c = kk * 16 + 2 * t;
    q[kk][0] = ra < n ? ld32(base + ra * ld + c) : 0u;
    q[kk][1] = rb < n ? ld32(base + rb * ld + c) : 0u;
    q[kk][2] = ra < n ? ld32(base + ra * ld + c + 8) : 0u;
    q[kk][3] = rb < n ? ld32(base + rb * ld + c + 8) : 0u;
  }
}

/* WIDE: keys 64 at a time (then at most one chunk of 32), else 32 at a time. A 64-key chunk holds 32 more
 * scores a thread in registers: fewer blocks fit an SM, which costs batches of short lines more than the
 * wider chunk saves (docs/performance.md), so the launch picks WIDE by the batch's longest line. */
template <typename T, bool WIDE>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_mma_kernel(const T *__restrict__ qkv, T *__restrict__ ctx, const int32_t *__restrict__ seqoff, int H,
                         float scale_log2) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int s = blockIdx.x, h = blockIdx.y;
  const int64_t off = seqoff[s];
  const int n = (int)(seqoff[s + 1] - off);
  const int lk = (n + 31) & ~31; /* a 64-key chunk starts only where more than 32 keys remain: it ends by lk */
  T *Ks = reinterpret_cast<T *>(smem);
  T *Vs = Ks + lk * KROW;
  const int64_t ld = 3 * (int64_t)H;
  const T *base = qkv + off * ld + h * DH;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  /* all of K and V in flight at once (cp.async), zeros past the sequence */
  for (int idx = threadIdx.x; idx < lk * (DH / 8); idx += blockDim.x) {
    const int r = idx / (DH / 8), c = (idx % (DH / 8)) * 8;
    if (r < n) {
      cp_async16((uint32_t)__cvta_generic_to_shared(Ks + r * KROW + c), base + r * ld + H + c);
      cp_async16((uint32_t)__cvta_generic_to_shared(Vs + r * KROW + c), base + r * ld + 2 * H + c);
    } else {
      *reinterpret_cast<uint4 *>(Ks + r * KROW + c) = make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4 *>(Vs + r * KROW + c) = make_uint4(0, 0, 0, 0);
    }
  }
  cp_async_commit();

  /* ldmatrix row addresses: lane L names row L % 8 of matrix L / 8. K, per 8 keys: the four 8-column
   * blocks of the head (fragments b0, b1 of dims 0-15, then of 16-31). V, per 16 keys and 16 dims: keys
   * 0-7 and 8-15 of dims 0-7, then of dims 8-15 (b0, b1 of two 8-dim output blocks). */
  const int lr = lane & 7, lm = lane >> 3;
  const T *k_lane = Ks + lr * KROW + 8 * lm;
  const T *v_lane = Vs + (8 * (lm & 1) + lr) * KROW + 8 * (lm >> 1);
  /* Q's A fragments of the warp's next 16 rows are loaded while the current ones are used */
  uint32_t qn[2][4];
  load_q(qn, base, ld, warp * 16 + g, n, t);
  cp_async_wait<0>();
  __syncthreads();
  constexpr int QSTEP = 16 * (ATT_THREADS / 32);
  for (int r0 = warp * 16; r0 < n; r0 += QSTEP) {
    const int ra = r0 + g, rb = r0 + g + 8;
    uint32_t qa[2][4];
#pragma unroll
    for (int kk = 0; kk < 2; kk++)
#pragma unroll
      for (int i = 0; i < 4; i++) qa[kk][i] = qn[kk][i];
    if (r0 + QSTEP < n) load_q(qn, base, ld, ra + QSTEP, n, t);
    float o[5][4];
#pragma unroll
    for (int j = 0; j < 5; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m_a = -INFINITY, m_b = -INFINITY;
    int kc = 0;
    if constexpr (WIDE)
      for (; n - kc > 32; kc += 64) attend_chunk<T, 8>(qa, k_lane, v_lane, kc, n, t, scale_log2, m_a, m_b, o);
    for (; kc < n; kc += 32) attend_chunk<T, 4>(qa, k_lane, v_lane, kc, n, t, scale_log2, m_a, m_b, o);
    const float ia = 1.0f / o[4][0], ib = 1.0f / o[4][2];
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int c = h * DH + 8 * j + 2 * t;
      if (ra < n) *reinterpret_cast<uint32_t *>(ctx + (off + ra) * H + c) = pack2<T>(o[j][0] * ia, o[j][1] * ia);
      if (rb < n) *reinterpret_cast<uint32_t *>(ctx + (off + rb) * H + c) = pack2<T>(o[j][2] * ib, o[j][3] * ib);
    }
  }
}

template <typename T>
void attention_mma_allow_smem(size_t bytes) {
  VA_CUDA(cudaFuncSetAttribute(attention_mma_kernel<T, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  VA_CUDA(
      cudaFuncSetAttribute(attention_mma_kernel<T, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

/* --- attention, fp32: CUDA cores, one warp per query row ------------------------------------------ */
/* K (row stride 33: lanes reading different keys hit different banks) and V of the sequence and head in
 * shared memory; lane k scores keys k, k + 32, ...; softmax in fp32; lane d sums output column d. */
size_t attention_f32_smem(int maxlen) {
  return ((size_t)maxlen * (DH + 1 + DH) + (size_t)(ATT_THREADS / 32) * (maxlen + DH)) * sizeof(float);
}

__global__ void __launch_bounds__(ATT_THREADS)
    attention_f32_kernel(const float *__restrict__ qkv, float *__restrict__ ctx, const int32_t *__restrict__ seqoff,
                         int H, float scale) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int s = blockIdx.x, h = blockIdx.y;
  const int64_t off = seqoff[s];
  const int n = (int)(seqoff[s + 1] - off);
  const int nw = ATT_THREADS / 32, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float *Ks = reinterpret_cast<float *>(smem), *Vs = Ks + n * (DH + 1), *P = Vs + n * DH, *Q = P + nw * n;
  const int64_t ld = 3 * (int64_t)H;
  const float *base = qkv + off * ld + h * DH;
  for (int idx = threadIdx.x; idx < n * DH; idx += blockDim.x) {
    const int r = idx / DH, d = idx % DH;
    Ks[r * (DH + 1) + d] = base[r * ld + H + d];
    Vs[r * DH + d] = base[r * ld + 2 * H + d];
  }
  __syncthreads();
  float *p = P + warp * n, *q = Q + warp * DH;
  for (int i = warp; i < n; i += nw) {
    q[lane] = base[i * ld + lane] * scale;
    __syncwarp();
    float mx = -INFINITY;
    for (int k = lane; k < n; k += 32) {
      float acc = 0.f;
#pragma unroll
      for (int d = 0; d < DH; d++) acc += q[d] * Ks[k * (DH + 1) + d];
      p[k] = acc;
      mx = fmaxf(mx, acc);
    }
    mx = warp_max(mx);
    float sum = 0.f;
    for (int k = lane; k < n; k += 32) {
      const float e = expf(p[k] - mx);
      p[k] = e;
      sum += e;
    }
    sum = warp_sum(sum);
    __syncwarp();
    float o = 0.f;
    for (int k = 0; k < n; k++) o += p[k] * Vs[k * DH + lane];
    ctx[(off + i) * H + h * DH + lane] = o / sum;
    __syncwarp(); /* p and q are rewritten for the next row */
  }
}

/* --- dense layers, fp16/bf16, without cuBLASLt: mma.sync m16n8k16, fp32 accumulation -------------- */
/* D[m, n] = X[m, k] W[n, k]^T + bias[n], then the epilogue: + D[m, n] (the residual, read before the one
 * rounding), or the tanh-form GELU (as cuBLASLt's GELU_BIAS epilogue), or nothing. A block takes 128 x 128
 * of D with 8 warps of 64 x 32 each (a warp's 16 products of a k16 step share 6 fragment loads), two blocks
 * an SM, walking k 64 at a time with the next step's cp.async loads in flight (rows padded by 8 elements,
 * 16 bytes: the eight rows an ldmatrix reads fall in distinct banks). n must be a multiple of 128 and k of
 * 64 (dense_mma_fits); rows past m load row m - 1 and are never stored. The summation order is fixed, so
 * a row's result does not depend on the other rows of its batch. Not reached: cuBLASLt's speed. The kernel
 * waits on L2 more than it computes (docs/performance.md), which cuBLASLt's wgmma kernels avoid with larger
 * tiles shared across SMs; it exists to spare short jobs cuBLASLt's start. */
constexpr int DN_BM = 128, DN_BN = 128, DN_BK = 64, DN_STAGES = 2;
constexpr int DN_WM = 64, DN_WN = 32; /* a warp's share of the tile */
constexpr int DN_WARPS_N = DN_BN / DN_WN, DN_THREADS = 32 * (DN_BM / DN_WM) * DN_WARPS_N;
constexpr int DN_ROW = DN_BK + 8;
constexpr size_t DN_SMEM = (size_t)DN_STAGES * (DN_BM + DN_BN) * DN_ROW * 2;
enum dense_epilogue { DENSE_BIAS, DENSE_BIAS_GELU, DENSE_BIAS_RESIDUAL };

/* 0.5 z (1 + tanh(u)) with u = sqrt(2/pi) (z + 0.044715 z^3), written as z / (1 + e^(-2u)): the same
 * function, with a relative error of a few fp32 ulps wherever the result lies, including z << 0 where
 * 1 + tanh(u) would cancel. */
__device__ __forceinline__ float gelu_tanh(float z) {
  const float u = 0.7978845608028654f * (z + 0.044715f * z * z * z);
  return __fdividef(z, 1.f + __expf(-2.f * u));
}

template <typename T, int EP>
__global__ void __launch_bounds__(DN_THREADS, 2)
    dense_mma_kernel(const T *__restrict__ X, const T *__restrict__ W, const T *__restrict__ bias, T *D, int m, int n,
                     int k) {
  extern __shared__ __align__(16) unsigned char smem[];
  T *As = reinterpret_cast<T *>(smem);
  T *Bs = As + DN_STAGES * DN_BM * DN_ROW;
  const int m0 = blockIdx.y * DN_BM, n0 = blockIdx.x * DN_BN;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int wm = (warp / DN_WARPS_N) * DN_WM, wn = (warp % DN_WARPS_N) * DN_WN;
  /* a stage: 128 rows x DN_BK of X and of W, in 16-byte pieces */
  auto load_stage = [&](int stage, int k0) {
    constexpr int PIECES = DN_BK / 8;
#pragma unroll
    for (int i = 0; i < DN_BM * PIECES / DN_THREADS; i++) {
      const int idx = threadIdx.x + i * DN_THREADS, r = idx / PIECES, c = (idx % PIECES) * 8;
      const int xr = m0 + r < m ? m0 + r : m - 1;
      cp_async16((uint32_t)__cvta_generic_to_shared(As + (stage * DN_BM + r) * DN_ROW + c),
                 X + (int64_t)xr * k + k0 + c);
      cp_async16((uint32_t)__cvta_generic_to_shared(Bs + (stage * DN_BN + r) * DN_ROW + c),
                 W + (int64_t)(n0 + r) * k + k0 + c);
    }
  };
  const int kt_end = k / DN_BK;
#pragma unroll
  for (int s = 0; s < DN_STAGES - 1; s++) {
    if (s < kt_end) load_stage(s, s * DN_BK);
    cp_async_commit();
  }
  constexpr int MI = DN_WM / 16, NJ = DN_WN / 8; /* a warp's m16 and n8 tiles */
  float acc[MI][NJ][4];
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NJ; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
  /* ldmatrix addresses: X, per 16 rows: rows 0-15 at k 0 (lanes 0-15), then at k 8 (lanes 16-31): a0..a3;
   * W, per 16 columns of D: W's rows 0-7 at k 0 and 8, then rows 8-15 at k 0 and 8: b0, b1 of two n8 tiles */
  const int a_row = wm + (lane & 15), a_col = (lane >> 4) * 8;
  const int b_row = wn + (lane & 7) + ((lane >> 4) << 3), b_col = ((lane >> 3) & 1) * 8;
  for (int kt = 0; kt < kt_end; kt++) {
    cp_async_wait<DN_STAGES - 2>();
    __syncthreads(); /* stage kt is in; every warp is done with the stage the next load overwrites */
    if (kt + DN_STAGES - 1 < kt_end) load_stage((kt + DN_STAGES - 1) % DN_STAGES, (kt + DN_STAGES - 1) * DN_BK);
    cp_async_commit();
    const T *a = As + (kt % DN_STAGES) * DN_BM * DN_ROW, *b = Bs + (kt % DN_STAGES) * DN_BN * DN_ROW;
#pragma unroll
    for (int kk = 0; kk < DN_BK; kk += 16) {
      uint32_t af[MI][4], bf[NJ][2];
#pragma unroll
      for (int i = 0; i < MI; i++) ldsm_x4<false>(af[i], a + (a_row + 16 * i) * DN_ROW + kk + a_col);
#pragma unroll
      for (int j = 0; j < NJ / 2; j++) {
        uint32_t r[4];
        ldsm_x4<false>(r, b + (b_row + 16 * j) * DN_ROW + kk + b_col);
        bf[2 * j][0] = r[0];
        bf[2 * j][1] = r[1];
        bf[2 * j + 1][0] = r[2];
        bf[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NJ; j++) mma16816<T>(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  }
  cp_async_wait<0>();
  /* lane: rows g and g + 8 of each 16, columns 2t and 2t + 1 of each 8 */
#pragma unroll
  for (int j = 0; j < NJ; j++) {
    const int c = n0 + wn + 8 * j + 2 * t;
    const float2 bc = load2(bias + c);
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int r = m0 + wm + 16 * i + g + 8 * h;
        if (r >= m) continue;
        T *out = D + (int64_t)r * n + c;
        float v0 = acc[i][j][2 * h] + bc.x, v1 = acc[i][j][2 * h + 1] + bc.y;
        if constexpr (EP == DENSE_BIAS_RESIDUAL) {
          const float2 res = load2(out);
          v0 += res.x;
          v1 += res.y;
        } else if constexpr (EP == DENSE_BIAS_GELU) {
          v0 = gelu_tanh(v0);
          v1 = gelu_tanh(v1);
        }
        store2(out, v0, v1);
      }
  }
}

/* Whether the dense kernel takes a layer of n outputs from k inputs. */
bool dense_mma_fits(int64_t n, int64_t k) { return n % DN_BN == 0 && k % DN_BK == 0; }

template <typename T>
void dense_mma_allow_smem() {
  VA_CUDA(
      cudaFuncSetAttribute(dense_mma_kernel<T, DENSE_BIAS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)DN_SMEM));
  VA_CUDA(cudaFuncSetAttribute(dense_mma_kernel<T, DENSE_BIAS_GELU>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)DN_SMEM));
  VA_CUDA(cudaFuncSetAttribute(dense_mma_kernel<T, DENSE_BIAS_RESIDUAL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)DN_SMEM));
}

template <typename T>
void dense_mma(cudaStream_t stream, int ep, const T *X, const T *W, const T *bias, T *D, int64_t m, int n, int k) {
  const dim3 grid((unsigned)(n / DN_BN), (unsigned)((m + DN_BM - 1) / DN_BM));
  if (ep == DENSE_BIAS_RESIDUAL)
    dense_mma_kernel<T, DENSE_BIAS_RESIDUAL><<<grid, DN_THREADS, DN_SMEM, stream>>>(X, W, bias, D, (int)m, n, k);
  else if (ep == DENSE_BIAS_GELU)
    dense_mma_kernel<T, DENSE_BIAS_GELU><<<grid, DN_THREADS, DN_SMEM, stream>>>(X, W, bias, D, (int)m, n, k);
  else dense_mma_kernel<T, DENSE_BIAS><<<grid, DN_THREADS, DN_SMEM, stream>>>(X, W, bias, D, (int)m, n, k);
  VA_LAUNCHED();
}

/* --- host side ----------------------------------------------------------------------------------- */
struct layer_dev {
  const void *wqkv, *wo, *w1, *w2; /* [out, in] in the model precision */
  const void *bqkv, *bo, *b1, *b2; /* biases, also in the model precision (cuBLASLt's bias type is the output's) */
  const float *ln1_g, *ln1_b, *ln2_g, *ln2_b;
};

/* One dense layer y[rows, n] = x[rows, k] W[n, k]^T + bias, by the dense kernel or by cuBLASLt, in whose
 * column-major terms D(n x rows) = op(W: k x n, transposed) * X(k x rows), bias per row of D. */
struct gemm_op {
  int64_t n, k;
  int gelu;                  /* the tanh-form GELU after the bias (16-bit precisions' FFN in) */
  cublasLtMatmulDesc_t desc; /* NULL with the dense kernel */
  cublasLtMatrixLayout_t la, lb, ld;
  struct algo_slot {
    int ok;
    cublasLtMatmulAlgo_t algo;
  } cache[48]; /* by octave of the row count (algo_octave) */
};
enum { OP_QKV, OP_O, OP_FF1, OP_FF2, NOPS };

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
/* The GEMM row bucket of a row count: a multiple of ROWPAD and of 1/16 of the count's power of two. */
int64_t bucket_rows(int64_t rows) {
  int64_t step = ROWPAD;
  while (step * 32 <= rows) step *= 2;
  return round_up(rows, step);
}
/* Row counts share a cuBLASLt algorithm per octave [2048 * 2^(o-1), 2048 * 2^o) (all counts below 2048
 * in octave 0); it is chosen for 2048 * 2^o rows, the octave's top. */
int algo_octave(int64_t rows) {
  int o = 0;
  while ((int64_t)2048 << o <= rows) o++;
  return o;
}
} // namespace

struct va_bert_cuda {
  int device, precision, H, F, heads, layers, max_pos, vocab, max_seqs;
  float eps;
  int64_t cap; /* token rows of the scratch (a row bucket) */
  cudaStream_t stream;
  cudaDeviceProp prop;
  int dense;           /* VA_BERT_DENSE_*: what multiplies the dense layers */
  cublasLtHandle_t lt; /* NULL with the dense kernel: cuBLASLt is then never touched */
  cublasLtMatmulPreference_t pref;
  void *ws;
  size_t ws_bytes;
  gemm_op op[NOPS];
  unsigned char *weights;
  const void *word;
  const float *pos_type, *eln_g, *eln_b;
  layer_dev *layer;
  /* scratch, in the model precision */
  void *x, *qkv, *ctx, *ff;
  int32_t *d_in;
  float *d_out;
  /* two batches in flight */
  int32_t *h_in[2];
  float *h_out[2];
  cudaEvent_t ev_start[2], ev_end[2], ev_done[2]; /* forward start and end (timed), download done */
  int nseq[2];
  long long nsub, ncol;
  /* device output (va_bert_cuda_output_to_device): batches land in dev_out at rows d_order[first + b] */
  float *dev_out;
  int64_t *d_order;
  int64_t dev_rows;
  /* persistent row kernels' full grids (ln_grid), asked of the runtime once a kernel */
  struct {
    const void *kernel;
    unsigned blocks;
  } row_grid[4];
};

namespace {
size_t elem_size(int precision) { return precision == VA_BERT_FP32 ? 4 : 2; }
cudaDataType_t elem_type(int precision) {
  return precision == VA_BERT_FP32 ? CUDA_R_32F : precision == VA_BERT_FP16 ? CUDA_R_16F : CUDA_R_16BF;
}

/* Host-side weight arena (va_bert_cuda_stage). */
struct arena {
  unsigned char *host;
  size_t used;
};
/* src[lo, hi) -> dst in the model precision. */
void convert(unsigned char *dst, const float *src, size_t lo, size_t hi, int as_precision) {
  if (as_precision == VA_BERT_FP32) memcpy(dst + 4 * lo, src + lo, (hi - lo) * 4);
  else if (as_precision == VA_BERT_FP16)
    for (size_t i = lo; i < hi; i++) reinterpret_cast<__half *>(dst)[i] = __float2half_rn(src[i]);
  else
    for (size_t i = lo; i < hi; i++) reinterpret_cast<__nv_bfloat16 *>(dst)[i] = __float2bfloat16_rn(src[i]);
}

/* Large arrays (the word embeddings, the FFN weights) convert on up to STAGE_THREADS threads: the
 * staging lies between the model's read and the first batch, beside the device's start when the caller
 * stages first (docs/performance.md). */
constexpr size_t STAGE_CHUNK = (size_t)1 << 20;
constexpr int STAGE_THREADS = 8;

size_t put(arena *a, const float *src, size_t n, int as_precision) {
  a->used = (size_t)round_up((int64_t)a->used, 256);
  size_t at = a->used;
  if (a->host) {
    unsigned char *dst = a->host + at;
    const int cpus = va_cpu_count();
    size_t parts = (n + STAGE_CHUNK - 1) / STAGE_CHUNK;
    if (parts > (size_t)STAGE_THREADS) parts = STAGE_THREADS;
    if (parts > (size_t)cpus) parts = (size_t)cpus;
    if (parts < 1) parts = 1;
    std::vector<std::thread> helpers;
    size_t t = 1; /* a thread that cannot be created (std::system_error) leaves the parts from t to this one */
    try {
      for (; t < parts; t++) helpers.emplace_back(convert, dst, src, n * t / parts, n * (t + 1) / parts, as_precision);
    } catch (const std::system_error &) {}
    for (size_t r = t; r < parts; r++) convert(dst, src, n * r / parts, n * (r + 1) / parts, as_precision);
    convert(dst, src, 0, n / parts, as_precision);
    for (std::thread &h : helpers) h.join();
  }
  a->used += n * elem_size(as_precision);
  return at;
}

/* The layer's shape and epilogue; its cuBLASLt descriptors when lt. */
void gemm_init(gemm_op *op, int64_t n, int64_t k, bool gelu, bool lt, cudaDataType_t in_t, cudaDataType_t out_t) {
  memset(op, 0, sizeof *op);
  op->n = n;
  op->k = k;
  op->gelu = gelu;
  if (!lt) return;
  const cublasLtEpilogue_t ep = gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  VA_CUBLAS(va_blas().cublasLtMatmulDescCreate(&op->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  VA_CUBLAS(va_blas().cublasLtMatmulDescSetAttribute(op->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  VA_CUBLAS(va_blas().cublasLtMatmulDescSetAttribute(op->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  VA_CUBLAS(va_blas().cublasLtMatmulDescSetAttribute(op->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
  VA_CUBLAS(va_blas().cublasLtMatrixLayoutCreate(&op->la, in_t, (uint64_t)k, (uint64_t)n, k));
  VA_CUBLAS(va_blas().cublasLtMatrixLayoutCreate(&op->lb, in_t, (uint64_t)k, ROWPAD, k));
  VA_CUBLAS(va_blas().cublasLtMatrixLayoutCreate(&op->ld, out_t, (uint64_t)n, ROWPAD, n));
}

void gemm_free(gemm_op *op) {
  if (!op->desc) return;
  VA_CUBLAS(va_blas().cublasLtMatrixLayoutDestroy(op->la));
  VA_CUBLAS(va_blas().cublasLtMatrixLayoutDestroy(op->lb));
  VA_CUBLAS(va_blas().cublasLtMatrixLayoutDestroy(op->ld));
  VA_CUBLAS(va_blas().cublasLtMatmulDescDestroy(op->desc));
}

void gemm_set_rows(gemm_op *op, uint64_t m) {
  VA_CUBLAS(va_blas().cublasLtMatrixLayoutSetAttribute(op->lb, CUBLASLT_MATRIX_LAYOUT_COLS, &m, sizeof m));
  VA_CUBLAS(va_blas().cublasLtMatrixLayoutSetAttribute(op->ld, CUBLASLT_MATRIX_LAYOUT_COLS, &m, sizeof m));
}

/* cuBLASLt's first choice of algorithm for the layer at m rows (the layouts are left at m rows). */
cublasLtMatmulAlgo_t gemm_choose(va_bert_cuda *g, gemm_op *op, uint64_t m) {
  gemm_set_rows(op, m);
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  VA_CUBLAS(va_blas().cublasLtMatmulAlgoGetHeuristic(g->lt, op->desc, op->la, op->lb, op->ld, op->ld, g->pref, 1, &res,
                                                     &found));
  if (found < 1)
    VA_FATAL("cuBLASLt has no algorithm for a %llu-row dense layer in %s", (unsigned long long)m,
             va_bert_cuda_precision_name(g->precision));
  return res.algo;
}

/* D = X W^T + bias (+ D when accumulate: the residual add, in fp32 before D's one rounding), then the op's
 * epilogue. */
void gemm_run(va_bert_cuda *g, gemm_op *op, const void *W, const void *bias, const void *X, void *D, int64_t rows,
              bool accumulate) {
  const uint64_t m = (uint64_t)bucket_rows(rows);
  if (g->dense == VA_BERT_DENSE_MMA) {
    const int ep = accumulate ? DENSE_BIAS_RESIDUAL : op->gelu ? DENSE_BIAS_GELU : DENSE_BIAS;
    if (g->precision == VA_BERT_FP16)
      dense_mma<__half>(g->stream, ep, (const __half *)X, (const __half *)W, (const __half *)bias, (__half *)D,
                        (int64_t)m, (int)op->n, (int)op->k);
    else
      dense_mma<__nv_bfloat16>(g->stream, ep, (const __nv_bfloat16 *)X, (const __nv_bfloat16 *)W,
                               (const __nv_bfloat16 *)bias, (__nv_bfloat16 *)D, (int64_t)m, (int)op->n, (int)op->k);
    return;
  }
  const int o = algo_octave((int64_t)m);
  if (o >= (int)(sizeof op->cache / sizeof op->cache[0]))
    VA_FATAL("CUDA encoder: %llu rows in one dense layer", (unsigned long long)m);
  gemm_op::algo_slot *slot = &op->cache[o];
  if (!slot->ok) {
    slot->algo = gemm_choose(g, op, (uint64_t)2048 << o);
    slot->ok = 1;
  }
  gemm_set_rows(op, m);
  VA_CUBLAS(va_blas().cublasLtMatmulDescSetAttribute(op->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  cublasStatus_t st = va_blas().cublasLtMatmul(g->lt, op->desc, &one, W, op->la, X, op->lb, &beta, D, op->ld, D, op->ld,
                                               &slot->algo, g->ws, g->ws_bytes, g->stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) {
    /* The octave's algorithm does not take this row count (refused before any launch): this bucket
     * gets its own choice (a fallback; docs/performance.md). */
    cublasLtMatmulAlgo_t own = gemm_choose(g, op, m);
    st = va_blas().cublasLtMatmul(g->lt, op->desc, &one, W, op->la, X, op->lb, &beta, D, op->ld, D, op->ld, &own, g->ws,
                                  g->ws_bytes, g->stream);
  }
  if (st != CUBLAS_STATUS_SUCCESS)
    VA_FATAL("cublasLtMatmul (a %llu-row dense layer, %s) failed: %s", (unsigned long long)m,
             va_bert_cuda_precision_name(g->precision), va_blas().cublasGetStatusString(st));
}

unsigned blocks_for(int64_t rows, int per_block) { return (unsigned)((rows + per_block - 1) / per_block); }

/* Blocks of a persistent row kernel: as many as are resident at once on every SM, fewer for fewer rows.
 * The occupancy is asked once a kernel (an encoder launches two row kernels, 13 times a batch). */
template <typename K>
unsigned ln_grid(va_bert_cuda *g, K kernel, int64_t rows) {
  unsigned full = 0;
  for (const auto &c : g->row_grid)
    if (c.kernel == (const void *)kernel) full = c.blocks;
  if (!full) {
    int per_sm = 0;
    VA_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, ROW_WARPS * 32, 0));
    full = (unsigned)(g->prop.multiProcessorCount * (per_sm > 0 ? per_sm : 1));
    for (auto &c : g->row_grid)
      if (!c.kernel) {
        c.kernel = (const void *)kernel;
        c.blocks = full;
        break;
      }
  }
  const unsigned need = blocks_for(rows, ROW_WARPS);
  return need < full ? need : full;
}

/* x = LN(x) in place over the first rows rows, gamma g, beta b. */
template <typename T>
void layer_norm(va_bert_cuda *g, T *x, int64_t rows, const float *gamma, const float *beta) {
  row_pairs::call(g->H / 64, [&](auto np) {
    const auto kernel = ln_kernel<T, decltype(np)::value>;
    kernel<<<ln_grid(g, kernel, rows), ROW_WARPS * 32, 0, g->stream>>>(x, rows, gamma, beta, g->eps);
  });
  VA_LAUNCHED();
}

/* The whole forward pass of one batch (inputs already on the device), queued on g->stream. */
template <typename T>
void forward(va_bert_cuda *g, int64_t ntok, int nseq, int maxlen) {
  const int H = g->H, F = g->F;
  const int32_t *ids = g->d_in, *pos = g->d_in + ntok, *seqoff = g->d_in + 2 * ntok;
  T *x = (T *)g->x, *qkv = (T *)g->qkv, *ctx = (T *)g->ctx, *ff = (T *)g->ff;
  const int64_t mrows = bucket_rows(ntok); /* the rows every GEMM computes */
  row_pairs::call(H / 64, [&](auto np) {
    const auto kernel = embed_ln_kernel<T, decltype(np)::value>;
    kernel<<<ln_grid(g, kernel, ntok), ROW_WARPS * 32, 0, g->stream>>>(ids, pos, ntok, (const T *)g->word, g->pos_type,
                                                                       g->eln_g, g->eln_b, g->eps, x);
  });
  VA_LAUNCHED();
  const dim3 agrid((unsigned)nseq, (unsigned)g->heads);
  const float scale = 1.0f / sqrtf((float)DH);
  for (int l = 0; l < g->layers; l++) {
    const layer_dev *L = &g->layer[l];
    gemm_run(g, &g->op[OP_QKV], L->wqkv, L->bqkv, x, qkv, ntok, false);
    if constexpr (std::is_same<T, float>::value) {
      attention_f32_kernel<<<agrid, ATT_THREADS, attention_f32_smem(maxlen), g->stream>>>(qkv, ctx, seqoff, H, scale);
    } else {
      const size_t smem = attention_mma_smem(maxlen, sizeof(T));
      const float scale_log2 = scale * 1.4426950408889634f;
      if (maxlen > ATT_WIDE_ABOVE) {
        attention_mma_kernel<T, true><<<agrid, ATT_THREADS, smem, g->stream>>>(qkv, ctx, seqoff, H, scale_log2);
      } else {
        attention_mma_kernel<T, false><<<agrid, ATT_THREADS, smem, g->stream>>>(qkv, ctx, seqoff, H, scale_log2);
      }
    }
    VA_LAUNCHED();
    /* Whole-batch passes. Not done on purpose: slicing this row-local rest of the layer so that ff stays in
     * the L2 cache; the GEMMs lose more on short row counts than the elementwise passes gain
     * (docs/performance.md). */
    /* LayerNorm over the GEMM's padded rows too: their residual sums stay finite from layer to layer. */
    gemm_run(g, &g->op[OP_O], L->wo, L->bo, ctx, x, ntok, true);
    layer_norm<T>(g, x, mrows, L->ln1_g, L->ln1_b);
    gemm_run(g, &g->op[OP_FF1], L->w1, L->b1, x, ff, ntok, false);
    if constexpr (std::is_same<T, float>::value) {
      const int64_t nvec = ntok * F / 4;
      const int64_t gb = (nvec + 255) / 256, gmax = (int64_t)g->prop.multiProcessorCount * 8;
      gelu_kernel<T><<<(unsigned)(gb < gmax ? gb : gmax), 256, 0, g->stream>>>(ff, nvec);
      VA_LAUNCHED();
    }
    gemm_run(g, &g->op[OP_FF2], L->w2, L->b2, ff, x, ntok, true);
    layer_norm<T>(g, x, mrows, L->ln2_g, L->ln2_b);
  }
  pool_kernel<T><<<(unsigned)nseq, H / 2, 0, g->stream>>>(x, seqoff, H, g->d_out);
  VA_LAUNCHED();
}
/* Sequence b of a batch -> row order[b] of the device output (H floats each). */
__global__ void scatter_rows_kernel(const float *__restrict__ src, int H, const int64_t *__restrict__ order,
                                    float *__restrict__ dst) {
  const float *s = src + (int64_t)blockIdx.x * H;
  float *o = dst + order[blockIdx.x] * H;
  for (int t = threadIdx.x; t < H; t += blockDim.x) o[t] = s[t];
}
} // namespace

extern "C" int va_bert_cuda_precision(const char *name) {
  if (!strcmp(name, "fp32")) return VA_BERT_FP32;
  if (!strcmp(name, "fp16")) return VA_BERT_FP16;
  if (!strcmp(name, "bf16")) return VA_BERT_BF16;
  return -1;
}

extern "C" const char *va_bert_cuda_precision_name(int precision) {
  return precision == VA_BERT_FP32   ? "fp32"
         : precision == VA_BERT_FP16 ? "fp16"
         : precision == VA_BERT_BF16 ? "bf16"
                                     : NULL;
}

/* Byte offsets of one layer's tensors in the weight arena. */
struct weight_offsets {
  size_t wqkv, bqkv, wo, bo, ln1_g, ln1_b, w1, b1, w2, b2, ln2_g, ln2_b;
};

struct va_bert_cuda_weights {
  int precision;
  unsigned char *host; /* bytes, laid out as g->weights will hold them */
  size_t bytes, word, pos_type, eln_g, eln_b;
  weight_offsets *layer; /* one a layer */
};

/* The arena: every tensor 256-byte aligned (cuBLASLt's default alignment assumption), the first pass sizing
 * it. The word embeddings and the GEMM weights and biases are in the model precision; the position
 * (+ token type 0) table and the LayerNorm parameters, read by our fp32 kernels, stay fp32. */
extern "C" va_bert_cuda_weights_t *va_bert_cuda_stage(const va_bert_t *m, int precision) {
  const int p = precision, f32 = VA_BERT_FP32;
  const int64_t V = m->vocab, P = m->max_pos, H = m->hidden, F = m->ffn;
  va_bert_cuda_weights_t *ws = (va_bert_cuda_weights_t *)va_calloc(1, sizeof *ws, "staged weights");
  ws->precision = precision;
  ws->layer = (weight_offsets *)va_calloc((size_t)m->layers, sizeof *ws->layer, "layer offsets");
  float *pos_type = (float *)va_malloc((size_t)(P * H) * sizeof(float), "position table");
  for (int64_t i = 0; i < P * H; i++) pos_type[i] = m->pos[i] + m->type0[i % H];
  arena a = {NULL, 0};
  for (int pass = 0; pass < 2; pass++) {
    a.used = 0;
    ws->word = put(&a, m->word, (size_t)(V * H), p);
    ws->pos_type = put(&a, pos_type, (size_t)(P * H), f32);
    ws->eln_g = put(&a, m->emb_ln_g, (size_t)H, f32);
    ws->eln_b = put(&a, m->emb_ln_b, (size_t)H, f32);
    for (int l = 0; l < m->layers; l++) {
      const va_bert_layer_t *L = &m->layer[l];
      weight_offsets *o = &ws->layer[l];
      o->wqkv = put(&a, L->wqkv, (size_t)(3 * H * H), p);
      o->bqkv = put(&a, L->bqkv, (size_t)(3 * H), p);
      o->wo = put(&a, L->wo, (size_t)(H * H), p);
      o->bo = put(&a, L->bo, (size_t)H, p);
      o->ln1_g = put(&a, L->ln1_g, (size_t)H, f32);
      o->ln1_b = put(&a, L->ln1_b, (size_t)H, f32);
      o->w1 = put(&a, L->w1, (size_t)(F * H), p);
      o->b1 = put(&a, L->b1, (size_t)F, p);
      o->w2 = put(&a, L->w2, (size_t)(H * F), p);
      o->b2 = put(&a, L->b2, (size_t)H, p);
      o->ln2_g = put(&a, L->ln2_g, (size_t)H, f32);
      o->ln2_b = put(&a, L->ln2_b, (size_t)H, f32);
    }
    if (pass == 0) a.host = (unsigned char *)va_malloc(a.used, "weight staging");
  }
  free(pos_type);
  ws->host = a.host;
  ws->bytes = a.used;
  return ws;
}

extern "C" void va_bert_cuda_weights_free(va_bert_cuda_weights_t *ws) {
  if (!ws) return;
  free(ws->host);
  free(ws->layer);
  free(ws);
}

extern "C" va_bert_cuda_t *va_bert_cuda_create(const va_bert_t *m, const va_bert_cuda_weights_t *w_staged, int device,
                                               int precision, int dense, int max_seqs, int64_t max_batch_tokens,
                                               char *err, size_t errlen) {
  const int H = m->hidden, F = m->ffn;
  if (!va_bert_cuda_precision_name(precision)) {
    snprintf(err, errlen, "unknown precision %d", precision);
    return NULL;
  }
  if (H / m->heads != DH || H % 64 || !row_pairs::has(H / 64) || F % 64) {
    snprintf(err, errlen,
             "the CUDA encoder needs head size %d, hidden size 128, 256, 384, 512, 768 or 1024 and an FFN size that "
             "is a multiple of 64; this model has hidden %d, %d heads, FFN %d",
             DH, H, m->heads, F);
    return NULL;
  }
  if (max_seqs < 1 || max_batch_tokens < 1) {
    snprintf(err, errlen, "empty batch capacity");
    return NULL;
  }
  va_bert_cuda *g = (va_bert_cuda *)va_calloc(1, sizeof *g, "CUDA encoder");
  g->device = device;
  g->precision = precision;
  g->H = H;
  g->F = F;
  g->heads = m->heads;
  g->layers = m->layers;
  g->max_pos = m->max_pos;
  g->vocab = m->vocab;
  g->eps = m->ln_eps;
  g->max_seqs = max_seqs;
  g->cap = 0; /* va_bert_cuda_reserve sizes the scratch */
  g->dense = dense == VA_BERT_DENSE_MMA && precision != VA_BERT_FP32 && dense_mma_fits(3 * H, H) &&
                     dense_mma_fits(H, H) && dense_mma_fits(F, H) && dense_mma_fits(H, F)
                 ? VA_BERT_DENSE_MMA
                 : VA_BERT_DENSE_CUBLASLT;
  VA_CUDA(cudaSetDevice(device));
  VA_CUDA(cudaGetDeviceProperties(&g->prop, device));
  const size_t att_smem =
      precision == VA_BERT_FP32 ? attention_f32_smem(m->max_pos) : attention_mma_smem(m->max_pos, 2);
  if (precision != VA_BERT_FP32 && g->prop.major < 8) {
    snprintf(err, errlen,
             "%s on %s needs compute capability 8.0 or newer (this device has %d.%d); use --precision fp32",
             va_bert_cuda_precision_name(precision), g->prop.name, g->prop.major, g->prop.minor);
    free(g);
    return NULL;
  }
  if (att_smem > g->prop.sharedMemPerBlockOptin) {
    snprintf(err, errlen, "attention over %d positions needs %zu bytes of shared memory per block; %s has %zu",
             m->max_pos, att_smem, g->prop.name, (size_t)g->prop.sharedMemPerBlockOptin);
    free(g);
    return NULL;
  }
  if (precision == VA_BERT_FP32) {
    VA_CUDA(cudaFuncSetAttribute(attention_f32_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)att_smem));
  } else if (precision == VA_BERT_FP16) {
    attention_mma_allow_smem<__half>(att_smem);
    if (g->dense == VA_BERT_DENSE_MMA) dense_mma_allow_smem<__half>();
  } else {
    attention_mma_allow_smem<__nv_bfloat16>(att_smem);
    if (g->dense == VA_BERT_DENSE_MMA) dense_mma_allow_smem<__nv_bfloat16>();
  }
  VA_CUDA(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
  if (g->dense == VA_BERT_DENSE_CUBLASLT) {
    VA_CUBLAS(va_blas().cublasLtCreate(&g->lt));
    g->ws_bytes = 32u << 20;
    VA_CUDA(cudaMalloc(&g->ws, g->ws_bytes));
    VA_CUBLAS(va_blas().cublasLtMatmulPreferenceCreate(&g->pref));
    const uint64_t wsb = g->ws_bytes;
    VA_CUBLAS(va_blas().cublasLtMatmulPreferenceSetAttribute(g->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                                             sizeof wsb));
  }

  /* Weights: staged on the host (here unless the caller staged them while the device started), uploaded in
   * one copy. */
  va_bert_cuda_weights_t *own = w_staged ? NULL : va_bert_cuda_stage(m, precision);
  const va_bert_cuda_weights_t *ws = w_staged ? w_staged : own;
  if (ws->precision != precision) VA_FATAL("CUDA encoder: weights staged in another precision");
  VA_CUDA(cudaMalloc(&g->weights, ws->bytes));
  VA_CUDA(cudaMemcpy(g->weights, ws->host, ws->bytes, cudaMemcpyHostToDevice));
  const weight_offsets *lo = ws->layer;
  unsigned char *w = g->weights;
  g->word = w + ws->word;
  g->pos_type = (const float *)(w + ws->pos_type);
  g->eln_g = (const float *)(w + ws->eln_g);
  g->eln_b = (const float *)(w + ws->eln_b);
  g->layer = (layer_dev *)va_calloc((size_t)m->layers, sizeof *g->layer, "layer table");
  for (int l = 0; l < m->layers; l++) {
    layer_dev *L = &g->layer[l];
    L->wqkv = w + lo[l].wqkv;
    L->bqkv = w + lo[l].bqkv;
    L->wo = w + lo[l].wo;
    L->bo = w + lo[l].bo;
    L->ln1_g = (const float *)(w + lo[l].ln1_g);
    L->ln1_b = (const float *)(w + lo[l].ln1_b);
    L->w1 = w + lo[l].w1;
    L->b1 = w + lo[l].b1;
    L->w2 = w + lo[l].w2;
    L->b2 = w + lo[l].b2;
    L->ln2_g = (const float *)(w + lo[l].ln2_g);
    L->ln2_b = (const float *)(w + lo[l].ln2_b);
  }
  va_bert_cuda_weights_free(own);

  VA_CUDA(cudaMalloc(&g->d_out, (size_t)max_seqs * H * sizeof(float)));
  for (int s = 0; s < 2; s++) {
    VA_CUDA(cudaMallocHost(&g->h_out[s], (size_t)max_seqs * H * sizeof(float)));
    VA_CUDA(cudaEventCreate(&g->ev_start[s]));
    VA_CUDA(cudaEventCreate(&g->ev_end[s]));
    VA_CUDA(cudaEventCreateWithFlags(&g->ev_done[s], cudaEventDisableTiming));
  }
  const cudaDataType_t lp = elem_type(precision);
  /* GELU: in 16-bit precisions the FFN product's epilogue (the tanh form), in fp32 the model's erf (gelu_kernel);
   * see the file comment. */
  const bool lt = g->lt != NULL, gelu = precision != VA_BERT_FP32;
  gemm_init(&g->op[OP_QKV], 3 * H, H, false, lt, lp, lp);
  gemm_init(&g->op[OP_O], H, H, false, lt, lp, lp);
  gemm_init(&g->op[OP_FF1], F, H, gelu, lt, lp, lp);
  gemm_init(&g->op[OP_FF2], H, F, false, lt, lp, lp);
  va_bert_cuda_reserve(g, max_batch_tokens);
  return g;
}

extern "C" void va_bert_cuda_reserve(va_bert_cuda_t *g, int64_t max_batch_tokens) {
  const int64_t cap = bucket_rows(max_batch_tokens > 0 ? max_batch_tokens : 1);
  if (cap <= g->cap) return;
  VA_CUDA(cudaSetDevice(g->device));
  VA_CUDA(cudaStreamSynchronize(g->stream)); /* nothing in flight uses the old scratch */
  /* Scratch, zeroed once so that the padding rows a GEMM reads before anything wrote them are finite. */
  const size_t es = elem_size(g->precision), rows = (size_t)cap, H = (size_t)g->H, F = (size_t)g->F;
  void **bufs[] = {&g->x, &g->qkv, &g->ctx, &g->ff};
  const size_t bytes[] = {rows * H * es, rows * 3 * H * es, rows * H * es, rows * F * es};
  for (int i = 0; i < 4; i++) {
    VA_CUDA(cudaFree(*bufs[i]));
    VA_CUDA(cudaMalloc(bufs[i], bytes[i]));
    VA_CUDA(cudaMemset(*bufs[i], 0, bytes[i]));
  }
  const size_t in_ints = 2 * rows + (size_t)g->max_seqs + 1;
  VA_CUDA(cudaFree(g->d_in));
  VA_CUDA(cudaMalloc(&g->d_in, in_ints * sizeof(int32_t)));
  for (int s = 0; s < 2; s++) {
    VA_CUDA(cudaFreeHost(g->h_in[s]));
    VA_CUDA(cudaMallocHost(&g->h_in[s], in_ints * sizeof(int32_t)));
  }
  g->cap = cap;
  VA_CUDA(cudaDeviceSynchronize());
}

extern "C" void va_bert_cuda_warm_up(va_bert_cuda_t *g) {
  const int32_t ids[2] = {0, 0};
  const int lens[1] = {2};
  if (g->nsub != g->ncol || g->dev_out)
    VA_FATAL("CUDA encoder: warm-up with a batch in flight or after the output went to the device");
  float *out = (float *)va_malloc((size_t)g->H * sizeof(float), "warm-up output");
  va_bert_cuda_encode(g, ids, lens, 1, out);
  free(out);
}

extern "C" void va_bert_cuda_free(va_bert_cuda_t *g) {
  if (!g) return;
  VA_CUDA(cudaSetDevice(g->device));
  VA_CUDA(cudaStreamSynchronize(g->stream));
  for (int i = 0; i < NOPS; i++) gemm_free(&g->op[i]);
  for (int s = 0; s < 2; s++) {
    VA_CUDA(cudaFreeHost(g->h_in[s]));
    VA_CUDA(cudaFreeHost(g->h_out[s]));
    VA_CUDA(cudaEventDestroy(g->ev_start[s]));
    VA_CUDA(cudaEventDestroy(g->ev_end[s]));
    VA_CUDA(cudaEventDestroy(g->ev_done[s]));
  }
  VA_CUDA(cudaFree(g->d_in));
  VA_CUDA(cudaFree(g->d_out));
  if (g->d_order) VA_CUDA(cudaFree(g->d_order)); /* dev_out is the caller's (va_cuda_free_device) */
  VA_CUDA(cudaFree(g->x));
  VA_CUDA(cudaFree(g->qkv));
  VA_CUDA(cudaFree(g->ctx));
  VA_CUDA(cudaFree(g->ff));
  VA_CUDA(cudaFree(g->weights));
  if (g->lt) {
    VA_CUDA(cudaFree(g->ws));
    VA_CUBLAS(va_blas().cublasLtMatmulPreferenceDestroy(g->pref));
    VA_CUBLAS(va_blas().cublasLtDestroy(g->lt));
  }
  VA_CUDA(cudaStreamDestroy(g->stream));
  free(g->layer);
  free(g);
}

extern "C" float *va_bert_cuda_output_to_device(va_bert_cuda_t *g, int64_t n) {
  if (g->dev_out) VA_FATAL("CUDA encoder: device output asked for twice");
  VA_CUDA(cudaSetDevice(g->device));
  size_t free_bytes = 0, total_bytes = 0, bytes = (size_t)(n > 0 ? n : 1) * (g->H * sizeof(float) + sizeof(int64_t));
  VA_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (bytes > free_bytes / 2) return NULL; /* the rest is for whatever the rows are for next */
  VA_CUDA(cudaMalloc(&g->dev_out, (size_t)(n > 0 ? n : 1) * g->H * sizeof(float)));
  VA_CUDA(cudaMalloc(&g->d_order, (size_t)(n > 0 ? n : 1) * sizeof(int64_t)));
  g->dev_rows = n;
  return g->dev_out;
}

extern "C" void va_bert_cuda_place(va_bert_cuda_t *g, const int64_t *order, int64_t from, int64_t count) {
  if (!g->d_order || count <= 0) return;
  if (from < 0 || from + count > g->dev_rows)
    VA_FATAL("CUDA encoder: positions %lld..%lld placed in a device output of %lld rows", (long long)from,
             (long long)(from + count), (long long)g->dev_rows);
  VA_CUDA(cudaSetDevice(g->device));
  /* ordered before the batches submitted after it; order stays as it is while they run (the caller's) */
  VA_CUDA(
      cudaMemcpyAsync(g->d_order + from, order, (size_t)count * sizeof(int64_t), cudaMemcpyHostToDevice, g->stream));
}

extern "C" void va_bert_cuda_submit(va_bert_cuda_t *g, const int32_t *ids, const int *lens, int nseq, int64_t first) {
  if (g->nsub - g->ncol >= 2) VA_FATAL("CUDA encoder: a third batch submitted before the first was collected");
  if (nseq < 1 || nseq > g->max_seqs) VA_FATAL("CUDA encoder: batch of %d sequences (capacity %d)", nseq, g->max_seqs);
  const int slot = (int)(g->nsub & 1);
  int64_t ntok = 0;
  int maxlen = 0;
  for (int s = 0; s < nseq; s++) {
    if (lens[s] < 1 || lens[s] > g->max_pos)
      VA_FATAL("CUDA encoder: sequence of %d tokens (1..%d)", lens[s], g->max_pos);
    ntok += lens[s];
    if (lens[s] > maxlen) maxlen = lens[s];
  }
  if (bucket_rows(ntok) > g->cap)
    VA_FATAL("CUDA encoder: batch of %lld tokens (capacity %lld)", (long long)ntok, (long long)g->cap);
  /* Pinned input: ids[ntok] | position[ntok] | sequence offsets[nseq + 1], one upload. */
  int32_t *in = g->h_in[slot], *pos = in + ntok, *seqoff = in + 2 * ntok;
  int64_t t = 0;
  for (int s = 0; s < nseq; s++) {
    seqoff[s] = (int32_t)t;
    for (int i = 0; i < lens[s]; i++, t++) {
      if (ids[t] < 0 || ids[t] >= g->vocab)
        VA_FATAL("CUDA encoder: token id %d outside the vocabulary (%d)", ids[t], g->vocab);
      in[t] = ids[t];
      pos[t] = i;
    }
  }
  seqoff[nseq] = (int32_t)t;
  VA_CUDA(cudaSetDevice(g->device));
  VA_CUDA(
      cudaMemcpyAsync(g->d_in, in, (size_t)(2 * ntok + nseq + 1) * sizeof(int32_t), cudaMemcpyHostToDevice, g->stream));
  VA_CUDA(cudaEventRecord(g->ev_start[slot], g->stream));
  if (g->precision == VA_BERT_FP32) forward<float>(g, ntok, nseq, maxlen);
  else if (g->precision == VA_BERT_FP16) forward<__half>(g, ntok, nseq, maxlen);
  else forward<__nv_bfloat16>(g, ntok, nseq, maxlen);
  VA_CUDA(cudaEventRecord(g->ev_end[slot], g->stream));
  if (g->dev_out) {
    if (first < 0 || first + nseq > g->dev_rows)
      VA_FATAL("CUDA encoder: batch at %lld of %lld device rows", (long long)first, (long long)g->dev_rows);
    scatter_rows_kernel<<<(unsigned)nseq, 128, 0, g->stream>>>(g->d_out, g->H, g->d_order + first, g->dev_out);
    VA_LAUNCHED();
  } else {
    VA_CUDA(cudaMemcpyAsync(g->h_out[slot], g->d_out, (size_t)nseq * g->H * sizeof(float), cudaMemcpyDeviceToHost,
                            g->stream));
  }
  VA_CUDA(cudaEventRecord(g->ev_done[slot], g->stream));
  g->nseq[slot] = nseq;
  g->nsub++;
}

extern "C" double va_bert_cuda_collect(va_bert_cuda_t *g, float *out) {
  if (g->ncol >= g->nsub) VA_FATAL("CUDA encoder: collect without an outstanding batch");
  const int slot = (int)(g->ncol & 1);
  VA_CUDA(cudaSetDevice(g->device));
  VA_CUDA(cudaEventSynchronize(g->ev_done[slot]));
  float ms = 0.f;
  VA_CUDA(cudaEventElapsedTime(&ms, g->ev_start[slot], g->ev_end[slot]));
  g->ncol++;
  if (!g->dev_out) memcpy(out, g->h_out[slot], (size_t)g->nseq[slot] * g->H * sizeof(float));
  return ms;
}

extern "C" double va_bert_cuda_encode(va_bert_cuda_t *g, const int32_t *ids, const int *lens, int nseq, float *out) {
  va_bert_cuda_submit(g, ids, lens, nseq, 0);
  return va_bert_cuda_collect(g, out);
}

extern "C" int va_bert_cuda_dense(const va_bert_cuda_t *g) { return g->dense; }

extern "C" const char *va_bert_cuda_dense_name(int dense) {
  return dense == VA_BERT_DENSE_MMA ? "mma" : dense == VA_BERT_DENSE_CUBLASLT ? "cublaslt" : NULL;
}

namespace {
template <typename T>
T *dense_upload(const float *src, size_t n, int precision) {
  std::vector<T> host(n);
  convert(reinterpret_cast<unsigned char *>(host.data()), src, 0, n, precision);
  T *dev = NULL;
  VA_CUDA(cudaMalloc(&dev, n * sizeof(T)));
  VA_CUDA(cudaMemcpy(dev, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  return dev;
}
template <typename T>
void dense_run(int precision, int ep, const float *x, const float *w, const float *bias, float *d, int64_t m, int n,
               int k) {
  dense_mma_allow_smem<T>();
  T *dx = dense_upload<T>(x, (size_t)m * k, precision), *dw = dense_upload<T>(w, (size_t)n * k, precision);
  T *db = dense_upload<T>(bias, (size_t)n, precision), *dd = dense_upload<T>(d, (size_t)m * n, precision);
  cudaStream_t stream;
  VA_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  dense_mma<T>(stream, ep, dx, dw, db, dd, m, n, k);
  VA_CUDA(cudaStreamSynchronize(stream));
  std::vector<T> out((size_t)m * n);
  VA_CUDA(cudaMemcpy(out.data(), dd, out.size() * sizeof(T), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < out.size(); i++) d[i] = (float)out[i];
  VA_CUDA(cudaStreamDestroy(stream));
  VA_CUDA(cudaFree(dd));
  VA_CUDA(cudaFree(db));
  VA_CUDA(cudaFree(dw));
  VA_CUDA(cudaFree(dx));
}
} // namespace

extern "C" int va_bert_cuda_dense_run(int device, int precision, int epilogue, const float *x, const float *w,
                                      const float *bias, float *d, int64_t m, int n, int k) {
  if (precision == VA_BERT_FP32 || !va_bert_cuda_precision_name(precision) || !dense_mma_fits(n, k) || m < 1 ||
      epilogue < DENSE_BIAS || epilogue > DENSE_BIAS_RESIDUAL)
    return 1;
  VA_CUDA(cudaSetDevice(device));
  if (precision == VA_BERT_FP16) dense_run<__half>(precision, epilogue, x, w, bias, d, m, n, k);
  else dense_run<__nv_bfloat16>(precision, epilogue, x, w, bias, d, m, n, k);
  return 0;
}

extern "C" void va_bert_cuda_describe(const va_bert_cuda_t *g, char *out, size_t len) {
  snprintf(out, len, "%s (device %d), %s", g->prop.name, g->device, va_bert_cuda_precision_name(g->precision));
}
