/* search.c: the CPU kernels of nearest-neighbour search (search.h): the fixed-recipe distance (AVX2 and
 * portable, the same bits), the double reference, the bounded top-k heap, the tiled scan, the probe of
 * the nearest anchors and the merge of sorted lists. */
#include "cpu/search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define VA_SEARCH_X86 1
#endif

#include "util/util.h"

#define VA_SEARCH_TILE_ROWS     64 /* rows that stay in L1 (32 KiB at d 128) while queries pass over them */
#define VA_SEARCH_QUERY_BLOCK   32 /* queries one thread takes over a tile of rows at a time */
#define VA_SEARCH_ROWS_PER_SIMD 8  /* rows the AVX2 kernel measures against one query at once */

/* --- the top-k heap ------------------------------------------------------------------------------- */
void va_topk_init(va_topk_t *h, va_neighbor_t *storage, int64_t k) {
  h->e = storage;
  h->k = k;
  h->size = 0;
}

static void sift_down(va_neighbor_t *e, int64_t size, int64_t i) {
  for (;;) {
    int64_t l = 2 * i + 1, r = l + 1, worst = i;
    if (l < size && va_search_before(e[worst], e[l])) worst = l;
    if (r < size && va_search_before(e[worst], e[r])) worst = r;
    if (worst == i) return;
    va_neighbor_t t = e[i];
    e[i] = e[worst];
    e[worst] = t;
    i = worst;
  }
}

void va_topk_push(va_topk_t *h, float dist, int64_t id) {
  const va_neighbor_t x = {dist, id};
  if (h->size < h->k) {
    int64_t i = h->size++;
    while (i > 0) { /* sift up: the parent must come after (or equal) its child */
      int64_t p = (i - 1) / 2;
      if (!va_search_before(h->e[p], x)) break;
      h->e[i] = h->e[p];
      i = p;
    }
    h->e[i] = x;
    return;
  }
  if (h->k == 0 || !va_search_before(x, h->e[0])) return;
  h->e[0] = x;
  sift_down(h->e, h->size, 0);
}

void va_topk_sorted(va_topk_t *h, va_neighbor_t *out) {
  const int64_t found = h->size;
  /* Heap sort in place: pop the worst to the back, leaving the heap ascending. */
  for (int64_t end = found - 1; end > 0; end--) {
    va_neighbor_t t = h->e[0];
    h->e[0] = h->e[end];
    h->e[end] = t;
    sift_down(h->e, end, 0);
  }
  if (out != h->e) memmove(out, h->e, (size_t)found * sizeof *out);
  for (int64_t i = found; i < h->k; i++) out[i] = (va_neighbor_t){__builtin_inff(), -1};
  h->size = 0;
}

/* --- distances ------------------------------------------------------------------------------------ */
/* What a kernel computes of a query q and a row x, from the recipe's sum s (l2: of (q - x)^2; the
 * others: of q x): the l2 distance s, the cosine distance max(0, 1 - s), or the probe's l2 key
 * |x|^2 - 2 s, which orders the anchors as |q - x|^2 does (|q|^2 is the same for all) with one FMA a
 * coordinate instead of two. */
typedef enum { MEASURE_L2, MEASURE_COSINE, MEASURE_PROBE_L2 } measure_t;

static inline float finish(float sum, measure_t measure, float row_norm) {
  if (measure == MEASURE_L2) return sum;
  if (measure == MEASURE_PROBE_L2) return row_norm - 2.0f * sum;
  const float c = 1.0f - sum;
  return c > 0 ? c : 0.0f;
}

/* The recipe without SIMD: eight partial sums over t mod 8 in increasing t, one FMA a step, combined
 * as ((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7)). The AVX2 kernel must match it bit for bit (tested). */
static float recipe_sum_portable(const float *q, const float *x, int64_t d, int dot) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t t = 0; t < d; t++) {
    const int u = (int)(t & 7);
    if (dot) s[u] = fmaf(q[t], x[t], s[u]);
    else {
      const float diff = q[t] - x[t];
      s[u] = fmaf(diff, diff, s[u]);
    }
  }
  return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

float va_search_distance_portable(const float *q, const float *x, int64_t d, int cosine) {
  return finish(recipe_sum_portable(q, x, d, cosine), cosine ? MEASURE_COSINE : MEASURE_L2, 0.0f);
}

