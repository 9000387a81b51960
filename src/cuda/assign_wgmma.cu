/* cuda_assign_wgmma.cu: the assign pass's argmin kernel on Hopper's warpgroup tensor-core instruction
 * (wgmma, sm_90a; built for that target alone, cmake/cuda.cmake). It does what fused_rx_kernel in
 * cuda_assign.cu does with mma.sync: the block's rows stay on the SM for the whole pass (16-bit: in
 * shared memory; tf32: as A fragments in registers), the anchors stream through shared memory in tiles
 * (cp.async ring, each tile with its half biases), the products give -x.a (rows negated: by the
 * instruction, or when loaded) and the scan adds hb, so the smallest of hb - x.a wins, and a running
 * smallest value with its first column per row stays in registers: ties to the lowest anchor. What
 * wgmma changes: a warpgroup multiplies 64 rows by a whole tile in one instruction per 16 (32-bit: 8)
 * elements of d, reading the anchors straight from shared memory, asynchronously; so each warpgroup
 * keeps two accumulator sets and scans one while the tensor cores fill the other. Two kernels:
 * fused_wgmma_kernel (rows up to 768 bytes: anchor tiles whole in the ring) and tma_wgmma_kernel (rows of
 * any length: rows and anchors both stream through shared memory, loaded by the tensor memory
 * accelerator). */
#include <cuda.h>         /* CUtensorMap and its enums (the TMA's tensor descriptors) */
#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled: the driver's encoder, reached through the runtime */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include <type_traits>
#include <utility>

#include "cuda/assign_wgmma.cuh"
#include "cuda/async.cuh"
#include "cuda/kernels.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "cuda_assign_wgmma.cu is built for sm_90a only (wgmma)"
#endif

namespace {

/* this thread's shared-memory writes (cp.async) made visible to the tensor cores' reads (async proxy) */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Pins the compiler's ordering of ordinary accesses to accumulators around the asynchronous products. */
template <int NA>
__device__ __forceinline__ void fence_regs(float (&d)[NA]) {
#pragma unroll
  for (int i = 0; i < NA; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* Accumulator lists: D per warp as m16n8 tiles, d[4i..4i+3] = (row g, cols 8i + 2tq, +1), (row g + 8,
 * same cols) (warp w of the group: rows 16w..16w+15 of the 64). scale-d acc_in: 0 = D = A B, else += . */
#define VA_F4(d, i)  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define VA_F16(d, i) VA_F4(d, i), VA_F4(d, i + 4), VA_F4(d, i + 8), VA_F4(d, i + 12)
#define VA_F32(d, i) VA_F16(d, i), VA_F16(d, i + 16)
#define VA_D32                                                                                                         \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "              \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define VA_D64                                                                                                         \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "              \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "               \
  "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "               \
  "%62, %63}"
/* tf32, rows in registers: D (64 x 64) += A (64 x 8: one 32-byte step of d, as mma.sync's m16n8k8 A
 * fragment per warp, negated when loaded) * B (the step's 64 anchors, from shared memory through the
 * descriptor); tf32 takes no transpose operand. */
struct WgTf32 {
  static __device__ __forceinline__ void run(float (&d)[32], const uint32_t (&a)[4], uint64_t desc, int acc_in) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 " VA_D32
                 ", {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
                 : VA_F32(d, 0)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc_in));
  }
};
/* fp16 / bf16, rows longer than 128 elements in registers: D (64 x 64) += A (64 x 16: one 32-byte step
 * of d, as mma.sync's m16n8k16 A fragment per warp, negated when loaded) * B (the step's 64 anchors,
 * bdesc, K-major). */
template <typename T>
struct WgR;
#define VA_WGR(TYPE, SHAPE)                                                                                            \
  template <>                                                                                                          \
  struct WgR<TYPE> {                                                                                                   \
    static __device__ __forceinline__ void run(float (&d)[32], const uint32_t (&a)[4], uint64_t desc, int acc_in) {    \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                        \
                   "wgmma.mma_async.sync.aligned." SHAPE " " VA_D32 ", {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"    \
                   : VA_F32(d, 0)                                                                                      \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc_in));                              \
    }                                                                                                                  \
  };
VA_WGR(__half, "m64n64k16.f32.f16.f16")
VA_WGR(__nv_bfloat16, "m64n64k16.f32.bf16.bf16")
#undef VA_WGR
/* Both operands in shared memory: D (64 x N) += -A (64 x one 32-byte step of d, descriptor adesc: the rows
 * in the anchors' layout) * B (the step's N anchors, bdesc), K-major, 128-byte swizzled; scale-a -1 negates
 * the rows (exact); 16-bit: neither operand transposed, tf32 takes no transpose operand. N 128: 16-bit rows
 * of up to 128 elements held in shared memory (fused_wgmma_kernel); 256: rows and anchors loaded by the TMA
 * (tma_wgmma_kernel). */
#define VA_D128                                                                                                        \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "                   \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "                    \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "                    \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, "                    \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, "                    \
  "%97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, "                      \
  "%113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
