/* search.cu: the GPU scan of nearest-neighbour search (cuda/search.h): one rank's inverted lists resident
 * on the device, and per batch a fused distance + top-k kernel, bitwise the CPU engine's answer.
 *
 * The distance. Eight lanes of a warp measure one row: lane u builds the partial sum s_u over
 * t = u, u + 8, u + 16, ... in increasing t, each step one fused multiply-add (l2: fma(q - x, q - x, s),
 * cosine: fma(q, x, s)), which is exactly the CPU recipe's s[t mod 8]; butterfly shuffles over lane
 * distances 4, 2, 1 then leave in every lane of the group ((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7)) (lane u
 * adds its partner's sum to its own: float addition is commutative bit for bit, so which operand comes
 * first does not matter); cosine takes max(0, 1 - sum) as the CPU does (1 - sum is never -0, so the
 * max instruction nvcc may pick gives the CPU's +0 too). The steps are written with the round-to-nearest intrinsics
 * (__fsub_rn, __fmaf_rn, __fadd_rn), which nvcc never contracts or reorders, and this file is compiled
 * with -ftz=false -prec-div=true -prec-sqrt=true whatever the global flags say (cmake/cuda.cmake): a
 * denormal partial sum keeps its value as on the CPU. So every distance has the CPU kernel's bits.
 *
 * The top-k. One block of 256 threads (32 groups of 8 lanes) scans one query's rows, or one of nsplit
 * slices of them (each probed list cut into nsplit equal parts, for parallelism when the batch has few
 * queries; the slices' sorted lists are merged on the host by va_search_merge). A block keeps, in shared
 * memory, one buffer of 512 entries: its k best so far, sorted, in [0, k), and candidates appended at
 * [k, k + 256). Rows come in tiles of 128 (each group 4 rows at once); a row is a candidate when its
 * (distance, id) comes before the k-th best at the last merge (a looser bound than the current k-th is
 * still exact: an entry that does not beat some k entries cannot be among the k first). Before a tile
 * whose candidates would overflow the buffer, and at the end, the whole buffer is sorted (bitonic, by
 * distance then id as unsigned, so the fillers (+inf, -1) go last) and its first k kept. The k first
 * entries under a total order depend only on the set of rows scanned: the answer is the CPU's, entry
 * for entry. No n x q matrix is ever formed; rows are read once per query from global memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/check.cuh" /* VA_CUDA, VA_LAUNCHED, dalloc, dfree */
#include "cuda/search.h"

static const int SEARCH_THREADS = 256;              /* one block: 32 groups of 8 lanes */
static const int GROUP = 8;                         /* lanes per row: one per partial sum of the recipe */
static const int ROWS_PER_GROUP = 4;                /* rows a group measures at once (independent chains) */
static const int TILE = 32 * ROWS_PER_GROUP;        /* rows per tile: 32 groups x 4 */
static const int CAND = 2 * TILE;                   /* candidate slots: two tiles */
static const int BUF = 512;                         /* kept + candidates, a power of two >= MAX_K + CAND */
static const int64_t MIN_ROWS_PER_BLOCK = 8 * TILE; /* slices smaller than this are not worth a block */
static const int MAX_SPLIT = 64;                    /* slices per query at most */
static_assert(VA_CUDA_SEARCH_MAX_K + CAND <= BUF, "the buffer holds the k best and a full candidate set");
static_assert(BUF == 2 * SEARCH_THREADS, "the bitonic sort gives each thread one pair per stage");
static_assert(CAND >= TILE, "a tile's candidates fit an empty candidate set");

struct va_cuda_search {
  int device;
  int64_t nlists, nrows, d;
  int sms;
  cudaStream_t stream;
  float *X;        /* nrows x d, in list order */
  int64_t *ids;    /* nrows global row ids */
  int64_t *offset; /* nlists + 1, on the device */
  int64_t *h_offset;
  /* per batch, grown on demand */
  float *Q;
  int64_t *probes;
  va_neighbor_t *out, *h_out;
  size_t Q_cap, probes_cap, out_cap, h_out_cap; /* elements */
};

/* a before b: smaller distance, then smaller id as unsigned (the filler id -1 last): va_search_before. */
__device__ __forceinline__ bool entry_before(float da, unsigned long long ia, float db, unsigned long long ib) {
  return da != db ? da < db : ia < ib;
}

/* Sorts the block's BUF entries ascending (bitonic network; every thread one compare-exchange per
 * stage). Called by every thread of the block, after a barrier that makes the entries visible; ends with
 * one. Entries are distinct (row ids are), so the result does not depend on the network's order. */