double va_search_distance_ref(const float *q, const float *x, int64_t d, int cosine) {
  double s = 0;
  for (int64_t t = 0; t < d; t++) {
    if (cosine) s += (double)q[t] * (double)x[t];
    else {
      const double diff = (double)q[t] - (double)x[t];
      s += diff * diff;
    }
  }
  return cosine ? fmax(0.0, 1.0 - s) : s;
}

int va_search_simd_available(void) {
#ifdef VA_SEARCH_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return 0;
#endif
}

#ifdef VA_SEARCH_X86
/* The first d mod 8 lanes of the last partial block set, the rest zero: the tail's values, so that a
 * missing coordinate adds fma(0, 0, s) = s, exactly as the portable loop that never sees it. */
__attribute__((target("avx2,fma"))) static inline __m256i tail_mask(int64_t rest) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rest), lane);
}

/* The recipe's combination for eight accumulators at once: lane r of the result is
 * ((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7)) of a[r], the same additions in the same order as the portable
 * code (each one commutes exactly). */
__attribute__((target("avx2,fma"))) static inline __m256 combine8(const __m256 a[8]) {
  __m256 t[4]; /* t[p]: rows 2p (low half) and 2p + 1 (high half) as (s0+s4, s1+s5, s2+s6, s3+s7) */
  for (int p = 0; p < 4; p++)
    t[p] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * p], a[2 * p + 1], 0x20),
                         _mm256_permute2f128_ps(a[2 * p], a[2 * p + 1], 0x31));
  /* per 128-bit half, ((s0+s4)+(s2+s6), (s1+s5)+(s3+s7)) of two rows */
  const __m256 u01 = _mm256_add_ps(_mm256_shuffle_ps(t[0], t[1], 0x44), _mm256_shuffle_ps(t[0], t[1], 0xEE));
  const __m256 u23 = _mm256_add_ps(_mm256_shuffle_ps(t[2], t[3], 0x44), _mm256_shuffle_ps(t[2], t[3], 0xEE));
  /* rows 0, 2, 4, 6 in the low half, 1, 3, 5, 7 in the high half; then in row order */
  const __m256 v = _mm256_add_ps(_mm256_shuffle_ps(u01, u23, 0x88), _mm256_shuffle_ps(u01, u23, 0xDD));
  return _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One step of the recipe for eight rows: lane u of acc[r] gains the term t + u of row r. */
#define VA_SEARCH_STEP8(LOAD)                                                                                          \
  do {                                                                                                                 \
    const __m256 qv = LOAD(q + t);                                                                                     \
    for (int r = 0; r < VA_SEARCH_ROWS_PER_SIMD; r++) {                                                                \
      const __m256 xv = LOAD(x[r] + t);                                                                                \
      if (dot) acc[r] = _mm256_fmadd_ps(qv, xv, acc[r]);                                                               \
      else {                                                                                                           \
        const __m256 diff = _mm256_sub_ps(qv, xv);                                                                     \
        acc[r] = _mm256_fmadd_ps(diff, diff, acc[r]);                                                                  \
      }                                                                                                                \
    }                                                                                                                  \
  } while (0)

/* The recipe's sums of one query against rows x[0..ROWS_PER_SIMD): lane u of each accumulator holds the
 * partial sum over t = u mod 8 in increasing t, each step one FMA: the portable values. Eight
 * independent accumulators keep both FMA pipes busy through the FMA latency. */
__attribute__((target("avx2,fma"))) static inline __m256 sums_avx2(const float *q, const float *const *x, int64_t d,
                                                                   int dot) {
  __m256 acc[VA_SEARCH_ROWS_PER_SIMD];
  for (int r = 0; r < VA_SEARCH_ROWS_PER_SIMD; r++) acc[r] = _mm256_setzero_ps();
  int64_t t = 0;
  for (; t + 8 <= d; t += 8) VA_SEARCH_STEP8(_mm256_loadu_ps);
  if (t < d) {
    const __m256i m = tail_mask(d - t);
#define VA_SEARCH_MASKED_LOAD(p) _mm256_maskload_ps((p), m)
    VA_SEARCH_STEP8(VA_SEARCH_MASKED_LOAD);
#undef VA_SEARCH_MASKED_LOAD
  }
  return combine8(acc);
}
#undef VA_SEARCH_STEP8

