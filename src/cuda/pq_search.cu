/* pq_search.cu: the GPU scan on residual PQ codes (cuda/pq_search.h).
 *
 * Work. One block of 256 threads per query. It holds the query (d floats) and its table qt = -(q_m . C_mc)
 * (M x ksub floats) in shared memory, built once; then, list by list of its probes, for l2 the list's
 * table P_j + 2 qt (a second M x ksub buffer; cosine scans qt itself), and streams the list's codes, one
 * row a thread: the row's distance is the list's base plus its codes' table entries in increasing
 * subspace. The list bases (||q - a||^2 or 1 - q.a in double, rounded) come from a kernel of their own,
 * one thread a (query, probe) pair. No per-pair results leave the block: the query's top-k is kept
 * across its lists.
 *
 * The recipe is cpu/pq_search.c's, step for step: each table entry sums the rounded products v_t C_mc,t
 * in increasing t (__fmul_rn then __fadd_rn: nvcc never contracts or reorders them), the l2 terms come
 * from the host (va_pq_list_terms) and the list table is terms + (qt + qt), the base is summed in double
 * in increasing t (__dsub_rn, __dmul_rn, __dadd_rn) and rounded to float, and this file is compiled with
 * -ftz=false (cmake/cuda.cmake), so denormal entries keep their bits.
 *
 * The top-k. The block keeps one buffer of BUF entries in shared memory (cuda/topk.cuh): the k best so
 * far sorted in [0, k), candidates appended after by any thread (atomicAdd on the count). A row is a
 * candidate when its (distance, id) comes before the k-th best at the last compaction. After each tile
 * of 256 rows, when another tile could overflow the buffer, warp 0 sorts it and keeps its k first while
 * the other warps wait at the barrier. k <= VA_CUDA_SEARCH_MAX_K, so k + a tile fit BUF. */
#include <stdlib.h>
#include <string.h>

#include "cuda/check.cuh" /* VA_CUDA, VA_LAUNCHED, dalloc, dfree, dgrow */
#include "cuda/pq.cuh"    /* pq_subspace */
#include "cuda/pq_search.h"
#include "cuda/search.h" /* VA_CUDA_SEARCH_MAX_K */
#include "cuda/topk.cuh" /* entry_before, warp_sort, warp_compact */

static const int THREADS = 256; /* one row a thread per tile */
static const int BUF = 512;     /* a query's top-k buffer: k best + one tile of candidates */
static_assert(BUF - THREADS >= VA_CUDA_SEARCH_MAX_K, "the k best and a full tile of candidates fit the buffer");
/* A batch is scanned in pieces of at most this many (query, probe) pairs (their probes and bases on
 * the device). */
static const int64_t MAX_PIECE_PAIRS = (int64_t)1 << 22;

/* What the scan reads, on the device. */
struct pq_set {
  const uint8_t *codes; /* nrows x M, list order */
  const int64_t *ids, *offset;
  const float *T;     /* d x ksub */
  const float *terms; /* l2: nlists x M x ksub; cosine: NULL */
  int64_t d;
  int M, ksub;
};

struct va_cuda_pq {
  int device, cosine;
  int64_t nlists, nrows, d, M, ksub;
  size_t smem; /* of one scan block */
  cudaStream_t stream;
  uint8_t *codes;
  int64_t *ids, *offset;
  float *T, *terms, *frame;
  int64_t *h_offset;
  /* per batch piece, grown on demand */
  float *Q, *bases;
  int64_t *probes;
  va_neighbor_t *out;
  size_t Q_cap, bases_cap, probes_cap, out_cap; /* elements */
};

/* bases[i] <- va_pq_list_base(query i / nprobe, anchor probes[i]) for the npairs pairs of a piece. */
__global__ void list_bases_kernel(const float *__restrict__ Q, const int64_t *__restrict__ probes, int64_t npairs,
                                  int64_t nprobe, const float *__restrict__ frame, int64_t d, int cosine,
                                  float *__restrict__ bases) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= npairs) return;
  const float *q = Q + (i / nprobe) * d, *a = frame + probes[i] * d;
  double s = 0;
  for (int64_t t = 0; t < d; t++) {
    const double qt = (double)q[t], at = (double)a[t];
    if (cosine) s = __dadd_rn(s, __dmul_rn(qt, at));
    else {
      const double e = __dsub_rn(qt, at);
      s = __dadd_rn(s, __dmul_rn(e, e));
    }
  }
  bases[i] = __double2float_rn(cosine ? __dsub_rn(1.0, s) : s);
}