__device__ void sort_entries(float *sd, unsigned long long *sid) {
  const int i = threadIdx.x;
  for (int size = 2; size <= BUF; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
      const bool up = (lo & size) == 0;
      const float da = sd[lo], db = sd[hi];
      const unsigned long long ia = sid[lo], ib = sid[hi];
      if (entry_before(db, ib, da, ia) == up) {
        sd[lo] = db;
        sd[hi] = da;
        sid[lo] = ib;
        sid[hi] = ia;
      }
      __syncthreads();
    }
}

/* One block: query blockIdx.x / nsplit, slice blockIdx.x % nsplit of each of its probed lists (probes
 * NULL: of the one range [0, nrows)); its sorted k entries to out[blockIdx.x * k ...]. */
__global__ void __launch_bounds__(SEARCH_THREADS, 3)
    search_scan_kernel(const float *__restrict__ X, const int64_t *__restrict__ ids, const int64_t *__restrict__ offset,
                       int64_t nrows, int64_t d, const float *__restrict__ Q, const int64_t *__restrict__ probes,
                       int64_t nprobe, int cosine, int k, int nsplit, va_neighbor_t *__restrict__ out) {
  __shared__ float sd[BUF];
  __shared__ unsigned long long sid[BUF];
  __shared__ int count; /* candidates appended since the last merge */
  const int64_t qi = blockIdx.x / nsplit;
  const int split = (int)(blockIdx.x % nsplit);
  const int lane = threadIdx.x % GROUP, group = threadIdx.x / GROUP;
  const float *__restrict__ q = Q + qi * d;
  for (int i = threadIdx.x; i < BUF; i += SEARCH_THREADS) {
    sd[i] = __int_as_float(0x7f800000); /* +inf */
    sid[i] = ~0ull;                     /* id -1 */
  }
  if (threadIdx.x == 0) count = 0;
  /* The k-th best at the last merge: a row enters the candidates when it comes before this entry. The
   * same in every thread (read after the merge's last barrier). */
  float bound_d = __int_as_float(0x7f800000);
  unsigned long long bound_id = ~0ull;
  int filled = 0; /* the candidates' count, tracked alike in every thread (no read of `count` needed) */
  __syncthreads();
  const int64_t lists = probes ? nprobe : 1;
  for (int64_t p = 0; p < lists; p++) {
    int64_t r0 = 0, m = nrows;
    if (probes) {
      const int64_t j = probes[qi * nprobe + p];
      r0 = offset[j];
      m = offset[j + 1] - r0;
    }
    const int64_t a = r0 + m * split / nsplit, b = r0 + m * (split + 1) / nsplit;
    for (int64_t base = a; base < b; base += TILE) { /* the same trip count in every thread */
      const int64_t row0 = base + (int64_t)group * ROWS_PER_GROUP;
      float s[ROWS_PER_GROUP];
#pragma unroll
      for (int r = 0; r < ROWS_PER_GROUP; r++) s[r] = 0.0f;
      /* lane u: s_u over t = u mod 8, increasing t, one FMA a step (the recipe); rows past b add nothing */
      for (int64_t t = lane; t < d; t += GROUP) {
        const float qt = __ldg(q + t);
#pragma unroll
        for (int r = 0; r < ROWS_PER_GROUP; r++)
          if (row0 + r < b) {
            const float x = __ldg(X + (row0 + r) * d + t);
            if (cosine) s[r] = __fmaf_rn(qt, x, s[r]);
            else {
              const float diff = __fsub_rn(qt, x);
              s[r] = __fmaf_rn(diff, diff, s[r]);
            }
          }
      }
      /* ((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7)) in every lane of the group */
#pragma unroll
      for (int r = 0; r < ROWS_PER_GROUP; r++) {
        s[r] = __fadd_rn(s[r], __shfl_xor_sync(0xffffffffu, s[r], 4, GROUP));
        s[r] = __fadd_rn(s[r], __shfl_xor_sync(0xffffffffu, s[r], 2, GROUP));
        s[r] = __fadd_rn(s[r], __shfl_xor_sync(0xffffffffu, s[r], 1, GROUP));
        if (cosine) {
          const float c = __fsub_rn(1.0f, s[r]);
          s[r] = c > 0 ? c : 0.0f;
        }
      }
      /* lane r of the group offers row0 + r */
      float dist = 0.0f;
#pragma unroll
      for (int r = 0; r < ROWS_PER_GROUP; r++)
        if (lane == r) dist = s[r];
      const int64_t row = row0 + lane;
      unsigned long long id = ~0ull;
      bool offer = lane < ROWS_PER_GROUP && row < b && dist <= bound_d;
      if (offer) {
        id = (unsigned long long)ids[row];
        offer = entry_before(dist, id, bound_d, bound_id);
      }
      /* Barrier: the previous tile's appends (and any merge) are complete, and every thread learns how
       * many candidates this tile brings. */
      const int n = __syncthreads_count(offer);
      if (filled + n > CAND) { /* uniform: filled and n are the same in every thread */
        sort_entries(sd, sid);
        for (int i = k + threadIdx.x; i < BUF; i += SEARCH_THREADS) {
          sd[i] = __int_as_float(0x7f800000);
          sid[i] = ~0ull;
        }
        if (threadIdx.x == 0) count = 0;
        __syncthreads();
        bound_d = sd[k - 1];
        bound_id = sid[k - 1];
        filled = 0;
        /* an offer made against the older bound stays exact (a looser filter); it fits: n <= TILE <= CAND */
      }
      if (offer) {
        const int pos = atomicAdd(&count, 1);
        sd[k + pos] = dist;
        sid[k + pos] = id;
      }
      filled += n;
    }
  }
  __syncthreads(); /* the last tile's appends */
  if (filled > 0) sort_entries(sd, sid);
  for (int i = threadIdx.x; i < k; i += SEARCH_THREADS) {
    va_neighbor_t e;
    e.dist = sd[i];
    e.id = (int64_t)sid[i];
    out[(int64_t)blockIdx.x * k + i] = e;
  }
}