template <typename T, int N>
struct WgSS;
/* DLIST: the accumulators' operand list; A, B, P: the operand numbers of adesc, bdesc and acc_in */
#define VA_WGSS(TYPE, N, SHAPE, TRANS, DLIST, A, B, P, ...)                                                            \
  template <>                                                                                                          \
  struct WgSS<TYPE, N> {                                                                                               \
    static __device__ __forceinline__ void run(float (&d)[N / 2], uint64_t adesc, uint64_t bdesc, int acc_in) {        \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n"                                                      \
                   "wgmma.mma_async.sync.aligned." SHAPE " " DLIST ", " A ", " B ", p, -1, 1" TRANS ";\n}\n"           \
                   : __VA_ARGS__                                                                                       \
                   : "l"(adesc), "l"(bdesc), "r"(acc_in));                                                             \
    }                                                                                                                  \
  };
VA_WGSS(__half, 128, "m64n128k16.f32.f16.f16", ", 0, 0", VA_D64, "%64", "%65", "%66", VA_F32(d, 0), VA_F32(d, 32))
VA_WGSS(__nv_bfloat16, 128, "m64n128k16.f32.bf16.bf16", ", 0, 0", VA_D64, "%64", "%65", "%66", VA_F32(d, 0),
        VA_F32(d, 32))
VA_WGSS(float, 256, "m64n256k8.f32.tf32.tf32", "", VA_D128, "%128", "%129", "%130", VA_F32(d, 0), VA_F32(d, 32),
        VA_F32(d, 64), VA_F32(d, 96))
VA_WGSS(__half, 256, "m64n256k16.f32.f16.f16", ", 0, 0", VA_D128, "%128", "%129", "%130", VA_F32(d, 0), VA_F32(d, 32),
        VA_F32(d, 64), VA_F32(d, 96))
VA_WGSS(__nv_bfloat16, 256, "m64n256k16.f32.bf16.bf16", ", 0, 0", VA_D128, "%128", "%129", "%130", VA_F32(d, 0),
        VA_F32(d, 32), VA_F32(d, 64), VA_F32(d, 96))
#undef VA_WGSS
#undef VA_D128
#undef VA_D64
#undef VA_D32
#undef VA_F32
#undef VA_F16
#undef VA_F4

/* f(I) for I = 0 .. N - 1, each a std::integral_constant: loops whose index must be a compile-time
 * constant (accumulator sets, pieces of a row, kernel instances) */
template <typename F, int... I>
__host__ __device__ __forceinline__ void static_for_seq(F &&f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, typename F>
__host__ __device__ __forceinline__ void static_for(F &&f) {
  static_for_seq(f, std::make_integer_sequence<int, N>{});
}

/* The smallest of mv[0, N) and its index mi, ties to the lower index: adjacent pairs at stride S, so
 * each comparison's left side holds only lower indices; log2 N levels of independent selects. */
template <int S, int N>
__device__ __forceinline__ void argmin_tree(float *mv, int *mi) {
#pragma unroll
  for (int i = 0; i < N; i += 2 * S) {
    const bool p = mv[i + S] < mv[i];
    mv[i] = p ? mv[i + S] : mv[i];
    mi[i] = p ? mi[i + S] : mi[i];
  }
  if constexpr (2 * S < N) argmin_tree<2 * S, N>(mv, mi);
}

/* One completed accumulator set d (a 64 x BN tile's products, m16n8 layout) of tile t: + the half bias,
 * then per row (h: rows g and g + 8 of the warp's 16) the tile's smallest value and its first column by
 * a tree of selects (no branches: a search for the column after the smallest value is a chain of
 * dependent selects that two warps per scheduler cannot hide), merged into the running best (strictly
 * smaller: ties stay with the earlier tile). Both rows' pairs per bias load: the accumulators turn into
 * pairs as they are read, so the set, its pairs and the biases are never all live at once (three
 * warpgroups leave 168 registers). bias: the tile's BN half biases (shared or global memory). Every tile is
 * scanned: skipping those where no row of the warp could improve (each row's exact tile minimum against best, a
 * warp vote) made the pass slower even at k 65536 (docs/performance.md). */
template <int BN>
__device__ __forceinline__ void scan_tile(const float (&d)[BN / 2], const float *bias, int t, int tq, float (&best)[2],
                                          int (&bidx)[2]) {
  float mv[2][BN / 8];
  int mi[2][BN / 8];
#pragma unroll
  for (int i = 0; i < BN / 8; i++) { /* columns 8i + 2tq and + 1 */
    const float2 b = *(const float2 *)(bias + 8 * i + 2 * tq);
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const float v0 = d[4 * i + 2 * h] + b.x, v1 = d[4 * i + 2 * h + 1] + b.y;
      const bool p = v1 < v0;
      mv[h][i] = p ? v1 : v0;
      mi[h][i] = 8 * i + (p ? 1 : 0);
    }
  }
#pragma unroll
  for (int h = 0; h < 2; h++) {
    argmin_tree<1, BN / 8>(mv[h], mi[h]);
    const bool p = mv[h][0] < best[h];
    best[h] = p ? mv[h][0] : best[h];
    bidx[h] = p ? t * BN + 2 * tq + mi[h][0] : bidx[h];
  }
}

/* The best of a quad (the 4 threads sharing a row), ties to the lowest anchor, in every thread of the quad. */
struct quad_pick {
  float v;
  int i;
};
__device__ __forceinline__ quad_pick quad_best(float bv, int bi) {
#pragma unroll
  for (int o = 1; o <= 2; o <<= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov < bv || (ov == bv && oi < bi)) {
      bv = ov;
      bi = oi;
    }
  }
  return {bv, bi};
}

/* The end of a block: per row the quad's best (quad_best), then a[] and the changed count against the rows'
 * previous a[] (old_a, indexed by the block's row). wrow0: this warp's first row in its warpgroup's row block 0
 * (row block rb adds 64 rb). */
template <int RB>
__device__ __forceinline__ void write_rows(const float (&best)[RB][2], const int (&bidx)[RB][2], int wrow0,
                                           int64_t row0, int64_t n, const uint32_t *old_a, uint32_t *assign,
                                           unsigned long long *counter) {
  const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  unsigned changed = 0;
#pragma unroll
  for (int rb = 0; rb < RB; rb++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const quad_pick q = quad_best(best[rb][h], bidx[rb][h]);
      const int r = wrow0 + rb * 64 + h * 8 + g; /* the block's row */
      if (tq == 0 && row0 + r < n) {             /* rows past n are padding: computed, not written */
        changed += old_a[r] != (uint32_t)q.i;
        assign[row0 + r] = (uint32_t)q.i;
      }
    }
  changed = __reduce_add_sync(0xffffffffu, changed);
  if (lane == 0 && changed) atomicAdd(counter, (unsigned long long)changed);
}

/* The block's BM rows from row0 into shared memory at s_rows, each 64-row block laid out as a 64-anchor
 * tile (piece p of row i at p 64 128 + i 128, its 16-byte chunk c at c ^ (i % 8)); rows past the
 * allocation (readable) zero, never written. cp.async: the caller commits and waits. */
