/* search.cu: the GPU side of nearest-neighbour search (cuda/search.h): one rank's inverted lists and the
 * index's anchors resident on the device; per batch the probe (queries against the anchors) and the list
 * scan (queries against the rows of the lists they probe), both by one tiled kernel with a fused top-k,
 * bitwise the CPU engine's answer.
 *
 * Work. The queries of a batch are grouped by the lists they probe (host side: a counting sort of the
 * (query, probe) pairs). A work item is one list, up to QT = 32 of its pairs and one of nsplit parts of
 * its rows; one block of 256 threads takes one item and reads the part's rows once, in tiles of RT = 64
 * rows, for all its queries (the tile and a 32-coordinate chunk of the queries in shared memory). An
 * exact scan is one list holding every row that every query probes; the probe is the anchors as one
 * list, measured by the probe's key. Each item leaves, per pair, its k best sorted; a second kernel
 * merges a query's nprobe x nsplit lists into its k first.
 *
 * The distance. Lane u of a group of 8 lanes builds the recipe's partial sum s_u over t = u, u + 8, ...
 * in increasing t, one fused multiply-add a step (l2: fma(q - x, q - x, s); cosine and the probe:
 * fma(q, x, s)), for 4 queries x 16 rows at once (64 independent chains: each shared-memory load serves
 * 4 or 16 of them). A reduce-scatter over lane distances 4, 2, 1 then combines the eight sums of each pair
 * as ((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7)) (each step adds the partner's sum to one's own; float addition is
 * commutative bit for bit), leaving each lane 8 finished pairs. The finish is the CPU's: l2 the sum,
 * cosine max(0, 1 - sum) (never -0), the probe |a|^2 - (sum + sum). The steps use the round-to-nearest
 * intrinsics, which nvcc never contracts or reorders, and this file is compiled with -ftz=false
 * -prec-div=true -prec-sqrt=true whatever the global flags say (cmake/cuda.cmake): so every distance has
 * the CPU kernel's bits, denormal partial sums included.
 *
 * Precisions. fp32 is the recipe above. tf32, fp16 and bf16 (the list scan only; the probe is always the
 * recipe) take the products on the tensor cores (mma.sync m16n8k8 / m16n8k16, fp32 accumulation): the
 * rows are stored in that type (fp16/bf16: rounded to nearest once, at upload; tf32: float32, whose top 19
 * bits the tensor cores read), the queries are rounded likewise as they enter shared memory, and a
 * warp computes 16 queries x 16 rows of the tile's dot products; l2 = |q|^2 + |x|^2 - 2 q.x (norms in
 * fp32 of the stored values), cosine = 1 - q.x, both at least 0. Each distance is still a function of
 * the query and the row alone (the chunking over d is fixed), so the answer does not depend on the rank
 * count or the batch; it differs from fp32's where the rounding reorders near neighbours.
 *
 * The top-k. Warp w owns queries 4w..4w+3 of its item: their distances come from its lanes alone, so a
 * warp keeps their top-k without block barriers. Each query has a buffer of BUFQ entries in shared
 * memory: its k best so far, sorted, in [0, k), candidates appended after. A distance is a candidate
 * when its (distance, id) comes before the k-th best at the last compaction (a looser bound than the
 * current k-th is still exact). When a buffer could overflow with the next tile, the warp sorts it
 * (bitonic, by distance then id as unsigned, so the fillers (+inf, -1) go last) and keeps its first k.
 * The k first entries under a total order depend only on the set of rows scanned: the answer is the
 * CPU's, entry for entry. No queries x rows matrix is formed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/check.cuh" /* VA_CUDA, VA_LAUNCHED, dalloc, dfree, dgrow */
#include "cuda/elem.cuh"  /* elem_to_float, elem_from_float */
#include "cuda/mma.cuh"   /* Mma<T>: one tensor-core k-step */
#include "cuda/search.h"
#include "cuda/topk.cuh" /* entry_before, warp_sort, warp_fill, warp_compact */

static const int THREADS = 256;       /* 8 warps */
static const int QT = 32;             /* pairs (queries) per work item: 4 per warp */
static const int RT = 64;             /* rows per tile: 4 groups of a warp x 16 rows */
static const int TC = 32;             /* coordinates per chunk held in shared memory */
static const int STRIDE = TC + 8;     /* a chunk row's floats: 8 of padding make the lanes' reads conflict-free */
static const int SMALL_BUF = 128;     /* a query's buffer for k <= SMALL_BUF - RT */
static const int LARGE_BUF = 512;     /* ... and up to VA_CUDA_SEARCH_MAX_K */
static const int MIN_PART_ROWS = 512; /* a list is not cut into parts smaller than this */
static const int MAX_SPLIT = 64;
/* A batch's per-pair results are nq x nprobe x nsplit x k entries: the batch is scanned in pieces that
 * keep them under this many. */
static const int64_t MAX_PIECE_ENTRIES = (int64_t)1 << 24;
static_assert(LARGE_BUF - RT >= VA_CUDA_SEARCH_MAX_K, "a full tile of candidates fits beside the k best");
/* The tensor-core scan: a chunk is 128 bytes of a row (4 k-steps of 32 bytes: 8 floats or 16 halves);
 * 16 bytes of padding make the fragment reads conflict-free; the tile's dot products go through
 * shared memory (DS_STRIDE floats a query, conflict-free for the offers). */
static const int MMA_CHUNK_BYTES = 128;
static const int MMA_STRIDE_BYTES = MMA_CHUNK_BYTES + 16;
static const int DS_STRIDE = RT + 8;

enum measure_t { MEASURE_L2, MEASURE_COSINE, MEASURE_PROBE_L2 };