/* Shared memory of a scan block: the buffer's ids and distances, the query's table, the list's table
 * (l2), the query, the candidate count. */
static size_t scan_smem(int64_t d, int64_t M, int64_t ksub, int cosine) {
  return (size_t)BUF * (sizeof(unsigned long long) + sizeof(float)) +
         (size_t)(cosine ? 1 : 2) * (size_t)(M * ksub) * sizeof(float) + (size_t)d * sizeof(float) + 16;
}

/* One query per block (see the file's comment): out[q * k ...] <- its k first over its probed lists. */
__global__ void __launch_bounds__(THREADS)
    pq_scan_kernel(pq_set s, const float *__restrict__ Q, const int64_t *__restrict__ probes,
                   const float *__restrict__ bases, int64_t nprobe, int cosine, int k,
                   va_neighbor_t *__restrict__ out) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int per = s.M * s.ksub;
  unsigned long long *sid = (unsigned long long *)smem;
  float *sd = (float *)(sid + BUF);
  float *qt = sd + BUF;
  float *tab = cosine ? qt : qt + per;
  float *qs = qt + (cosine ? 1 : 2) * per;
  int *count = (int *)(qs + s.d);
  const int64_t q = blockIdx.x;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int64_t t = tid; t < s.d; t += THREADS) qs[t] = Q[q * s.d + t];
  for (int i = tid; i < BUF; i += THREADS) {
    sd[i] = __int_as_float(0x7f800000);
    sid[i] = ~0ull;
  }
  if (tid == 0) *count = 0;
  __syncthreads();
  /* the query's table: entry (m, c) sums the rounded products over subspace m's columns in order */
  for (int i = tid; i < per; i += THREADS) {
    const int m = i / s.ksub, c = i % s.ksub;
    int col0, width;
    pq_subspace(s.d, s.M, m, &col0, &width);
    float o = 0.0f;
    for (int t = 0; t < width; t++) o = __fadd_rn(o, __fmul_rn(qs[col0 + t], s.T[(int64_t)(col0 + t) * s.ksub + c]));
    qt[i] = -o;
  }
  __syncthreads();
  float bound_d = __int_as_float(0x7f800000);
  unsigned long long bound_id = ~0ull;
  const bool words = (s.M & 3) == 0; /* a row's codes as 4-byte words: rows start 4-aligned */
  for (int64_t p = 0; p < nprobe; p++) {
    const int64_t j = probes[q * nprobe + p], r0 = s.offset[j], r1 = s.offset[j + 1];
    if (r1 == r0) continue; /* uniform over the block */
    if (!cosine) {
      const float *P = s.terms + j * per;
      __syncthreads(); /* the previous list's reads of tab are done */
      for (int i = tid; i < per; i += THREADS) tab[i] = __fadd_rn(P[i], __fadd_rn(qt[i], qt[i]));
      __syncthreads();
    }
    const float base = bases[q * nprobe + p];
    for (int64_t t0 = r0; t0 < r1; t0 += THREADS) {
      const int64_t r = t0 + tid;
      if (r < r1) {
        float sum = base;
        if (words) {
          const uint32_t *w = (const uint32_t *)(s.codes + r * s.M);
          for (int m = 0; m < s.M; m += 4) {
            const uint32_t v = w[m / 4];
            sum = __fadd_rn(sum, tab[m * s.ksub + (v & 255u)]);
            sum = __fadd_rn(sum, tab[(m + 1) * s.ksub + ((v >> 8) & 255u)]);
            sum = __fadd_rn(sum, tab[(m + 2) * s.ksub + ((v >> 16) & 255u)]);
            sum = __fadd_rn(sum, tab[(m + 3) * s.ksub + (v >> 24)]);
          }
        } else {
          const uint8_t *c = s.codes + r * s.M;
          for (int m = 0; m < s.M; m++) sum = __fadd_rn(sum, tab[m * s.ksub + c[m]]);
        }
        const unsigned long long id = (unsigned long long)s.ids[r];
        if (entry_before(sum, id, bound_d, bound_id)) {
          const int pos = atomicAdd(count, 1);
          sd[k + pos] = sum;
          sid[k + pos] = id;
        }
      }
      __syncthreads();
      const int n = *count;
      __syncthreads(); /* every thread has read the count before warp 0 may reset it */
      if (n > BUF - k - THREADS) {
        if (warp == 0) warp_compact<BUF>(sd, sid, count, k, lane);
        __syncthreads();
        bound_d = sd[k - 1];
        bound_id = sid[k - 1];
      }
    }
  }
  __syncthreads();
  if (warp == 0 && *count > 0) warp_sort<BUF>(sd, sid, lane);
  __syncthreads();
  for (int i = tid; i < k; i += THREADS) {
    va_neighbor_t e;
    e.dist = sd[i];
    e.id = (int64_t)sid[i];
    out[q * k + i] = e;
  }
}