template <int BM, int KS, int NTH>
__device__ __forceinline__ void load_rows_shared(uint32_t s_rows, const void *X, int64_t row0, int64_t readable) {
  constexpr int ROWB = KS * 32, SROWB = (KS + 3) / 4 * 128, CPR = ROWB / 16;
  static_assert((BM * CPR) % NTH == 0, "row chunks");
#pragma unroll 4
  for (int q = 0; q < BM * CPR / NTH; q++) {
    const int e = q * NTH + (int)threadIdx.x, r = e / CPR, c = e % CPR, i = r & 63;
    const uint32_t dst =
        s_rows + (uint32_t)((r >> 6) * (64 * SROWB) + (c >> 3) * (64 * 128) + i * 128 + (((c & 7) ^ (i & 7)) << 4));
    if (row0 + r < readable) cp_async16(dst, (const unsigned char *)X + (size_t)(row0 + r) * ROWB + c * 16);
    else asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst), "r"(0) : "memory");
  }
}
/* The rows of the block `ahead` blocks on (BM rows of ROWB bytes from row0 + ahead BM, the next one this
 * SM runs) fetched into L2, a piece per warp, where the whole block lies inside the allocation. */
template <int BM, int ROWB, int NTH>
__device__ __forceinline__ void prefetch_next_rows(const void *X, int64_t row0, int64_t readable, int ahead) {
  constexpr int PIECE = BM * ROWB / (NTH / 32);
  static_assert(PIECE % 16 == 0, "prefetch pieces");
  const int64_t next0 = row0 + (int64_t)ahead * BM;
  if ((threadIdx.x & 31) == 0 && next0 + BM <= readable)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"((const unsigned char *)X + (size_t)next0 * ROWB +
                                                                      (size_t)(threadIdx.x >> 5) * PIECE),
                 "r"(PIECE)
                 : "memory");
}

/* Block: NWG warpgroups, each owning two blocks of 64 rows (rows [128 NWG b, 128 NWG (b + 1))); every
 * warpgroup scans all anchors. An anchor tile (BN anchors) sits in shared memory in the layout the tensor cores
 * read with 128-byte swizzling, K-major: the row of 32 KS bytes is cut into 128-byte pieces; piece p of
 * anchor j lies at p * BN * 128 + j * 128, its 16-byte chunk c at chunk c ^ (j % 8) (every piece block
 * 1024-aligned). A descriptor for step s (32 bytes of d) starts at piece s / 4, byte 32 (s % 4); 8-anchor
 * groups are 1024 bytes apart. The tile's BN half biases follow.
 * Work is a sequence of units u = (tile u / 2, row block u % 2), each KS products into accumulator set
 * u % 2; a unit's products run while the previous unit's set is scanned. STAGES tiles in the ring: at
 * tile t the stage of tile t - 2 is refilled (every unit of it has completed before the barrier of t),
 * so STAGES - 2 tiles load ahead.
 * SS (16-bit): the block's rows sit in shared memory beside the ring, each 64-row block laid out as a
 * 64-anchor tile, loaded once with the first tile; the registers the rows' fragments took (64 a thread)
 * make room for a third warpgroup (168 registers a thread), so three warps per scheduler hide the scan's
 * latencies instead of two (docs/performance.md). tf32 rows (512 bytes) do not fit beside the ring for
 * 384 rows: two warpgroups, rows in registers. */
/* Units per group (group() below): a group ends with every product retired, so a longer one leaves the
 * tensor cores idle less often (docs/performance.md). tf32: groups of 8 (its 16-unit instances spill a
 * few bytes) and 4 ring stages (6 are slower). k 1024 is one group of 16 at fp16/bf16. */
/* SS at KS 4 (d 64): groups of 8 or 16 spill (488 / 1604 bytes) in 168 registers, groups of 4 do not */
template <typename T, int KS>
constexpr int unit_group() {
  return sizeof(T) == 4 ? 8 : KS != 8 ? 4 : 16;
}

/* RB: 64-row blocks per warpgroup. 2: units alternate the two row blocks (and accumulator sets) within a
 * tile; 1 (16-bit rows longer than 128 elements, in registers: two blocks' fragments would not fit):
 * units are whole tiles, alternating the accumulator sets from tile to tile. */