/* What one scan reads: rows X in lists (list j: rows [offset[j], offset[j + 1])), their ids (NULL: the
 * row number), and for the probe the rows' |x|^2. */
struct scan_set {
  const void *X; /* float, or the tensor-core scan's element type */
  const int64_t *ids;
  const float *norms;
  const int64_t *offset;   /* device, nlists + 1 */
  const int64_t *h_offset; /* the same on the host */
  int64_t nlists, nrows;
};

/* One block's work: pairs [pair0, pair0 + npairs) of the grouped pairs, all probing `list`, over part
 * `part` of nsplit of its rows. */
struct work_item {
  int list, part, pair0, npairs;
};

struct va_cuda_search {
  int device, sms;
  int64_t nlists, nrows, d, nanchors;
  va_cuda_precision_t precision;
  cudaStream_t stream;
  void *X;                                                        /* rows in list order: float, or fp16/bf16 */
  float *X_norms;                                                 /* the tensor-core l2: the stored rows' |x|^2 */
  float *A, *A_norms;                                             /* anchors; their |a|^2 (the l2 probe) */
  int64_t *ids, *offset, *h_offset;                               /* row ids; list offsets on the device and the host */
  int64_t *all_offset, h_all_offset[2], *a_offset, h_a_offset[2]; /* one list of every row / anchor */
  /* per batch, grown on demand */
  float *Q, *Q_norms;
  int *pairs;
  work_item *items;
  va_neighbor_t *part_out, *out;
  size_t Q_cap, Q_norms_cap, pairs_cap, items_cap, part_out_cap, out_cap; /* elements */
  int *h_pairs, *h_count;
  work_item *h_items;
  size_t h_pairs_cap, h_count_cap, h_items_cap;
};

/* The finished distance of one pair from the recipe's sum (cpu/search.c: finish). */
template <int MEASURE>
__device__ __forceinline__ float finish(float sum, float norm) {
  if (MEASURE == MEASURE_L2) return sum;
  if (MEASURE == MEASURE_PROBE_L2) return __fsub_rn(norm, __fadd_rn(sum, sum));
  const float c = __fsub_rn(1.0f, sum);
  return c > 0 ? c : 0.0f;
}

/* One half-exchange of the reduce-scatter: lanes that differ in bit `bit` split v[0, 2h) so that the lane
 * with the bit set keeps (and finishes) the upper h values, the other the lower h. */
template <int H>
__device__ __forceinline__ void exchange(float *v, int bit, int lane) {
  const bool upper = (lane & bit) != 0;
#pragma unroll
  for (int i = 0; i < H; i++) {
    const float keep = upper ? v[H + i] : v[i], send = upper ? v[i] : v[H + i];
    v[i] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, bit));
  }
}

/* --- the per-query buffers of a work item, shared by both scans ---------------------------------- */
/* Shared memory of a scan block: the QT buffers (ids, then distances), then the variant's tiles, then
 * each buffer's candidate count and the item's query numbers. */
template <int BUF>
struct item_buffers {
  unsigned long long *id; /* QT x BUF */
  float *dist;            /* QT x BUF */
  int *count, *query;     /* QT each */
  unsigned char *tiles;   /* the variant's own */
  __device__ item_buffers(unsigned char *smem, size_t tile_bytes) {
    id = (unsigned long long *)smem;
    dist = (float *)(id + QT * BUF);
    tiles = (unsigned char *)(dist + QT * BUF);
    count = (int *)(tiles + tile_bytes);
    query = count + QT;
  }
  /* Every thread: fillers everywhere, counts 0, the item's query numbers (pair / nprobe). Ends with a
   * block barrier. */
  __device__ void start(const work_item &item, const int *__restrict__ pairs, int nprobe) {
    if (threadIdx.x < QT) {
      count[threadIdx.x] = 0;
      query[threadIdx.x] = (int)threadIdx.x < item.npairs ? pairs[item.pair0 + threadIdx.x] / nprobe : -1;
    }
    for (int i = threadIdx.x; i < QT * BUF; i += THREADS) {
      dist[i] = __int_as_float(0x7f800000);
      id[i] = ~0ull;
    }
    __syncthreads();
  }
  /* A lane offers (dist, row) to the buffer of pair `slot`, against its bound (the k-th at the slot's last
   * compaction; only this warp's lanes offer to it). */
  __device__ __forceinline__ void offer(int slot, int k, float d, int64_t row, const int64_t *__restrict__ ids,
                                        float bound_d, unsigned long long bound_id) {
    if (!(d <= bound_d)) return;
    const unsigned long long i = ids ? (unsigned long long)ids[row] : (unsigned long long)row;
    if (!entry_before(d, i, bound_d, bound_id)) return;
    const int pos = atomicAdd(&count[slot], 1);
    dist[slot * BUF + k + pos] = d;
    id[slot * BUF + k + pos] = i;
  }
  /* After a tile's offers (the whole warp): each of the warp's four buffers that could not take another
   * full tile is compacted; the lane whose slot it is takes the new bound. */
  __device__ void compact(int warp, int lane, int slot, int k, float &bound_d, unsigned long long &bound_id) {
    __syncwarp();
#pragma unroll 1
    for (int qi = 0; qi < 4; qi++) {
      const int s = 4 * warp + qi;
      if (count[s] > BUF - k - RT) {
        warp_compact<BUF>(dist + s * BUF, id + s * BUF, &count[s], k, lane);
        if (s == slot) {
          bound_d = dist[s * BUF + k - 1];
          bound_id = id[s * BUF + k - 1];
        }
      }
    }
  }
  /* The warp's pairs' k first to out[(pair * nsplit + part) * k ...]. */
  __device__ void finish(int warp, int lane, const work_item &item, const int *__restrict__ pairs, int nsplit, int k,
                         va_neighbor_t *__restrict__ out) {
#pragma unroll 1
    for (int qi = 0; qi < 4; qi++) {
      const int s = 4 * warp + qi;
      if (s >= item.npairs) break;
      if (count[s] > 0) warp_sort<BUF>(dist + s * BUF, id + s * BUF, lane);
      va_neighbor_t *o = out + ((int64_t)pairs[item.pair0 + s] * nsplit + item.part) * k;
      for (int i = lane; i < k; i += 32) {
        va_neighbor_t e;
        e.dist = dist[s * BUF + i];
        e.id = (int64_t)id[s * BUF + i];
        o[i] = e;
      }
    }
  }
};