/* Grows a device buffer to hold n elements (doubling; the contents are not kept). */
template <typename P>
static void ensure(P **buf, size_t *cap, size_t n, const char *what) {
  if (n <= *cap) return;
  dfree(buf);
  size_t c = *cap ? *cap : 1;
  while (c < n) c *= 2;
  dalloc(buf, c * sizeof **buf, what);
  *cap = c;
}

extern "C" size_t va_cuda_search_bytes(int64_t nlists, int64_t nrows, int64_t d, int64_t batch) {
  const double rows = (double)nrows * (double)d * 4.0 + (double)nrows * 8.0 + (double)(nlists + 1) * 8.0;
  /* results: nq x nsplit blocks of k, and nsplit <= ceil(8 SMs / nq): at most nq + 8 SMs blocks (2048 SMs
   * is above any device) */
  const double per_batch = (double)batch * ((double)d * 4.0 + (double)nlists * 8.0) +
                           (double)(batch + 2048) * VA_CUDA_SEARCH_MAX_K * sizeof(va_neighbor_t);
  return (size_t)(rows + 2.0 * per_batch + (double)(64 << 20)); /* x2: doubling growth; 64 MiB the runtime's */
}

extern "C" va_cuda_search_t *va_cuda_search_create(int device, int64_t nlists, int64_t nrows, int64_t d,
                                                   const int64_t *offset, const float *rows, const int64_t *ids) {
  if (nlists < 0 || nrows < 0 || d <= 0)
    VA_FATAL("va_cuda_search_create: bad shape (%lld lists, %lld rows, d %lld)", (long long)nlists, (long long)nrows,
             (long long)d);
  va_cuda_search_t *s = (va_cuda_search_t *)va_calloc(1, sizeof *s, "GPU search engine");
  s->device = device;
  s->nlists = nlists;
  s->nrows = nrows;
  s->d = d;
  VA_CUDA(cudaSetDevice(device));
  VA_CUDA(cudaDeviceGetAttribute(&s->sms, cudaDevAttrMultiProcessorCount, device));
  VA_CUDA(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  const size_t xb = (size_t)nrows * (size_t)d * sizeof(float), ib = (size_t)nrows * sizeof(int64_t),
               ob = (size_t)(nlists + 1) * sizeof(int64_t);
  dalloc(&s->X, xb, "search list rows");
  dalloc(&s->ids, ib, "search list row ids");
  dalloc(&s->offset, ob, "search list offsets");
  s->h_offset = (int64_t *)va_malloc(ob, "search list offsets");
  memcpy(s->h_offset, offset, ob);
  if (xb) VA_CUDA(cudaMemcpyAsync(s->X, rows, xb, cudaMemcpyHostToDevice, s->stream));
  if (ib) VA_CUDA(cudaMemcpyAsync(s->ids, ids, ib, cudaMemcpyHostToDevice, s->stream));
  VA_CUDA(cudaMemcpyAsync(s->offset, s->h_offset, ob, cudaMemcpyHostToDevice, s->stream));
  VA_CUDA(cudaStreamSynchronize(s->stream)); /* the caller may free its arrays now */
  return s;
}

extern "C" void va_cuda_search_destroy(va_cuda_search_t *s) {
  if (!s) return;
  VA_CUDA(cudaSetDevice(s->device));
  VA_CUDA(cudaStreamSynchronize(s->stream));
  dfree(&s->X);
  dfree(&s->ids);
  dfree(&s->offset);
  dfree(&s->Q);
  dfree(&s->probes);
  dfree(&s->out);
  VA_CUDA(cudaStreamDestroy(s->stream));
  free(s->h_offset);
  free(s->h_out);
  free(s);
}

extern "C" void va_cuda_search_scan(va_cuda_search_t *s, const float *Q, int64_t nq, const int64_t *probes,
                                    int64_t nprobe, int cosine, int64_t k, va_neighbor_t *out) {
  if (k < 1 || k > VA_CUDA_SEARCH_MAX_K)
    VA_FATAL("va_cuda_search_scan: k = %lld outside [1, %d]", (long long)k, VA_CUDA_SEARCH_MAX_K);
  if (nq <= 0) return;
  if (probes && nprobe <= 0) { /* nothing probed: fillers only, as the CPU engine gives */
    for (int64_t i = 0; i < nq * k; i++) {
      out[i].dist = __builtin_inff();
      out[i].id = -1;
    }
    return;
  }
  VA_CUDA(cudaSetDevice(s->device));
  /* Slices per query: enough blocks to fill the device (8 resident per SM at 256 threads) when the batch
   * is small, but no slice under MIN_ROWS_PER_BLOCK rows of the query's largest scan. */
  int64_t most = s->nrows;
  if (probes) {
    most = 0;
    for (int64_t q = 0; q < nq; q++) {
      int64_t rows = 0;
      for (int64_t p = 0; p < nprobe; p++) {
        const int64_t j = probes[q * nprobe + p];
        if (j < 0 || j >= s->nlists)
          VA_FATAL("va_cuda_search_scan: query %lld probes list %lld of %lld", (long long)q, (long long)j,
                   (long long)s->nlists);
        rows += s->h_offset[j + 1] - s->h_offset[j];
      }
      most = rows > most ? rows : most;
    }
  }
  const int64_t want = (8 * (int64_t)s->sms + nq - 1) / nq, fit = (most + MIN_ROWS_PER_BLOCK - 1) / MIN_ROWS_PER_BLOCK;
  int64_t nsplit = want < fit ? want : fit;
  nsplit = nsplit < 1 ? 1 : nsplit > MAX_SPLIT ? MAX_SPLIT : nsplit;
  const int64_t blocks = nq * nsplit;
  if (blocks > INT32_MAX)
    VA_FATAL("va_cuda_search_scan: %lld queries in one batch are more than one launch takes", (long long)nq);
  const size_t nout = (size_t)blocks * (size_t)k;
  ensure(&s->Q, &s->Q_cap, (size_t)(nq * s->d), "search queries");
  ensure(&s->out, &s->out_cap, nout, "search results");
  VA_CUDA(cudaMemcpyAsync(s->Q, Q, (size_t)(nq * s->d) * sizeof(float), cudaMemcpyHostToDevice, s->stream));
  if (probes) {
    ensure(&s->probes, &s->probes_cap, (size_t)(nq * nprobe), "search probes");
    VA_CUDA(
        cudaMemcpyAsync(s->probes, probes, (size_t)(nq * nprobe) * sizeof(int64_t), cudaMemcpyHostToDevice, s->stream));
  }
  search_scan_kernel<<<(unsigned)blocks, SEARCH_THREADS, 0, s->stream>>>(s->X, s->ids, s->offset, s->nrows, s->d, s->Q,
                                                                         probes ? s->probes : NULL, probes ? nprobe : 1,
                                                                         cosine, (int)k, (int)nsplit, s->out);
  VA_LAUNCHED();
  va_neighbor_t *dst = out;
  if (nsplit > 1) { /* the slices' lists land in host scratch and are merged below */
    if (s->h_out_cap < nout) {
      free(s->h_out);
      s->h_out = (va_neighbor_t *)va_malloc(nout * sizeof(va_neighbor_t), "search slice results");
      s->h_out_cap = nout;
    }
    dst = s->h_out;
  }
  VA_CUDA(cudaMemcpyAsync(dst, s->out, nout * sizeof(va_neighbor_t), cudaMemcpyDeviceToHost, s->stream));
  VA_CUDA(cudaStreamSynchronize(s->stream));
  if (nsplit > 1) /* the k first of the union of a query's sorted slices: the k first of its rows */
    for (int64_t q = 0; q < nq; q++) va_search_merge(dst + q * nsplit * k, (int)nsplit, k, k, out + q * k);
}