template <typename T, int BN, int KS, int STAGES, int NWG, bool SS, int RB>
__global__ void __launch_bounds__(NWG * 128, 1)
    fused_wgmma_kernel(const T *__restrict__ X, const T *__restrict__ A, const float *__restrict__ hb, int64_t n,
                       int ntiles, uint32_t *__restrict__ assign, unsigned long long *counter, int ahead) {
  constexpr int NTH = NWG * 128, BM = NWG * 64 * RB; /* rows per block */
  /* a row: ROWB bytes in global memory (KS steps of 32 bytes), SROWB in shared memory (whole 128-byte
   * pieces: a row of 1.5 pieces, d 96 at 16 bits, fills two, its swizzled chunks spread over both
   * lines of the second) */
  constexpr int ROWB = KS * 32, SROWB = (KS + 3) / 4 * 128, CPR = ROWB / 16, TILE_B = BN * SROWB,
                STAGE_B = TILE_B + 1024, NACC = BN / 2;
  constexpr int LOADS = (BN * CPR + NTH - 1) / NTH; /* 16-byte copies per thread and tile (the last maybe partial) */
  constexpr int GROUP = unit_group<T, KS>();
  static_assert(KS % 2 == 0 && BN % 16 == 0 && BN * 4 <= 1024 && STAGES >= 3, "tile");
  /* a thread's chunks of a tile share their column and swizzle (one destination computed once), or not */
  constexpr bool FIXED_COL = NTH % CPR == 0 && (NTH / CPR) % 8 == 0;
  static_assert(!SS || (sizeof(T) == 2 && RB == 2 && FIXED_COL), "rows in shared memory: 16-bit, two row blocks");
  static_assert(RB == 2 || RB == 1, "row blocks");
  extern __shared__ unsigned char smem_raw[];
  const uint32_t s_raw = (uint32_t)__cvta_generic_to_shared(smem_raw), s_base = (s_raw + 1023u) & ~1023u;
  const unsigned char *smem = smem_raw + (s_base - s_raw);
  const uint32_t s_rows = s_base + (uint32_t)(STAGES * STAGE_B); /* SS: the block's rows, 64-row blocks as the tiles */
  /* the rows' previous a[] (for the changed count), after the rows */
  const uint32_t s_old = s_rows + (uint32_t)(SS ? BM * SROWB : 0);
  const uint32_t *old_a = (const uint32_t *)(smem + (s_old - s_base));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tq = lane & 3;
  /* the block's first row; rows up to `readable` (the allocation, a multiple of 256) may be read */
  const int64_t row0 = (int64_t)blockIdx.x * BM, readable = (n + 255) / 256 * 256;
  /* this warp's first row in row block 0 of its warpgroup, relative to row0; row block 1 adds 64 */
  const int wrow0 = (warp >> 2) * (64 * RB) + (warp & 3) * 16;

  /* this thread's chunk of every tile: anchor n0 + q NTH / CPR, 16-byte column c of the row */
  const int c = tid % CPR, n0 = tid / CPR;
  const uint32_t dst0 = (uint32_t)((c >> 3) * (BN * 128) + n0 * 128 + (((c & 7) ^ (n0 & 7)) << 4));
  auto load_tile = [&](int t) {
    const unsigned char *src = (const unsigned char *)A + (size_t)t * (BN * ROWB) + tid * 16;
    const uint32_t st = s_base + (uint32_t)(t % STAGES) * STAGE_B;
#pragma unroll
    for (int q = 0; q < LOADS; q++) {
      if ((BN * CPR) % NTH != 0 && q * NTH + tid >= BN * CPR) continue;
      if constexpr (FIXED_COL) {
        cp_async16(st + dst0 + q * (NTH / CPR) * 128, src + q * NTH * 16);
      } else { /* chunk e of the tile: anchor e / CPR, column e % CPR (constant divisors) */
        const int e = q * NTH + tid, j = e / CPR, cc = e % CPR;
        cp_async16(st + (uint32_t)((cc >> 3) * (BN * 128) + j * 128 + (((cc & 7) ^ (j & 7)) << 4)), src + q * NTH * 16);
      }
    }
    if (tid < BN / 4) cp_async16(st + TILE_B + tid * 16, hb + (size_t)t * BN + tid * 4);
  };
  /* SS: the block's rows into shared memory with the first tile */
  if constexpr (SS) load_rows_shared<BM, KS, NTH>(s_rows, X, row0, readable);
  /* the rows' previous a[] with the first group (read at the end; loaded there, the block's last act
   * would wait on a global load); and (SS) the next block's rows into L2 (12 warps x 8 KB for 384 16-bit
   * rows), so its start reads L2, not HBM (docs/performance.md). tf32 (rows in registers) gains nothing
   * from the prefetch, so it has none. */
  if (tid < BM && row0 + tid < n) cp_async4(s_old + 4 * tid, assign + row0 + tid);
  if constexpr (SS) prefetch_next_rows<BM, ROWB, NTH>(X, row0, readable, ahead);
#pragma unroll
  for (int s = 0; s < STAGES - 2; s++) {
    if (s < ntiles) load_tile(s);
    cp_async_commit();
  }

  /* rows in registers: A fragments, negated (sign bits: exact), as fused_rx_kernel's: word 0 = row g,
   * bytes 4tq of the step; 1 = row g + 8; 2 = row g, bytes 16 + 4tq; 3 = row g + 8, bytes 16 + 4tq */
  constexpr uint32_t NEG = sizeof(T) == 4 ? 0x80000000u : 0x80008000u;
  uint32_t af[SS ? 1 : RB][SS ? 1 : KS][4];
#pragma unroll
  for (int rb = 0; rb < (SS ? 0 : RB); rb++) {
    const uint32_t *x0 = (const uint32_t *)((const unsigned char *)X + (size_t)(row0 + wrow0 + rb * 64 + g) * ROWB);
    const uint32_t *x1 = x0 + 8 * ROWB / 4;
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
      af[rb][ks][0] = __ldg(x0 + ks * 8 + tq) ^ NEG;
      af[rb][ks][1] = __ldg(x1 + ks * 8 + tq) ^ NEG;
      af[rb][ks][2] = __ldg(x0 + ks * 8 + 4 + tq) ^ NEG;
      af[rb][ks][3] = __ldg(x1 + ks * 8 + 4 + tq) ^ NEG;
    }
  }

  float acc[2][NACC] = {}; /* products start from zero (scale-d 0); defined before their first use anyway */
  float best[RB][2];
  int bidx[RB][2];