/* The rows [a, b) of an item's part. */
__device__ __forceinline__ void part_rows(const scan_set &set, const work_item &item, int nsplit, int64_t *a,
                                          int64_t *b) {
  const int64_t r0 = set.offset[item.list], m = set.offset[item.list + 1] - r0;
  *a = r0 + m * item.part / nsplit;
  *b = r0 + m * (item.part + 1) / nsplit;
}

/* --- fp32: the recipe on CUDA cores ---------------------------------------------------------------- */
static __host__ __device__ constexpr size_t recipe_tile_bytes() { return (size_t)(QT + RT) * STRIDE * sizeof(float); }

/* One work item per block (see the file's comment). Q: the batch's queries; pairs: q * nprobe + p of
 * each (query, probe), grouped by list; out[(pair * nsplit + part) * k ...]: each pair's k first over
 * its part. */
template <int MEASURE, int BUF>
__global__ void __launch_bounds__(THREADS)
    scan_kernel(scan_set set, int64_t d, const float *__restrict__ Q, const int *__restrict__ pairs, int nprobe,
                const work_item *__restrict__ items, int nsplit, int k, va_neighbor_t *__restrict__ out) {
  extern __shared__ __align__(16) unsigned char smem[];
  item_buffers<BUF> buf(smem, recipe_tile_bytes());
  float *Qs = (float *)buf.tiles; /* QT x STRIDE */
  float *Xs = Qs + QT * STRIDE;   /* RT x STRIDE */
  const float *__restrict__ X = (const float *)set.X;
  const work_item item = items[blockIdx.x];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, u = lane % 8, gw = lane / 8;
  buf.start(item, pairs, nprobe);
  int64_t a, b;
  part_rows(set, item, nsplit, &a, &b);
  /* after the reduce-scatter lane u holds query mq of its warp's four and rows 8 (u & 1) + j of its
   * group's sixteen, j < 8 (tile row 4 (8 (u & 1) + j) + gw) */
  const int mq = 2 * ((u >> 2) & 1) + ((u >> 1) & 1), slot = 4 * warp + mq;
  const bool warp_active = 4 * warp < item.npairs, lane_active = slot < item.npairs;
  float bound_d = __int_as_float(0x7f800000);
  unsigned long long bound_id = ~0ull;
  for (int64_t base = a; base < b; base += RT) {
    float acc[64]; /* acc[qi * 16 + r]: query 4 warp + qi, tile row 4 r + gw; lane u's partial sum s_u */
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f;
    for (int64_t t0 = 0; t0 < d; t0 += TC) {
      __syncthreads(); /* the previous chunk's reads are done */
      for (int e = tid; e < QT * TC; e += THREADS) {
        const int qq = e / TC, tt = e % TC;
        Qs[qq * STRIDE + tt] = qq < item.npairs && t0 + tt < d ? Q[(int64_t)buf.query[qq] * d + t0 + tt] : 0.0f;
      }
      for (int e = tid; e < RT * TC; e += THREADS) {
        const int rr = e / TC, tt = e % TC;
        Xs[rr * STRIDE + tt] = base + rr < b && t0 + tt < d ? X[(base + rr) * d + t0 + tt] : 0.0f;
      }
      __syncthreads();
      if (warp_active) { /* uniform over the warp */
        const int tn = d - t0 < TC ? (int)(d - t0) : TC;
#pragma unroll
        for (int i = 0; i < TC / 8; i++) {
          const int t = u + 8 * i;
          if (t < tn) { /* coordinates past d are not added at all, as in the recipe */
            float qv[4], xv[16];
#pragma unroll
            for (int qi = 0; qi < 4; qi++) qv[qi] = Qs[(4 * warp + qi) * STRIDE + t];
#pragma unroll
            for (int r = 0; r < 16; r++) xv[r] = Xs[(4 * r + gw) * STRIDE + t];
#pragma unroll
            for (int qi = 0; qi < 4; qi++)
#pragma unroll
              for (int r = 0; r < 16; r++) {
                if (MEASURE == MEASURE_L2) {
                  const float diff = __fsub_rn(qv[qi], xv[r]);
                  acc[qi * 16 + r] = __fmaf_rn(diff, diff, acc[qi * 16 + r]);
                } else acc[qi * 16 + r] = __fmaf_rn(qv[qi], xv[r], acc[qi * 16 + r]);
              }
          }
        }
      }
    }
    if (!warp_active) continue; /* its lanes still join every barrier of the next tile */
    /* ((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7)): pair index qi * 16 + r lands in lane u with
     * qi = 2 bit2(u) + bit1(u), r = 8 bit0(u) + j at acc[j] */
    exchange<32>(acc, 4, lane);
    exchange<16>(acc, 2, lane);
    exchange<8>(acc, 1, lane);
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const int64_t row = base + 4 * (8 * (u & 1) + j) + gw;
      if (lane_active && row < b)
        buf.offer(slot, k, finish<MEASURE>(acc[j], MEASURE == MEASURE_PROBE_L2 ? set.norms[row] : 0.0f), row, set.ids,
                  bound_d, bound_id);
    }
    buf.compact(warp, lane, slot, k, bound_d, bound_id);
  }
  __syncthreads();
  if (warp_active) buf.finish(warp, lane, item, pairs, nsplit, k, out);
}