/* finish() on eight sums; norms: the rows' |x|^2 (MEASURE_PROBE_L2 only). maxps returns its second
 * operand (+0) for a NaN or a zero first one, as c > 0 ? c : 0 does. */
__attribute__((target("avx2,fma"))) static inline __m256 finish8(__m256 sum, measure_t measure, __m256 norms) {
  if (measure == MEASURE_L2) return sum;
  if (measure == MEASURE_PROBE_L2) return _mm256_sub_ps(norms, _mm256_add_ps(sum, sum));
  return _mm256_max_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), sum), _mm256_setzero_ps());
}

/* The dot products of two queries against four rows, the recipe's sums: lanes 0-3 q0 . x[0..3], lanes
 * 4-7 q1 . x[0..3]. Each row's load serves both queries: six loads for eight FMAs instead of nine. */
__attribute__((target("avx2,fma"))) static inline __m256 dots_2x4_avx2(const float *q0, const float *q1,
                                                                       const float *const *x, int64_t d) {
  __m256 acc[8];
  for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_ps();
  int64_t t = 0;
  for (; t + 8 <= d; t += 8) {
    const __m256 a = _mm256_loadu_ps(q0 + t), b = _mm256_loadu_ps(q1 + t);
    for (int r = 0; r < 4; r++) {
      const __m256 xv = _mm256_loadu_ps(x[r] + t);
      acc[r] = _mm256_fmadd_ps(a, xv, acc[r]);
      acc[4 + r] = _mm256_fmadd_ps(b, xv, acc[4 + r]);
    }
  }
  if (t < d) {
    const __m256i m = tail_mask(d - t);
    const __m256 a = _mm256_maskload_ps(q0 + t, m), b = _mm256_maskload_ps(q1 + t, m);
    for (int r = 0; r < 4; r++) {
      const __m256 xv = _mm256_maskload_ps(x[r] + t, m);
      acc[r] = _mm256_fmadd_ps(a, xv, acc[r]);
      acc[4 + r] = _mm256_fmadd_ps(b, xv, acc[4 + r]);
    }
  }
  return combine8(acc);
}

/* Offers anchors A[0..m) to the heaps of queries q0 and q1 (q1 may be q0: its heap is then offered once),
 * measured by the probe's key (cosine or MEASURE_PROBE_L2 with norms), four anchors at a time. */
__attribute__((target("avx2,fma"))) static void probe_pair_avx2(const float *q0, const float *q1, const float *A,
                                                                int64_t m, int64_t d, int64_t id0, measure_t measure,
                                                                const float *norms, va_topk_t *h0, va_topk_t *h1) {
  for (int64_t i = 0; i < m; i += 4) {
    const float *xs[4];
    float nv[8] = {0};
    for (int r = 0; r < 4; r++) {
      const int64_t row = i + r < m ? i + r : m - 1; /* the last anchors padded by repeating the last one */
      xs[r] = A + row * d;
      if (norms) nv[r] = nv[4 + r] = norms[row];
    }
    const __m256 key = finish8(dots_2x4_avx2(q0, q1, xs, d), measure, _mm256_loadu_ps(nv));
    float kv[8];
    _mm256_storeu_ps(kv, key);
    const int rows = m - i < 4 ? (int)(m - i) : 4;
    for (int r = 0; r < rows; r++)
      if (kv[r] <= va_topk_bound(h0)) va_topk_push(h0, kv[r], id0 + i + r);
    if (h1 != h0)
      for (int r = 0; r < rows; r++)
        if (kv[4 + r] <= va_topk_bound(h1)) va_topk_push(h1, kv[4 + r], id0 + i + r);
  }
}
#endif

static int use_simd = -1; /* decided once: va_search_simd_available() */

static int simd(void) {
  if (use_simd < 0) use_simd = va_search_simd_available();
  return use_simd;
}

#ifdef VA_SEARCH_X86
/* One distance through the eight-row kernel (every row the same): the bits of the scan's distances. */
__attribute__((target("avx2,fma"))) static float distance_avx2(const float *q, const float *x, int64_t d, int cosine) {
  const float *xs[VA_SEARCH_ROWS_PER_SIMD];
  for (int r = 0; r < VA_SEARCH_ROWS_PER_SIMD; r++) xs[r] = x;
  return _mm256_cvtss_f32(
      finish8(sums_avx2(q, xs, d, cosine), cosine ? MEASURE_COSINE : MEASURE_L2, _mm256_setzero_ps()));
}
#endif