#pragma unroll
  for (int rb = 0; rb < RB; rb++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      best[rb][h] = INFINITY;
      bidx[rb][h] = 0;
    }
  /* 128-byte swizzle (1 << 62), 1024 bytes between 8-row groups, leading offset unused (1) */
  /* A descriptor's high word is that constant; its low word is the address / 16 (under 2^14: shared memory
   * is under 256 KB, so adding an offset / 16 never carries out of the field) with the unused leading offset
   * 1 (bit 16). Formed as 32-bit sums on the low word and joined to the high word at each product: 64-bit
   * arithmetic on whole descriptors costs twice the instructions. The warpgroup's index comes through a
   * shuffle from lane 0, so the compiler knows it is one value in the warp and keeps the sums in uniform
   * registers. */
  constexpr uint32_t DESC_HI = (1u << 30) | (1024 >> 4), DESC_LO = 1u << 16;
  auto desc = [](uint32_t lo) { return ((uint64_t)DESC_HI << 32) | lo; };
  const int wg = __shfl_sync(0xffffffffu, warp >> 2, 0);
  /* SS: this warpgroup's row block 0 in shared memory */
  const uint32_t alo0 = ((s_rows + (uint32_t)(wg * 2 * (64 * SROWB))) >> 4) | DESC_LO;

  /* tile t's data landed and visible to the tensor cores in every thread; then refill tile t - 2's stage */
  auto top = [&](int t) {
    cp_async_wait<STAGES - 3>();
    fence_proxy_async();
    __syncthreads();
    if (t + STAGES - 2 < ntiles) load_tile(t + STAGES - 2);
    cp_async_commit();
  };
  /* unit u into accumulator set J = row block = u % 2 (compile-time). The products start from zero
   * (scale-d 0 on the first step): accumulators that ordinary instructions wrote before the products
   * make the compiler wait for every product in flight before issuing (seen in the SASS), so the bias
   * is added when the set is scanned instead. */
  auto issue = [&](auto J, int u) {
    constexpr int set = decltype(J)::value, rb = RB == 2 ? set : 0;
    const int t = u / RB;
    if (RB == 1 || set == 0) top(t);
    const uint32_t blo0 = ((s_base + (uint32_t)(t % STAGES) * STAGE_B) >> 4) | DESC_LO;
    fence_regs(acc[set]);
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
      const uint64_t bdesc = desc(blo0 + (uint32_t)(((ks >> 2) * (BN * 128) + (ks & 3) * 32) >> 4));
      if constexpr (SS) {
        /* formed at each use from one base (volatile: hoisted out of the loop, the KS descriptors take
         * registers and spill) */
        uint32_t alo;
        asm volatile("add.u32 %0, %1, %2;\n"
                     : "=r"(alo)
                     : "r"(alo0), "r"((uint32_t)((rb * (64 * SROWB) + (ks >> 2) * (64 * 128) + (ks & 3) * 32) >> 4)));
        WgSS<T, BN>::run(acc[set], desc(alo), bdesc, ks > 0);
      } else if constexpr (sizeof(T) == 4) WgTf32::run(acc[set], af[rb][ks], bdesc, ks > 0);
      else WgR<T>::run(acc[set], af[rb][ks], bdesc, ks > 0);
    }
    wg_commit();
  };
  /* unit u's set once its products have completed (wgmma.wait_group). Tile t's stage is refilled only
   * at tile t + 2, after every unit of t has been retired. */
  auto retire = [&](auto J, int u) {
    constexpr int set = decltype(J)::value, rb = RB == 2 ? set : 0;
    const int t = u / RB;
    fence_regs(acc[set]);
    scan_tile<BN>(acc[set], (const float *)(smem + (t % STAGES) * STAGE_B + TILE_B), t, tq, best[rb], bidx[rb]);
  };
  /* P units from u (even): each unit's products run while the previous unit's set is scanned; all have
   * completed at the end. A group never spans the loop's back edge: products in flight across it make
   * the compiler serialise them (seen in the SASS). GROUP units a group, then 4, 2 and 1 for the rest. */
  auto group = [&](auto P, int u) {
    constexpr int np = decltype(P)::value;
    issue(std::integral_constant<int, 0>{}, u);
#pragma unroll
    for (int q = 1; q < np; q++) {
      if (q & 1) issue(std::integral_constant<int, 1>{}, u + q);
      else issue(std::integral_constant<int, 0>{}, u + q);
      wg_wait<1>();
      if (q & 1) retire(std::integral_constant<int, 0>{}, u + q - 1);
      else retire(std::integral_constant<int, 1>{}, u + q - 1);
    }
    wg_wait<0>();
    retire(std::integral_constant<int, (np - 1) & 1>{}, u + np - 1);
  };
  using P2 = std::integral_constant<int, 2>;
  using P4 = std::integral_constant<int, 4>;
  using PG = std::integral_constant<int, GROUP>;
  const int units = RB * ntiles;
  int u = 0;
  for (; u + GROUP <= units; u += GROUP) group(PG{}, u);
  for (; u + 4 <= units; u += 4) group(P4{}, u);
  if (u + 2 <= units) {
    group(P2{}, u);
    u += 2;
  }
  if (u < units) group(std::integral_constant<int, 1>{}, u); /* RB 1: an odd tile count */

  write_rows<RB>(best, bidx, wrow0, row0, n, old_a, assign, counter);
}

/* mbarriers (shared-memory transaction barriers) and the TMA's tiled 2-D load, for tma_wgmma_kernel.
 * bar: a shared-memory address; a waiter names the parity of the phase it waits for. */
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* one arrival that also announces `bytes` of TMA writes the phase waits for */
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile("{\n.reg .pred done;\nWAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT;\n}\n" ::"r"(bar),
               "r"(parity)
               : "memory");
}
/* the box at element (c0 along a row, row c1) of the tensor `map` into shared memory at dst (1024-aligned),
 * completing `bytes` of bar's transaction count; elements outside the tensor arrive as zeros */
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
               "[%4];\n" ::"r"(dst),
               "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar)
               : "memory");
}

/* the TMA kernel's ring stages, rows a block, anchors a tile, bytes a stage (rows' and anchors' 128-byte columns) */
constexpr int TMA_STAGES = 4, TMA_BM = 128, TMA_BN = VA_TMA_TILE_ANCHORS, TMA_STAGE_B = (TMA_BM + TMA_BN) * 128;
/* The answer of one of a row block's `splits` blocks (splits > 1), each of which scanned a slice of the anchor tiles.
 * A row's best goes to merged[] as one 64-bit key by atomicMin: the value's bits in an order-preserving form above
 * the anchor, so the smaller value wins and equal values go to the earlier anchor, as the scan decides, whatever
 * order the blocks finish in. The last block of the row block to finish (its ticket) writes a[], counts the changed
 * rows and leaves merged[] (all ones) and the ticket (zero) as the next pass expects them. Called by the 256
 * consumer threads alone (the producer warpgroup has left): they meet at named barrier 1. */