extern "C" int va_cuda_pq_fits(int device, int64_t d, int64_t M, int64_t ksub, int cosine) {
  int optin = 0;
  VA_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return ksub >= 1 && ksub <= 256 && M >= 1 && M <= d && scan_smem(d, M, ksub, cosine) <= (size_t)optin;
}

extern "C" size_t va_cuda_pq_bytes(int64_t nlists, int64_t nrows, int64_t d, int64_t M, int64_t batch) {
  const double ksub = 256;
  const double lists = (double)nrows * ((double)M + 8.0) + (double)(nlists + 1) * 8.0 + (double)d * ksub * 4.0 +
                       (double)nlists * ((double)M * ksub + (double)d) * 4.0;
  /* a piece: queries, probes and bases, answers */
  const double pairs = (double)batch * (double)nlists < (double)MAX_PIECE_PAIRS ? (double)batch * (double)nlists
                                                                                : (double)MAX_PIECE_PAIRS;
  const double piece =
      (double)batch * ((double)d * 4.0 + VA_CUDA_SEARCH_MAX_K * (double)sizeof(va_neighbor_t)) + pairs * 12.0;
  return (size_t)(lists + 2.0 * piece + (double)(64 << 20)); /* x2: doubling growth; 64 MiB the runtime's */
}

extern "C" va_cuda_pq_t *va_cuda_pq_create(int device, int64_t nlists, int64_t nrows, int64_t d, int64_t M,
                                           int64_t ksub, const int64_t *offset, const uint8_t *codes,
                                           const int64_t *ids, const float *T, const float *frame, const float *terms) {
  const int cosine = terms == NULL;
  if (nlists < 0 || nrows < 0 || d <= 0 || M < 1 || M > d || ksub < 1 || ksub > 256)
    VA_FATAL("va_cuda_pq_create: bad shape (%lld lists, %lld rows, d %lld, M %lld, ksub %lld)", (long long)nlists,
             (long long)nrows, (long long)d, (long long)M, (long long)ksub);
  if (!va_cuda_pq_fits(device, d, M, ksub, cosine))
    VA_FATAL("va_cuda_pq_create: the tables of %lld x %lld do not fit a block's shared memory", (long long)M,
             (long long)ksub);
  va_cuda_pq_t *p = (va_cuda_pq_t *)va_calloc(1, sizeof *p, "GPU code search");
  p->device = device;
  p->cosine = cosine;
  p->nlists = nlists;
  p->nrows = nrows;
  p->d = d;
  p->M = M;
  p->ksub = ksub;
  p->smem = scan_smem(d, M, ksub, cosine);
  VA_CUDA(cudaSetDevice(device));
  VA_CUDA(cudaFuncSetAttribute(pq_scan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)p->smem));
  VA_CUDA(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking));
  const size_t cb = (size_t)(nrows * M), ib = (size_t)nrows * sizeof(int64_t),
               ob = (size_t)(nlists + 1) * sizeof(int64_t), tb = (size_t)(d * ksub) * sizeof(float),
               fb = (size_t)(nlists * d) * sizeof(float), pb = cosine ? 0 : (size_t)(nlists * M * ksub) * sizeof(float);
  dalloc(&p->codes, cb, "search codes");
  dalloc(&p->ids, ib, "search code row ids");
  dalloc(&p->offset, ob, "search code list offsets");
  dalloc(&p->T, tb, "search codebooks");
  dalloc(&p->frame, fb, "search anchors in the codes' frame");
  if (!cosine) dalloc(&p->terms, pb, "search anchor terms");
  p->h_offset = (int64_t *)va_malloc(ob, "search code list offsets");
  memcpy(p->h_offset, offset, ob);
  if (cb) VA_CUDA(cudaMemcpyAsync(p->codes, codes, cb, cudaMemcpyHostToDevice, p->stream));
  if (ib) VA_CUDA(cudaMemcpyAsync(p->ids, ids, ib, cudaMemcpyHostToDevice, p->stream));
  VA_CUDA(cudaMemcpyAsync(p->offset, p->h_offset, ob, cudaMemcpyHostToDevice, p->stream));
  VA_CUDA(cudaMemcpyAsync(p->T, T, tb, cudaMemcpyHostToDevice, p->stream));
  if (fb) VA_CUDA(cudaMemcpyAsync(p->frame, frame, fb, cudaMemcpyHostToDevice, p->stream));
  if (pb) VA_CUDA(cudaMemcpyAsync(p->terms, terms, pb, cudaMemcpyHostToDevice, p->stream));
  VA_CUDA(cudaStreamSynchronize(p->stream)); /* the caller may free its arrays now */
  return p;
}