/* --- tf32 / fp16 / bf16: the products on the tensor cores ----------------------------------------- */

static __host__ __device__ constexpr size_t mma_tile_bytes() {
  return (size_t)(QT + RT) * MMA_STRIDE_BYTES + (size_t)QT * DS_STRIDE * sizeof(float);
}

/* The same work as scan_kernel, the products on the tensor cores: warp w computes queries
 * 16 (w / 4) + [0, 16) x tile rows 16 (w % 4) + [0, 16) (two m16n8 tiles) over the chunks, writes the dot
 * products to Ds, and after a barrier offers those of its own four queries as scan_kernel does.
 * qnorm: the queries' |q|^2 (l2). */
template <typename T, int MEASURE, int BUF>
__global__ void __launch_bounds__(THREADS)
    scan_mma_kernel(scan_set set, int64_t d, const float *__restrict__ Q, const float *__restrict__ qnorm,
                    const int *__restrict__ pairs, int nprobe, const work_item *__restrict__ items, int nsplit, int k,
                    va_neighbor_t *__restrict__ out) {
  constexpr int CE = MMA_CHUNK_BYTES / (int)sizeof(T); /* elements a chunk */
  extern __shared__ __align__(16) unsigned char smem[];
  item_buffers<BUF> buf(smem, mma_tile_bytes());
  unsigned char *Qs = buf.tiles;                     /* QT rows of MMA_STRIDE_BYTES */
  unsigned char *Xs = Qs + QT * MMA_STRIDE_BYTES;    /* RT rows */
  float *Ds = (float *)(Xs + RT * MMA_STRIDE_BYTES); /* QT x DS_STRIDE dot products */
  const T *__restrict__ X = (const T *)set.X;
  const work_item item = items[blockIdx.x];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2, tig = lane & 3;
  buf.start(item, pairs, nprobe);
  int64_t a, b;
  part_rows(set, item, nsplit, &a, &b);
  const int mq0 = 16 * (warp / 4), n0 = 16 * (warp % 4);
  const int slot = 4 * warp + lane / 8; /* the offers: query slot, tile rows lane % 8 + 8 j */
  const bool warp_active = 4 * warp < item.npairs, lane_active = slot < item.npairs;
  const float qn = lane_active && MEASURE == MEASURE_L2 ? qnorm[buf.query[slot]] : 0.0f;
  float bound_d = __int_as_float(0x7f800000);
  unsigned long long bound_id = ~0ull;
  for (int64_t base = a; base < b; base += RT) {
    float c[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    for (int64_t t0 = 0; t0 < d; t0 += CE) {
      __syncthreads(); /* the previous chunk's reads (and the previous tile's offers) are done */
      for (int e = tid; e < QT * CE; e += THREADS) {
        const int qq = e / CE, tt = e % CE;
        ((T *)(Qs + qq * MMA_STRIDE_BYTES))[tt] =
            elem_from_float<T>(qq < item.npairs && t0 + tt < d ? Q[(int64_t)buf.query[qq] * d + t0 + tt] : 0.0f);
      }
      for (int e = tid; e < RT * CE; e += THREADS) {
        const int rr = e / CE, tt = e % CE;
        ((T *)(Xs + rr * MMA_STRIDE_BYTES))[tt] =
            base + rr < b && t0 + tt < d ? X[(base + rr) * d + t0 + tt] : elem_from_float<T>(0.0f);
      }
      __syncthreads();
      if (mq0 < item.npairs) { /* uniform over the warp: its 16 queries are not all absent */
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
          const unsigned char *qa = Qs + (mq0 + g) * MMA_STRIDE_BYTES + ks * 32 + 4 * tig;
          uint32_t fa[4], fb[2];
          fa[0] = *(const uint32_t *)qa;
          fa[1] = *(const uint32_t *)(qa + 8 * MMA_STRIDE_BYTES);
          fa[2] = *(const uint32_t *)(qa + 16);
          fa[3] = *(const uint32_t *)(qa + 8 * MMA_STRIDE_BYTES + 16);
#pragma unroll
          for (int nt = 0; nt < 2; nt++) {
            const unsigned char *xb = Xs + (n0 + 8 * nt + g) * MMA_STRIDE_BYTES + ks * 32 + 4 * tig;
            fb[0] = *(const uint32_t *)xb;
            fb[1] = *(const uint32_t *)(xb + 16);
            Mma<T>::run(c[nt], fa, fb);
          }
        }
      }
    }
    /* c[nt][i]: query mq0 + g + 8 (i >> 1), tile row n0 + 8 nt + 2 tig + (i & 1) */
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) Ds[(mq0 + g + 8 * (i >> 1)) * DS_STRIDE + n0 + 8 * nt + 2 * tig + (i & 1)] = c[nt][i];
    __syncthreads();
    if (!warp_active) continue;
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const int r = lane % 8 + 8 * j;
      const int64_t row = base + r;
      if (!lane_active || row >= b) continue;
      const float dot = Ds[slot * DS_STRIDE + r];
      float dist;
      if (MEASURE == MEASURE_L2) dist = fmaxf(qn + set.norms[row] - 2.0f * dot, 0.0f);
      else dist = fmaxf(1.0f - dot, 0.0f);
      buf.offer(slot, k, dist, row, set.ids, bound_d, bound_id);
    }
    buf.compact(warp, lane, slot, k, bound_d, bound_id);
  }
  __syncthreads();
  if (warp_active) buf.finish(warp, lane, item, pairs, nsplit, k, out);
}