__device__ __forceinline__ unsigned long long merge_key(float v, int i) {
  if (v == 0.0f) v = 0.0f; /* -0 and +0 are equal to the scan: one key */
  const unsigned u = __float_as_uint(v), o = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return ((unsigned long long)o << 32) | (unsigned)i;
}
__device__ __forceinline__ void merge_rows(const float (&best)[1][2], const int (&bidx)[1][2], int wrow0, int64_t row0,
                                           int64_t n, int splits, uint32_t *assign, unsigned long long *counter,
                                           unsigned long long *merged, unsigned *ticket) {
  __shared__ unsigned last;
  const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const quad_pick q = quad_best(best[0][h], bidx[0][h]);
    const int64_t row = row0 + wrow0 + h * 8 + g;
    if (tq == 0 && row < n) atomicMin(merged + row, merge_key(q.v, q.i));
  }
  __threadfence(); /* this block's keys before its ticket */
  asm volatile("bar.sync 1, 256;\n" ::: "memory");
  if (tid == 0) last = atomicAdd(ticket, 1u) == (unsigned)splits - 1;
  asm volatile("bar.sync 1, 256;\n" ::: "memory");
  if (!last) return;
  __threadfence(); /* the other blocks' keys, published before their tickets */
  unsigned changed = 0;
  if (tid < TMA_BM && row0 + tid < n) {
    const uint32_t a = (uint32_t)atomicExch(merged + row0 + tid, ~0ull);
    changed = assign[row0 + tid] != a;
    assign[row0 + tid] = a;
  }
  if (tid == 0) *ticket = 0;
  changed = __reduce_add_sync(0xffffffffu, changed);
  if (lane == 0 && changed) atomicAdd(counter, (unsigned long long)changed);
}

/* Rows of any length, made for those longer than 768 bytes (16-bit d > 384, tf32 d > 128, and tf32 d 96),
 * where a row block and whole anchor tiles no longer fit in shared memory beside each other: both
 * operands stream through it in 128-byte columns of d, as a GEMM's do, and the scan runs on each finished 128 x 256
 * tile of products instead of writing it. Block (one per SM): 128 rows; warps 0-7 are two consumer warpgroups of 64
 * rows each, warps 8-11 the producer warpgroup, one thread of which issues the TMA loads (the warpgroup hands its
 * registers to the consumers: 232 each hold a 64 x 256 set of products and its scan). Work: for each 256-anchor tile,
 * for each 128-byte column kt of d, one ring stage holding the rows' column (128 x 128 bytes) and the anchors' (256 x
 * 128), both written by the TMA in the 128-byte swizzled layout the descriptors above read (row j at j 128, its 16-byte
 * chunk c at c ^ (j % 8)); columns past d and rows past n or k arrive as zeros (anchors past k carry hb = +inf). Stage
 * s has two barriers: full (the producer's expected bytes landed) and empty (each consumer warp arrived once its
 * products from the stage retired). A consumer keeps one column's products in flight while issuing the next's
 * (wgmma.wait_group 1), then after a tile's last column scans its 64 x 256 set in 64-column slices (scan_tile, ties to
 * the earlier anchor) into the running best. Each anchor byte fetched serves 128 rows and each row byte 256 anchors;
 * the anchors stay in L2 across a tile sweep, and the blocks' rows while all SMs' row blocks fit beside them (16-bit
 * d 1024: 95% L2 hits). Where they do not (16-bit d 3072, tf32 d 1024), `splits` blocks share one row block, each
 * scanning a contiguous slice of the anchor tiles: launched side by side, they read the same rows at about the same
 * time, so the rows live in L2 at once shrink by that factor, and merge_rows combines their answers. */
constexpr int TMA_THREADS = 3 * 128; /* two consumer warpgroups, one producer */
template <typename T>
__global__ void __launch_bounds__(TMA_THREADS, 1)
    tma_wgmma_kernel(const __grid_constant__ CUtensorMap rows_map, const __grid_constant__ CUtensorMap anchors_map,
                     const float *__restrict__ hb, int64_t n, int kcols, int ntiles, int splits,
                     uint32_t *__restrict__ assign, unsigned long long *counter, unsigned long long *merged,
                     unsigned *tickets) {
  constexpr int BKE = 128 / (int)sizeof(T); /* elements in a 128-byte column */
  extern __shared__ unsigned char smem_raw[];
  const uint32_t s_raw = (uint32_t)__cvta_generic_to_shared(smem_raw), s_base = (s_raw + 1023u) & ~1023u;
  const uint32_t s_full = s_base + (uint32_t)(TMA_STAGES * TMA_STAGE_B), s_empty = s_full + 8 * TMA_STAGES;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, tq = lane & 3;
  /* this block's rows and its slice [nt0, nt1) of the anchor tiles (all of them when splits is 1) */
  const int64_t rblock = blockIdx.x / splits, row0 = rblock * TMA_BM;
  const int part = (int)(blockIdx.x - rblock * splits);
  const int nt0 = (int)((int64_t)ntiles * part / splits), nt1 = (int)((int64_t)ntiles * (part + 1) / splits);
  if (tid == 0) {
    for (int s = 0; s < TMA_STAGES; s++) {
      mbar_init(s_full + 8 * s, 1);
      mbar_init(s_empty + 8 * s, 8); /* one arrival per consumer warp */
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    fence_proxy_async();
  }
  __syncthreads();
  const int steps = (nt1 - nt0) * kcols;

  if (warp >= 8) { /* the producer warpgroup gives registers to the consumers (168 each at launch) */
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (warp == 8 && lane == 0)
      for (int it = 0; it < steps; it++) {
        const int s = it % TMA_STAGES, nq = it / kcols, kt = it - nq * kcols, nt = nt0 + nq;
        const uint32_t st = s_base + (uint32_t)(s * TMA_STAGE_B), full = s_full + 8 * s;
        mbar_wait(s_empty + 8 * s, ((it / TMA_STAGES) & 1) ^ 1); /* a fresh barrier passes parity 1 at once */
        mbar_expect_tx(full, TMA_STAGE_B);
        tma_load_2d(st, &rows_map, kt * BKE, (int)row0, full);
        tma_load_2d(st + TMA_BM * 128, &anchors_map, kt * BKE, nt * TMA_BN, full);
      }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory"); /* 128 x 40 + 256 x 232 <= 65536 */
  const int wg = warp >> 2;
  const uint64_t desc_hi = ((uint64_t)1 << 62) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 16);
  float acc[128];
  float best[1][2] = {{INFINITY, INFINITY}};
  int bidx[1][2] = {{0, 0}};
  int it = 0;
  for (int nt = nt0; nt < nt1; nt++) {
    for (int kt = 0; kt < kcols; kt++, it++) {
      const int s = it % TMA_STAGES;
      const uint32_t st = s_base + (uint32_t)(s * TMA_STAGE_B);
      mbar_wait(s_full + 8 * s, (it / TMA_STAGES) & 1);
      fence_regs(acc);
      wg_fence();
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const uint64_t adesc = desc_hi | ((st + (uint32_t)(wg * 64 * 128 + q * 32)) >> 4);
        const uint64_t bdesc = desc_hi | ((st + (uint32_t)(TMA_BM * 128 + q * 32)) >> 4);
        WgSS<T, TMA_BN>::run(acc, adesc, bdesc, kt > 0 || q > 0);
      }
      wg_commit();
      wg_wait<1>(); /* the previous column's products retired: its stage may be refilled */
      if (kt > 0 && lane == 0) mbar_arrive(s_empty + 8 * ((it - 1) % TMA_STAGES));
    }
    wg_wait<0>();
    if (lane == 0) mbar_arrive(s_empty + 8 * ((it - 1) % TMA_STAGES));
    fence_regs(acc);
    static_for<4>([&](auto J) {
      constexpr int j = decltype(J)::value;
      scan_tile<64>(*reinterpret_cast<const float(*)[32]>(acc + 32 * j), hb + (size_t)nt * TMA_BN + 64 * j, nt * 4 + j,
                    tq, best[0], bidx[0]);
    });
  }
  if (splits > 1) {
    merge_rows(best, bidx, wg * 64 + (warp & 3) * 16, row0, n, splits, assign, counter, merged, tickets + rblock);
    return;
  }
  /* the rows' previous a[]: read by the thread that then overwrites it */
  write_rows<1>(best, bidx, wg * 64 + (warp & 3) * 16, row0, n, assign + row0, assign, counter);
}