float va_search_distance(const float *q, const float *x, int64_t d, int cosine) {
#ifdef VA_SEARCH_X86
  if (simd()) return distance_avx2(q, x, d, cosine);
#endif
  return va_search_distance_portable(q, x, d, cosine);
}

#ifdef VA_SEARCH_X86
/* offer_rows with AVX2, eight rows at a time: a block's values are compared with the heap's bound in one
 * instruction and only those that may enter are pushed. */
__attribute__((target("avx2,fma"))) static void offer_rows_avx2(const float *q, const float *X, int64_t m, int64_t d,
                                                                const int64_t *ids, int64_t id0, measure_t measure,
                                                                const float *norms, va_topk_t *h) {
  const int dot = measure != MEASURE_L2;
  for (int64_t i = 0; i < m; i += VA_SEARCH_ROWS_PER_SIMD) {
    const float *xs[VA_SEARCH_ROWS_PER_SIMD]; /* the last rows padded by repeating the last one */
    float nv[VA_SEARCH_ROWS_PER_SIMD] = {0};
    for (int r = 0; r < VA_SEARCH_ROWS_PER_SIMD; r++) {
      const int64_t row = i + r < m ? i + r : m - 1;
      xs[r] = X + row * d;
      if (norms) nv[r] = norms[row];
    }
    const __m256 dist = finish8(sums_avx2(q, xs, d, dot), measure, _mm256_loadu_ps(nv));
    int mask = _mm256_movemask_ps(_mm256_cmp_ps(dist, _mm256_set1_ps(va_topk_bound(h)), _CMP_LE_OQ));
    if (m - i < VA_SEARCH_ROWS_PER_SIMD) mask &= (1 << (m - i)) - 1;
    if (!mask) continue;
    float dv[VA_SEARCH_ROWS_PER_SIMD];
    _mm256_storeu_ps(dv, dist);
    for (int r = 0; r < VA_SEARCH_ROWS_PER_SIMD; r++) /* the bound tightens as entries go in: test again */
      if ((mask >> r & 1) && dv[r] <= va_topk_bound(h)) va_topk_push(h, dv[r], ids ? ids[i + r] : id0 + i + r);
  }
}
#endif

/* Offers rows X[0..m) (ids[i], or id0 + i) to heap h, measured against query q; norms: the rows' |x|^2
 * for MEASURE_PROBE_L2, else NULL. */
static void offer_rows(const float *q, const float *X, int64_t m, int64_t d, const int64_t *ids, int64_t id0,
                       measure_t measure, const float *norms, va_topk_t *h) {
#ifdef VA_SEARCH_X86
  if (simd()) {
    offer_rows_avx2(q, X, m, d, ids, id0, measure, norms, h);
    return;
  }
#endif
  for (int64_t i = 0; i < m; i++) {
    const float dist =
        finish(recipe_sum_portable(q, X + i * d, d, measure != MEASURE_L2), measure, norms ? norms[i] : 0.0f);
    if (dist <= va_topk_bound(h)) va_topk_push(h, dist, ids ? ids[i] : id0 + i);
  }
}

/* Query blocks over tiles of rows (the tile stays in L1 while the block passes over it), blocks spread
 * over the threads. */
static void scan_tiles(const float *Q, int64_t nq, int64_t d, const float *X, int64_t m, const int64_t *ids,
                       int64_t id0, measure_t measure, const float *norms, int threads, va_topk_t *heaps) {
  const int64_t qblocks = (nq + VA_SEARCH_QUERY_BLOCK - 1) / VA_SEARCH_QUERY_BLOCK;
  (void)threads;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(dynamic, 1) if (qblocks > 1 && m > 64)
#endif
  for (int64_t b = 0; b < qblocks; b++) {
    const int64_t q0 = b * VA_SEARCH_QUERY_BLOCK,
                  q1 = q0 + VA_SEARCH_QUERY_BLOCK < nq ? q0 + VA_SEARCH_QUERY_BLOCK : nq;
    for (int64_t r0 = 0; r0 < m; r0 += VA_SEARCH_TILE_ROWS) {
      const int64_t rows = m - r0 < VA_SEARCH_TILE_ROWS ? m - r0 : VA_SEARCH_TILE_ROWS;
      for (int64_t qi = q0; qi < q1; qi++)
        offer_rows(Q + qi * d, X + r0 * d, rows, d, ids ? ids + r0 : NULL, id0 + r0, measure, norms ? norms + r0 : NULL,
                   &heaps[qi]);
    }
  }
}