/* Rows in T (fp16/bf16: rounded to nearest) from float, and every stored row's |x|^2 in fp32. */
template <typename T>
__global__ void convert_rows_kernel(const float *__restrict__ in, int64_t n, T *__restrict__ out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = elem_from_float<T>(in[i]);
}
template <typename T>
__global__ void row_norms_kernel(const T *__restrict__ X, int64_t n, int64_t d, float *__restrict__ norms) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int64_t t = 0; t < d; t++) {
      const float v = elem_to_float(X[i * d + t]);
      s = fmaf(v, v, s);
    }
    norms[i] = s;
  }
}

/* One warp a query: the k first of its L sorted lists of k entries (in[(q * L + l) * k ...]) into
 * out[q * k ...], by the scan's buffer: entries offered 32 at a time. */
template <int BUF>
__global__ void __launch_bounds__(THREADS)
    merge_kernel(const va_neighbor_t *__restrict__ in, int64_t nq, int L, int k, va_neighbor_t *__restrict__ out) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned long long *sid = (unsigned long long *)smem + warp * BUF;
  float *sd = (float *)((unsigned long long *)smem + (THREADS / 32) * BUF) + warp * BUF;
  int *count = (int *)((float *)((unsigned long long *)smem + (THREADS / 32) * BUF) + (THREADS / 32) * BUF) + warp;
  const int64_t q = (int64_t)blockIdx.x * (THREADS / 32) + warp;
  if (q >= nq) return; /* a whole warp: no block barrier below */
  warp_fill<BUF>(sd, sid, 0, lane);
  if (lane == 0) *count = 0;
  __syncwarp();
  float bound_d = __int_as_float(0x7f800000);
  unsigned long long bound_id = ~0ull;
  const va_neighbor_t *src = in + q * L * (int64_t)k;
  const int64_t n = (int64_t)L * k;
  for (int64_t c = 0; c < n; c += 32) {
    if (c + lane < n) {
      const va_neighbor_t e = src[c + lane];
      const unsigned long long id = (unsigned long long)e.id;
      if (entry_before(e.dist, id, bound_d, bound_id)) {
        const int pos = atomicAdd(count, 1);
        sd[k + pos] = e.dist;
        sid[k + pos] = id;
      }
    }
    __syncwarp();
    if (*count > BUF - k - 32) {
      warp_compact<BUF>(sd, sid, count, k, lane);
      bound_d = sd[k - 1];
      bound_id = sid[k - 1];
    }
  }
  if (*count > 0) warp_sort<BUF>(sd, sid, lane);
  for (int i = lane; i < k; i += 32) {
    va_neighbor_t e;
    e.dist = sd[i];
    e.id = (int64_t)sid[i];
    out[q * k + i] = e;
  }
}

static size_t scan_smem(int buf, size_t tile_bytes) {
  return (size_t)QT * buf * (sizeof(unsigned long long) + sizeof(float)) + tile_bytes + 2 * QT * sizeof(int);
}
static size_t merge_smem(int buf) {
  return (size_t)(THREADS / 32) * (buf * (sizeof(unsigned long long) + sizeof(float)) + sizeof(int));
}

/* The same for a host buffer. */
template <typename P>
static void ensure_host(P **buf, size_t *cap, size_t n, const char *what) {
  if (n <= *cap) return;
  free(*buf);
  *buf = (P *)va_malloc(n * sizeof **buf, what);
  *cap = n;
}