/* Per element type and row length: anchors per tile, ring stages, warpgroups, rows in shared memory, row
 * blocks per warpgroup. tf32: 64-anchor tiles keep the two accumulator sets and the rows' 128 fragment
 * registers under 255. 16-bit rows up to 128 elements: in shared memory, three warpgroups. Longer 16-bit
 * rows (WIDE): neither 384 such rows nor the ring of 128-anchor tiles fit in shared memory, so each
 * warpgroup holds one 64-row block's fragments in registers (dp / 4 a thread, 96 at d 384) and the
 * anchors come in 64-anchor tiles, 4 stages. */
/* KS 32-byte steps (a row of 32 KS / sizeof(T) elements) that an instance takes: 16-bit rows of 32 to 384
 * elements, tf32 rows of 32, 64 or 128 (a tf32 row of 96 would split a thread's copies over two swizzle
 * columns); WIDE: the 16-bit rows longer than 128 elements. Other rows go to tma_wgmma_kernel, which is
 * faster than a kernel that held the rows in shared memory and streamed the anchors in 128-byte pieces at
 * every width that one took (640 to 1472 bytes; docs/performance.md). */
constexpr int KS_MAX = 24; /* 768-byte rows */
constexpr bool ks_ok(size_t es, int ks) {
  return es == 2 ? ks >= 2 && ks <= KS_MAX && ks % 2 == 0 : ks == 4 || ks == 8 || ks == 16;
}
constexpr bool ks_wide(size_t es, int ks) { return es == 2 && ks > 8; }
template <typename T, bool WIDE = false>
struct Cfg {
  static constexpr bool SS = sizeof(T) == 2 && !WIDE;
  static constexpr int BN = SS ? 128 : 64, STAGES = SS ? 3 : 4, NWG = SS ? 3 : 2, RB = WIDE ? 1 : 2;
  template <int KS>
  static constexpr size_t smem() {
    constexpr size_t BM = (size_t)NWG * 64 * RB, ROWS = SS ? BM : 0,
                     SROWB = (KS + 3) / 4 * 128; /* rows held in shared memory */
    return (size_t)STAGES * (BN * SROWB + 1024) + ROWS * SROWB + BM * 4 + 1024;
  }
};
template <typename T, int KS>
using CfgOf = Cfg<T, ks_wide(sizeof(T), KS)>;

/* f(KS) (a std::integral_constant) for the instance that takes rows of dp elements; false where none
 * does (the mma.sync kernels, or the GEMM path, take them) */
template <typename T, typename F>
bool with_ks(int64_t dp, F &&f) {
  if (dp <= 0 || dp % 32 || dp * (int64_t)sizeof(T) > KS_MAX * 32) return false;
  const int ks = (int)(dp * (int64_t)sizeof(T) / 32);
  bool found = false;
  static_for<KS_MAX / 2>([&](auto Q) {
    constexpr int q = 2 * (decltype(Q)::value + 1);
    if constexpr (ks_ok(sizeof(T), q))
      if (ks == q) {
        f(std::integral_constant<int, q>{});
        found = true;
      }
  });
  return found;
}

/* tma_wgmma_kernel's shared memory: the ring, its barriers, alignment */
constexpr size_t TMA_SMEM = (size_t)TMA_STAGES * TMA_STAGE_B + 16 * TMA_STAGES + 1024;

template <typename T>
size_t smem_of(int64_t dp) {
  size_t bytes = 0;
  with_ks<T>(dp, [&](auto KS) { bytes = CfgOf<T, decltype(KS)::value>::template smem<decltype(KS)::value>(); });
  return bytes;
}

/* The 2-D tensor map of `rows` rows of dp elements at base, read in boxes of box_rows rows x 128 bytes,
 * 128-byte swizzled, zeros outside. The driver's encoder comes through the runtime's entry-point query,
 * so the program needs no link to libcuda. */