extern "C" void va_cuda_pq_destroy(va_cuda_pq_t *p) {
  if (!p) return;
  VA_CUDA(cudaSetDevice(p->device));
  VA_CUDA(cudaStreamSynchronize(p->stream));
  dfree(&p->codes);
  dfree(&p->ids);
  dfree(&p->offset);
  dfree(&p->T);
  dfree(&p->frame);
  dfree(&p->terms);
  dfree(&p->Q);
  dfree(&p->bases);
  dfree(&p->probes);
  dfree(&p->out);
  VA_CUDA(cudaStreamDestroy(p->stream));
  free(p->h_offset);
  free(p);
}

extern "C" void va_cuda_pq_scan(va_cuda_pq_t *p, const float *Qf, int64_t nq, const int64_t *probes, int64_t nprobe,
                                int64_t k, va_neighbor_t *out) {
  if (k < 1 || k > VA_CUDA_SEARCH_MAX_K)
    VA_FATAL("va_cuda_pq_scan: k = %lld outside [1, %d]", (long long)k, VA_CUDA_SEARCH_MAX_K);
  if (nq <= 0) return;
  for (int64_t i = 0; i < nq * nprobe; i++)
    if (probes[i] < 0 || probes[i] >= p->nlists)
      VA_FATAL("va_cuda_pq_scan: query %lld probes list %lld of %lld", (long long)(i / nprobe), (long long)probes[i],
               (long long)p->nlists);
  VA_CUDA(cudaSetDevice(p->device));
  const pq_set s = {p->codes, p->ids, p->offset, p->T, p->terms, p->d, (int)p->M, (int)p->ksub};
  int64_t piece = nprobe > 0 ? MAX_PIECE_PAIRS / nprobe : nq;
  piece = piece < 1 ? 1 : piece;
  for (int64_t q0 = 0; q0 < nq; q0 += piece) {
    const int64_t n = nq - q0 < piece ? nq - q0 : piece, npairs = n * nprobe;
    if (n > INT32_MAX) VA_FATAL("va_cuda_pq_scan: %lld queries in one launch", (long long)n);
    dgrow(&p->Q, &p->Q_cap, (size_t)(n * p->d), "code search queries");
    dgrow(&p->probes, &p->probes_cap, (size_t)(npairs > 0 ? npairs : 1), "code search probes");
    dgrow(&p->bases, &p->bases_cap, (size_t)(npairs > 0 ? npairs : 1), "code search list bases");
    dgrow(&p->out, &p->out_cap, (size_t)(n * k), "code search results");
    VA_CUDA(
        cudaMemcpyAsync(p->Q, Qf + q0 * p->d, (size_t)(n * p->d) * sizeof(float), cudaMemcpyHostToDevice, p->stream));
    if (npairs > 0) {
      VA_CUDA(cudaMemcpyAsync(p->probes, probes + q0 * nprobe, (size_t)npairs * sizeof(int64_t), cudaMemcpyHostToDevice,
                              p->stream));
      list_bases_kernel<<<(unsigned)((npairs + 255) / 256), 256, 0, p->stream>>>(p->Q, p->probes, npairs, nprobe,
                                                                                 p->frame, p->d, p->cosine, p->bases);
      VA_LAUNCHED();
    }
    pq_scan_kernel<<<(unsigned)n, THREADS, p->smem, p->stream>>>(s, p->Q, p->probes, p->bases, nprobe, p->cosine,
                                                                 (int)k, p->out);
    VA_LAUNCHED();
    VA_CUDA(cudaMemcpyAsync(out + q0 * k, p->out, (size_t)(n * k) * sizeof(va_neighbor_t), cudaMemcpyDeviceToHost,
                            p->stream));
    VA_CUDA(cudaStreamSynchronize(p->stream));
  }
}