/* One scan launch: `precision` picks the kernel (the probe is always fp32). */
template <int MEASURE, int BUF>
static void launch_scan(const va_cuda_search_t *s, const scan_set &set, va_cuda_precision_t precision, int nprobe,
                        int nsplit, int items, int k, va_neighbor_t *out) {
  if constexpr (MEASURE != MEASURE_PROBE_L2) {
    if (precision != VA_CUDA_FP32) {
      const size_t smem = scan_smem(BUF, mma_tile_bytes());
      auto kernel = precision == VA_CUDA_TF32   ? scan_mma_kernel<float, MEASURE, BUF>
                    : precision == VA_CUDA_FP16 ? scan_mma_kernel<__half, MEASURE, BUF>
                                                : scan_mma_kernel<__nv_bfloat16, MEASURE, BUF>;
      VA_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
      kernel<<<(unsigned)items, THREADS, smem, s->stream>>>(set, s->d, s->Q, s->Q_norms, s->pairs, nprobe, s->items,
                                                            nsplit, k, out);
      VA_LAUNCHED();
      return;
    }
  }
  const size_t smem = scan_smem(BUF, recipe_tile_bytes());
  VA_CUDA(cudaFuncSetAttribute(scan_kernel<MEASURE, BUF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  scan_kernel<MEASURE, BUF>
      <<<(unsigned)items, THREADS, smem, s->stream>>>(set, s->d, s->Q, s->pairs, nprobe, s->items, nsplit, k, out);
  VA_LAUNCHED();
}

template <int BUF>
static void launch_merge(const va_cuda_search_t *s, int64_t nq, int L, int k) {
  const size_t smem = merge_smem(BUF);
  VA_CUDA(cudaFuncSetAttribute(merge_kernel<BUF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const int64_t blocks = (nq + THREADS / 32 - 1) / (THREADS / 32);
  merge_kernel<BUF><<<(unsigned)blocks, THREADS, smem, s->stream>>>(s->part_out, nq, L, k, s->out);
  VA_LAUNCHED();
}

/* Queries [0, nq) of the device's Q, each probing lists probes[q * nprobe ...] of `set` (NULL: list 0,
 * nprobe 1): their k first into s->out (device), nq x k. nq x nprobe x nsplit x k fits the piece limit. */
static void scan_piece(va_cuda_search_t *s, const scan_set &set, va_cuda_precision_t precision, int64_t nq,
                       const int64_t *probes, int64_t nprobe, int measure, int64_t k) {
  const int64_t npairs = nq * nprobe;
  /* pairs grouped by list: a counting sort */
  ensure_host(&s->h_count, &s->h_count_cap, (size_t)set.nlists + 1, "search list counts");
  ensure_host(&s->h_pairs, &s->h_pairs_cap, (size_t)npairs, "search pairs");
  int *cnt = s->h_count;
  memset(cnt, 0, ((size_t)set.nlists + 1) * sizeof *cnt);
  for (int64_t i = 0; i < npairs; i++) {
    const int64_t j = probes ? probes[i] : 0;
    if (j < 0 || j >= set.nlists)
      VA_FATAL("va_cuda_search: query %lld probes list %lld of %lld", (long long)(i / nprobe), (long long)j,
               (long long)set.nlists);
    cnt[j + 1]++;
  }
  int64_t items0 = 0, most = 0;
  for (int64_t j = 0; j < set.nlists; j++) {
    items0 += (cnt[j + 1] + QT - 1) / QT;
    const int64_t rows = set.h_offset[j + 1] - set.h_offset[j];
    if (cnt[j + 1] && rows > most) most = rows;
    cnt[j + 1] += cnt[j];
  }
  for (int64_t i = 0; i < npairs; i++) s->h_pairs[cnt[probes ? probes[i] : 0]++] = (int)i; /* cnt[j]: end of j */
  /* Parts: enough items to fill the device (two blocks an SM, twice over) when there are few, no part
   * under MIN_PART_ROWS rows of the largest probed list, and the per-pair results within the limit. */
  const int64_t want = (4 * (int64_t)s->sms + items0 - 1) / (items0 > 0 ? items0 : 1);
  int64_t nsplit = (most + MIN_PART_ROWS - 1) / MIN_PART_ROWS;
  nsplit = want < nsplit ? want : nsplit;
  while (nsplit > 1 && npairs * nsplit * k > MAX_PIECE_ENTRIES) nsplit /= 2;
  nsplit = nsplit < 1 ? 1 : nsplit > MAX_SPLIT ? MAX_SPLIT : nsplit;
  const int64_t nitems = items0 * nsplit;
  if (nitems > INT32_MAX) VA_FATAL("va_cuda_search: %lld work items are more than one launch takes", (long long)nitems);
  ensure_host(&s->h_items, &s->h_items_cap, (size_t)(nitems > 0 ? nitems : 1), "search work items");
  int64_t it = 0, start = 0;
  for (int64_t j = 0; j < set.nlists; j++) {
    const int64_t end = cnt[j]; /* after the fill above cnt[j] is list j's end */
    for (int64_t p0 = start; p0 < end; p0 += QT)
      for (int64_t part = 0; part < nsplit; part++)
        s->h_items[it++] = work_item{(int)j, (int)part, (int)p0, (int)(end - p0 < QT ? end - p0 : QT)};
    start = end;
  }
  dgrow(&s->pairs, &s->pairs_cap, (size_t)npairs, "search pairs");
  dgrow(&s->items, &s->items_cap, (size_t)(nitems > 0 ? nitems : 1), "search work items");
  VA_CUDA(cudaMemcpyAsync(s->pairs, s->h_pairs, (size_t)npairs * sizeof(int), cudaMemcpyHostToDevice, s->stream));
  VA_CUDA(cudaMemcpyAsync(s->items, s->h_items, (size_t)nitems * sizeof(work_item), cudaMemcpyHostToDevice, s->stream));
  const int64_t L = nprobe * nsplit;
  dgrow(&s->out, &s->out_cap, (size_t)(nq * k), "search results");
  va_neighbor_t *dst = s->out;
  if (L > 1) {
    dgrow(&s->part_out, &s->part_out_cap, (size_t)(npairs * nsplit * k), "search per-list results");
    dst = s->part_out;
  }
  const bool small = k <= SMALL_BUF - RT;
  const int ip = (int)nprobe, ni = (int)nitems, ns = (int)nsplit, ik = (int)k;
  if (nitems > 0) {
    if (measure == MEASURE_L2 && precision != VA_CUDA_FP32)
      row_norms_kernel<float><<<(unsigned)((nq + 255) / 256), 256, 0, s->stream>>>(s->Q, nq, s->d, s->Q_norms);
    if (measure == MEASURE_L2)
      small ? launch_scan<MEASURE_L2, SMALL_BUF>(s, set, precision, ip, ns, ni, ik, dst)
            : launch_scan<MEASURE_L2, LARGE_BUF>(s, set, precision, ip, ns, ni, ik, dst);
    else if (measure == MEASURE_COSINE)
      small ? launch_scan<MEASURE_COSINE, SMALL_BUF>(s, set, precision, ip, ns, ni, ik, dst)
            : launch_scan<MEASURE_COSINE, LARGE_BUF>(s, set, precision, ip, ns, ni, ik, dst);
    else
      small ? launch_scan<MEASURE_PROBE_L2, SMALL_BUF>(s, set, precision, ip, ns, ni, ik, dst)
            : launch_scan<MEASURE_PROBE_L2, LARGE_BUF>(s, set, precision, ip, ns, ni, ik, dst);
  }
  if (L > 1) {
    if (L > INT32_MAX / k) VA_FATAL("va_cuda_search: %lld lists a query are more than the merge takes", (long long)L);
    k <= SMALL_BUF - 32 ? launch_merge<SMALL_BUF>(s, nq, (int)L, ik) : launch_merge<LARGE_BUF>(s, nq, (int)L, ik);
  }
}

/* Queries Q (host, nq x d) against `set`: out[q * k ...] (host) <- their k first, in pieces whose
 * per-pair results stay within the limit. */
static void scan_batch(va_cuda_search_t *s, const scan_set &set, va_cuda_precision_t precision, const float *Q,
                       int64_t nq, const int64_t *probes, int64_t nprobe, int measure, int64_t k, va_neighbor_t *out) {
  if (k < 1 || k > VA_CUDA_SEARCH_MAX_K)
    VA_FATAL("va_cuda_search: k = %lld outside [1, %d]", (long long)k, VA_CUDA_SEARCH_MAX_K);
  if (nq <= 0) return;
  if (nprobe <= 0) { /* nothing probed: fillers only, as the CPU engine gives */
    for (int64_t i = 0; i < nq * k; i++) {
      out[i].dist = __builtin_inff();
      out[i].id = -1;
    }
    return;
  }
  VA_CUDA(cudaSetDevice(s->device));
  int64_t piece = MAX_PIECE_ENTRIES / (nprobe * k);
  piece = piece < 1 ? 1 : piece;
  for (int64_t q0 = 0; q0 < nq; q0 += piece) {
    const int64_t n = nq - q0 < piece ? nq - q0 : piece;
    if (n * nprobe > INT32_MAX) VA_FATAL("va_cuda_search: %lld probes in one piece", (long long)(n * nprobe));
    dgrow(&s->Q, &s->Q_cap, (size_t)(n * s->d), "search queries");
    dgrow(&s->Q_norms, &s->Q_norms_cap, (size_t)n, "search query norms");
    VA_CUDA(
        cudaMemcpyAsync(s->Q, Q + q0 * s->d, (size_t)(n * s->d) * sizeof(float), cudaMemcpyHostToDevice, s->stream));
    scan_piece(s, set, precision, n, probes ? probes + q0 * nprobe : NULL, nprobe, measure, k);
    VA_CUDA(cudaMemcpyAsync(out + q0 * k, s->out, (size_t)(n * k) * sizeof(va_neighbor_t), cudaMemcpyDeviceToHost,
                            s->stream));
    VA_CUDA(cudaStreamSynchronize(s->stream)); /* the host pairs and items are rebuilt by the next piece */
  }
}

static size_t elem_bytes(va_cuda_precision_t precision) {
  return precision == VA_CUDA_FP16 || precision == VA_CUDA_BF16 ? 2 : 4;
}

extern "C" size_t va_cuda_search_bytes(int64_t nlists, int64_t nrows, int64_t d, int64_t nanchors, int64_t batch,
                                       va_cuda_precision_t precision) {
  /* rows, their ids and norms, offsets, anchors with norms; a 64 MiB staging buffer of the conversion */
  const double lists = (double)nrows * ((double)d * (double)elem_bytes(precision) + 12.0) + (double)(nlists + 1) * 8.0 +
                       (double)nanchors * ((double)d + 1.0) * 4.0 + (precision != VA_CUDA_FP32 ? 64.0 * (1 << 20) : 0);
  /* a piece: queries and norms, pairs (every list at most), items, per-pair results (the limit), answer */
  const double piece = (double)batch * ((double)d * 4.0 + 4.0 + (double)nlists * (4.0 + 16.0) +
                                        VA_CUDA_SEARCH_MAX_K * (double)sizeof(va_neighbor_t)) +
                       (double)MAX_PIECE_ENTRIES * sizeof(va_neighbor_t);
  return (size_t)(lists + 2.0 * piece + (double)(64 << 20)); /* x2: doubling growth; 64 MiB the runtime's */
}

/* fp16/bf16: the float rows go up in 64 MiB pieces through a staging buffer and are rounded into X. */
template <typename T>
static void upload_converted(va_cuda_search_t *s, const float *rows) {
  const int64_t total = s->nrows * s->d, piece = (64 << 20) / (int64_t)sizeof(float);
  float *stage = NULL;
  dalloc(&stage, (size_t)(total < piece ? total : piece) * sizeof(float), "search row staging");
  for (int64_t i = 0; i < total; i += piece) {
    const int64_t n = total - i < piece ? total - i : piece;
    VA_CUDA(cudaMemcpyAsync(stage, rows + i, (size_t)n * sizeof(float), cudaMemcpyHostToDevice, s->stream));
    convert_rows_kernel<T><<<(unsigned)(4 * s->sms), 256, 0, s->stream>>>(stage, n, (T *)s->X + i);
    VA_LAUNCHED();
  }
  VA_CUDA(cudaStreamSynchronize(s->stream));
  dfree(&stage);
}

extern "C" va_cuda_search_t *va_cuda_search_create(int device, int64_t nlists, int64_t nrows, int64_t d,
                                                   const int64_t *offset, const float *rows, const int64_t *ids,
                                                   int64_t nanchors, const float *anchors, const float *anchor_norms,
                                                   va_cuda_precision_t precision) {
  if (nlists < 0 || nrows < 0 || d <= 0 || nanchors < 0)
    VA_FATAL("va_cuda_search_create: bad shape (%lld lists, %lld rows, d %lld, %lld anchors)", (long long)nlists,
             (long long)nrows, (long long)d, (long long)nanchors);
  va_cuda_search_t *s = (va_cuda_search_t *)va_calloc(1, sizeof *s, "GPU search engine");
  s->device = device;
  s->nlists = nlists;
  s->nrows = nrows;
  s->d = d;
  s->nanchors = nanchors;
  s->precision = precision;
  VA_CUDA(cudaSetDevice(device));
  VA_CUDA(cudaDeviceGetAttribute(&s->sms, cudaDevAttrMultiProcessorCount, device));
  VA_CUDA(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  const size_t xb = (size_t)nrows * (size_t)d * elem_bytes(precision), ib = (size_t)nrows * sizeof(int64_t),
               ob = (size_t)(nlists + 1) * sizeof(int64_t), ab = (size_t)nanchors * (size_t)d * sizeof(float);
  dalloc(&s->X, xb, "search list rows");
  dalloc(&s->ids, ib, "search list row ids");
  dalloc(&s->offset, ob, "search list offsets");
  dalloc(&s->all_offset, 2 * sizeof(int64_t), "search offsets");
  dalloc(&s->A, ab, "search anchors");
  dalloc(&s->A_norms, (size_t)nanchors * sizeof(float), "search anchor norms");
  dalloc(&s->a_offset, 2 * sizeof(int64_t), "search offsets");
  s->h_offset = (int64_t *)va_malloc(ob, "search list offsets");
  memcpy(s->h_offset, offset, ob);
  s->h_all_offset[0] = s->h_a_offset[0] = 0;
  s->h_all_offset[1] = nrows;
  s->h_a_offset[1] = nanchors;
  if (xb) {
    if (precision == VA_CUDA_FP16) upload_converted<__half>(s, rows);
    else if (precision == VA_CUDA_BF16) upload_converted<__nv_bfloat16>(s, rows);
    else VA_CUDA(cudaMemcpyAsync(s->X, rows, xb, cudaMemcpyHostToDevice, s->stream));
  }
  if (precision != VA_CUDA_FP32) { /* the tensor-core l2's |x|^2, of the values as stored */
    dalloc(&s->X_norms, (size_t)nrows * sizeof(float), "search row norms");
    const unsigned blocks = (unsigned)(4 * s->sms);
    if (nrows > 0) {
      if (precision == VA_CUDA_FP16)
        row_norms_kernel<__half><<<blocks, 256, 0, s->stream>>>((const __half *)s->X, nrows, d, s->X_norms);
      else if (precision == VA_CUDA_BF16)
        row_norms_kernel<__nv_bfloat16>
            <<<blocks, 256, 0, s->stream>>>((const __nv_bfloat16 *)s->X, nrows, d, s->X_norms);
      else row_norms_kernel<float><<<blocks, 256, 0, s->stream>>>((const float *)s->X, nrows, d, s->X_norms);
      VA_LAUNCHED();
    }
  }
  if (ib) VA_CUDA(cudaMemcpyAsync(s->ids, ids, ib, cudaMemcpyHostToDevice, s->stream));
  if (ab) VA_CUDA(cudaMemcpyAsync(s->A, anchors, ab, cudaMemcpyHostToDevice, s->stream));
  if (ab && anchor_norms)
    VA_CUDA(
        cudaMemcpyAsync(s->A_norms, anchor_norms, (size_t)nanchors * sizeof(float), cudaMemcpyHostToDevice, s->stream));
  VA_CUDA(cudaMemcpyAsync(s->offset, s->h_offset, ob, cudaMemcpyHostToDevice, s->stream));
  VA_CUDA(cudaMemcpyAsync(s->all_offset, s->h_all_offset, 2 * sizeof(int64_t), cudaMemcpyHostToDevice, s->stream));
  VA_CUDA(cudaMemcpyAsync(s->a_offset, s->h_a_offset, 2 * sizeof(int64_t), cudaMemcpyHostToDevice, s->stream));
  VA_CUDA(cudaStreamSynchronize(s->stream)); /* the caller may free its arrays now */
  return s;
}

extern "C" void va_cuda_search_destroy(va_cuda_search_t *s) {
  if (!s) return;
  VA_CUDA(cudaSetDevice(s->device));
  VA_CUDA(cudaStreamSynchronize(s->stream));
  dfree(&s->X);
  dfree(&s->X_norms);
  dfree(&s->ids);
  dfree(&s->offset);
  dfree(&s->all_offset);
  dfree(&s->A);
  dfree(&s->A_norms);
  dfree(&s->a_offset);
  dfree(&s->Q);
  dfree(&s->Q_norms);
  dfree(&s->pairs);
  dfree(&s->items);
  dfree(&s->part_out);
  dfree(&s->out);
  VA_CUDA(cudaStreamDestroy(s->stream));
  free(s->h_offset);
  free(s->h_pairs);
  free(s->h_count);
  free(s->h_items);
  free(s);
}

extern "C" void va_cuda_search_scan(va_cuda_search_t *s, const float *Q, int64_t nq, const int64_t *probes,
                                    int64_t nprobe, int cosine, int64_t k, va_neighbor_t *out) {
  const scan_set lists = {s->X, s->ids, s->X_norms, s->offset, s->h_offset, s->nlists, s->nrows};
  const scan_set all = {s->X, s->ids, s->X_norms, s->all_offset, s->h_all_offset, 1, s->nrows};
  const int measure = cosine ? MEASURE_COSINE : MEASURE_L2;
  if (probes) scan_batch(s, lists, s->precision, Q, nq, probes, nprobe, measure, k, out);
  else scan_batch(s, all, s->precision, Q, nq, NULL, 1, measure, k, out);
}

extern "C" void va_cuda_search_probe(va_cuda_search_t *s, const float *Q, int64_t nq, int cosine, int64_t nprobe,
                                     va_neighbor_t *out) {
  const scan_set anchors = {s->A, NULL, s->A_norms, s->a_offset, s->h_a_offset, 1, s->nanchors};
  scan_batch(s, anchors, VA_CUDA_FP32, Q, nq, NULL, 1, cosine ? MEASURE_COSINE : MEASURE_PROBE_L2, nprobe, out);
}