/* the driver's encoder, looked up once (a function-local static: initialised once, whichever thread comes
 * first); NULL where the driver has none */
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    cudaDriverEntryPointQueryResult found;
    void *fn = NULL;
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
    return e == cudaSuccess && found == cudaDriverEntryPointSuccess ? (PFN_cuTensorMapEncodeTiled_v12000)fn : nullptr;
  }();
  return encode;
}

template <typename T>
cudaError_t tensor_map(CUtensorMap *map, const void *base, int64_t rows, int64_t dp, int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (!encode) return cudaErrorSymbolNotFound;
  const CUtensorMapDataType type = sizeof(T) == 4                   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : std::is_same<T, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                    : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint64_t dims[2] = {(cuuint64_t)dp, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)dp * sizeof(T)};
  const cuuint32_t box[2] = {128 / (cuuint32_t)sizeof(T), (cuuint32_t)box_rows}, unit[2] = {1, 1};
  const CUresult r =
      encode(map, type, 2, const_cast<void *>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

template <typename T>
cudaError_t launch_tma(const void *X, const void *A, const float *hb, int64_t n, int64_t dp, int64_t k, int splits,
                       uint32_t *assign, unsigned long long *counter, unsigned long long *merged, unsigned *tickets,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  CUtensorMap rows_map, anchors_map;
  cudaError_t e = tensor_map<T>(&rows_map, X, n, dp, TMA_BM);
  if (e == cudaSuccess) e = tensor_map<T>(&anchors_map, A, k, dp, TMA_BN);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(tma_wgmma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)TMA_SMEM);
  if (e != cudaSuccess) return e;
  const int kcols = (int)((dp * (int64_t)sizeof(T) + 127) / 128);
  const int ntiles = (int)((k + TMA_BN - 1) / TMA_BN); /* anchors past k (to the 256-anchor padding): hb = +inf */
  if (splits < 1 || splits > ntiles || (splits > 1 && (!merged || !tickets))) return cudaErrorInvalidValue;
  /* a row block's blocks next to each other: the scheduler starts them together */
  const unsigned blocks = (unsigned)((n + TMA_BM - 1) / TMA_BM * splits);
  tma_wgmma_kernel<T><<<blocks, TMA_THREADS, TMA_SMEM, stream>>>(rows_map, anchors_map, hb, n, kcols, ntiles, splits,
                                                                 assign, counter, merged, tickets);
  return cudaGetLastError();
}

template <typename T, int KS>
cudaError_t launch_ks(const void *X, const void *A, const float *hb, int64_t n, int64_t k, uint32_t *assign,
                      unsigned long long *counter, int sms, cudaStream_t stream) {
  using C = CfgOf<T, KS>;
  constexpr int BM = C::NWG * 64 * C::RB;
  const size_t smem = C::template smem<KS>();
  auto kern = fused_wgmma_kernel<T, C::BN, KS, C::STAGES, C::NWG, C::SS, C::RB>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return e;
  const int ntiles = (int)((k + C::BN - 1) / C::BN); /* anchors past k (to the 256-anchor padding) carry hb = +inf */
  const unsigned blocks = (unsigned)((n + BM - 1) / BM);
  /* one block per SM: the block an SM runs next is about `sms` blocks on */
  kern<<<blocks, C::NWG * 128, smem, stream>>>((const T *)X, (const T *)A, hb, n, ntiles, assign, counter, sms);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch(const void *X, const void *A, const float *hb, int64_t n, int64_t dp, int64_t k, uint32_t *assign,
                   unsigned long long *counter, int sms, cudaStream_t stream) {
  cudaError_t e = cudaErrorInvalidValue;
  with_ks<T>(dp, [&](auto KS) { e = launch_ks<T, decltype(KS)::value>(X, A, hb, n, k, assign, counter, sms, stream); });
  return e;
}

} // namespace

size_t va_wgmma_smem(int precision, int64_t dp) {
  switch (precision) {
  case VA_CUDA_TF32: return smem_of<float>(dp);
  case VA_CUDA_FP16: return smem_of<__half>(dp);
  case VA_CUDA_BF16: return smem_of<__nv_bfloat16>(dp);
  }
  return 0;
}

cudaError_t va_wgmma_argmin(int precision, const void *X, const void *A, const float *hb, int64_t n, int64_t dp,
                            int64_t k, uint32_t *assign, unsigned long long *counter, int sms, cudaStream_t stream) {
  switch (precision) {
  case VA_CUDA_TF32: return launch<float>(X, A, hb, n, dp, k, assign, counter, sms, stream);
  case VA_CUDA_FP16: return launch<__half>(X, A, hb, n, dp, k, assign, counter, sms, stream);
  case VA_CUDA_BF16: return launch<__nv_bfloat16>(X, A, hb, n, dp, k, assign, counter, sms, stream);
  }
  return cudaErrorInvalidValue;
}

size_t va_tma_smem(int precision, int64_t dp) {
  const bool known = precision == VA_CUDA_TF32 || precision == VA_CUDA_FP16 || precision == VA_CUDA_BF16;
  return known && dp > 0 && dp % 32 == 0 ? TMA_SMEM : 0;
}

cudaError_t va_tma_argmin(int precision, const void *X, const void *A, const float *hb, int64_t n, int64_t dp,
                          int64_t k, int splits, uint32_t *assign, unsigned long long *counter,
                          unsigned long long *merged, unsigned *tickets, cudaStream_t stream) {
  if (!va_tma_smem(precision, dp)) return cudaErrorInvalidValue;
  switch (precision) {
  case VA_CUDA_TF32: return launch_tma<float>(X, A, hb, n, dp, k, splits, assign, counter, merged, tickets, stream);
  case VA_CUDA_FP16: return launch_tma<__half>(X, A, hb, n, dp, k, splits, assign, counter, merged, tickets, stream);
  case VA_CUDA_BF16:
    return launch_tma<__nv_bfloat16>(X, A, hb, n, dp, k, splits, assign, counter, merged, tickets, stream);
  }
  return cudaErrorInvalidValue;
}