void va_search_scan(const float *Q, int64_t nq, int64_t d, const float *X, int64_t m, const int64_t *ids, int64_t id0,
                    int cosine, int threads, va_topk_t *heaps) {
  scan_tiles(Q, nq, d, X, m, ids, id0, cosine ? MEASURE_COSINE : MEASURE_L2, NULL, threads, heaps);
}

void va_search_scan_ref(const float *Q, int64_t nq, int64_t d, const float *X, int64_t m, const int64_t *ids,
                        int64_t id0, int cosine, va_topk_t *heaps) {
  for (int64_t qi = 0; qi < nq; qi++)
    for (int64_t i = 0; i < m; i++)
      va_topk_push(&heaps[qi], (float)va_search_distance_ref(Q + qi * d, X + i * d, d, cosine), ids ? ids[i] : id0 + i);
}

float va_search_probe_key(const float *q, const float *a, int64_t d, int cosine) {
  if (cosine) return va_search_distance_portable(q, a, d, 1);
  return finish(recipe_sum_portable(q, a, d, 1), MEASURE_PROBE_L2, va_search_probe_norm(a, d));
}

float va_search_probe_norm(const float *a, int64_t d) { return recipe_sum_portable(a, a, d, 1); }

void va_search_probe(const float *Q, int64_t nq, int64_t d, const float *A, int64_t nanchors, int cosine,
                     int64_t nprobe, int threads, int64_t *probes) {
  va_neighbor_t *store = va_malloc((size_t)(nq * nprobe + 1) * sizeof *store, "probe heaps");
  va_topk_t *heaps = va_malloc((size_t)(nq + 1) * sizeof *heaps, "probe heaps");
  float *norms = NULL;
  if (!cosine) {
    norms = va_malloc((size_t)(nanchors + 1) * sizeof *norms, "anchor norms");
    for (int64_t j = 0; j < nanchors; j++) norms[j] = va_search_probe_norm(A + j * d, d);
  }
  for (int64_t qi = 0; qi < nq; qi++) va_topk_init(&heaps[qi], store + qi * nprobe, nprobe);
  const measure_t measure = cosine ? MEASURE_COSINE : MEASURE_PROBE_L2;
#ifdef VA_SEARCH_X86
  if (simd()) { /* queries in pairs over tiles of anchors, pair blocks spread over the threads */
    const int64_t pblocks = (nq + VA_SEARCH_QUERY_BLOCK - 1) / VA_SEARCH_QUERY_BLOCK;
    (void)threads;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(dynamic, 1) if (pblocks > 1)
#endif
    for (int64_t b = 0; b < pblocks; b++) {
      const int64_t q0 = b * VA_SEARCH_QUERY_BLOCK,
                    q1 = q0 + VA_SEARCH_QUERY_BLOCK < nq ? q0 + VA_SEARCH_QUERY_BLOCK : nq;
      for (int64_t j0 = 0; j0 < nanchors; j0 += VA_SEARCH_TILE_ROWS) {
        const int64_t rows = nanchors - j0 < VA_SEARCH_TILE_ROWS ? nanchors - j0 : VA_SEARCH_TILE_ROWS;
        for (int64_t qi = q0; qi < q1; qi += 2) {
          const int64_t qj = qi + 1 < q1 ? qi + 1 : qi;
          probe_pair_avx2(Q + qi * d, Q + qj * d, A + j0 * d, rows, d, j0, measure, norms ? norms + j0 : NULL,
                          &heaps[qi], &heaps[qj]);
        }
      }
    }
  } else
#endif
    scan_tiles(Q, nq, d, A, nanchors, NULL, 0, measure, norms, threads, heaps);
  for (int64_t qi = 0; qi < nq; qi++) {
    va_topk_sorted(&heaps[qi], store + qi * nprobe);
    for (int64_t p = 0; p < nprobe; p++) probes[qi * nprobe + p] = store[qi * nprobe + p].id;
  }
  free(norms);
  free(heaps);
  free(store);
}

/* One thread's share of va_search_scan_lists: queries [q0, q1) grouped by the lists they probe (a
 * counting sort, queries ascending within a list), then list by list, a tile of rows at a time, every
 * query of the group that probes the list offered the tile while it is in cache. */
static void scan_lists_block(const float *Q, int64_t q0, int64_t q1, int64_t d, int64_t nlists, const float *rows,
                             const int64_t *offset, const int64_t *ids, const int64_t *probes, int64_t nprobe,
                             int cosine, va_topk_t *heaps) {
  const int64_t pairs = (q1 - q0) * nprobe;
  int64_t *first = va_malloc((size_t)(nlists + 1) * sizeof *first, "list groups"),
          *members = va_malloc((size_t)(pairs + 1) * sizeof *members, "list groups");
  memset(first, 0, (size_t)(nlists + 1) * sizeof *first);
  for (int64_t i = 0; i < pairs; i++) first[probes[q0 * nprobe + i] + 1]++;
  for (int64_t j = 0; j < nlists; j++) first[j + 1] += first[j];
  int64_t *fill = va_malloc((size_t)(nlists + 1) * sizeof *fill, "list groups");
  memcpy(fill, first, (size_t)nlists * sizeof *fill);
  for (int64_t q = q0; q < q1; q++)
    for (int64_t p = 0; p < nprobe; p++) members[fill[probes[q * nprobe + p]]++] = q;
  for (int64_t j = 0; j < nlists; j++) {
    const int64_t r0 = offset[j], m = offset[j + 1] - r0;
    if (first[j] == first[j + 1] || m == 0) continue;
    for (int64_t t0 = 0; t0 < m; t0 += VA_SEARCH_TILE_ROWS) {
      const int64_t rows_in_tile = m - t0 < VA_SEARCH_TILE_ROWS ? m - t0 : VA_SEARCH_TILE_ROWS;
      const float *X = rows + (r0 + t0) * d;
      for (int64_t g = first[j]; g < first[j + 1]; g++) {
        const int64_t q = members[g];
        offer_rows(Q + q * d, X, rows_in_tile, d, ids + r0 + t0, 0, cosine ? MEASURE_COSINE : MEASURE_L2, NULL,
                   &heaps[q]);
      }
    }
  }
  free(fill);
  free(members);
  free(first);
}

void va_search_scan_lists(const float *Q, int64_t nq, int64_t d, int64_t nlists, const float *rows,
                          const int64_t *offset, const int64_t *ids, const int64_t *probes, int64_t nprobe, int cosine,
                          int threads, va_topk_t *heaps) {
  const int parts = threads > 1 && nq > 1 ? (int)(threads < nq ? threads : nq) : 1;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(parts) schedule(static, 1) if (parts > 1)
#endif
  for (int b = 0; b < parts; b++)
    scan_lists_block(Q, nq * b / parts, nq * (b + 1) / parts, d, nlists, rows, offset, ids, probes, nprobe, cosine,
                     heaps);
}

void va_search_merge(const va_neighbor_t *in, int nlists, int64_t stride, int64_t k, va_neighbor_t *out) {
  int64_t pos[nlists > 0 ? nlists : 1];
  for (int l = 0; l < nlists; l++) pos[l] = 0;
  for (int64_t i = 0; i < k; i++) {
    int best = -1;
    for (int l = 0; l < nlists; l++)
      if (pos[l] < k && (best < 0 || va_search_before(in[l * stride + pos[l]], in[best * stride + pos[best]])))
        best = l;
    if (best < 0) {
      out[i] = (va_neighbor_t){__builtin_inff(), -1};
      continue;
    }
    out[i] = in[best * stride + pos[best]++];
  }
}

int64_t va_search_unit_rows(float *X, int64_t m, int64_t d, int threads) {
  int64_t zeros = 0;
  (void)threads;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(static) reduction(+ : zeros)
#endif
  for (int64_t i = 0; i < m; i++) {
    float *x = X + i * d;
    double s = 0;
    for (int64_t t = 0; t < d; t++) s += (double)x[t] * x[t];
    if (s > 0)
      for (int64_t t = 0; t < d; t++) x[t] = (float)(x[t] / sqrt(s));
    else zeros++;
  }
  return zeros;
}
