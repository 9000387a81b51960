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

#define VA_SEARCH_TILE_ROWS     256 /* rows that stay in cache while a block of queries passes over them */
#define VA_SEARCH_QUERY_BLOCK   8   /* queries one thread takes at a time */
#define VA_SEARCH_ROWS_PER_SIMD 4   /* rows the AVX2 kernel measures against one query at once */

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
/* The recipe's last step, shared by both kernels: the eight lanes in a fixed tree, then the metric. */
static inline float combine_lanes(const float s[8], int cosine) {
  const float sum = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
  if (!cosine) return sum;
  const float c = 1.0f - sum;
  return c > 0 ? c : 0.0f;
}

float va_search_distance_portable(const float *q, const float *x, int64_t d, int cosine) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t t = 0; t < d; t++) {
    const int u = (int)(t & 7);
    if (cosine) s[u] = fmaf(q[t], x[t], s[u]);
    else {
      const float diff = q[t] - x[t];
      s[u] = fmaf(diff, diff, s[u]);
    }
  }
  return combine_lanes(s, cosine);
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
/* Lanes 0..7 of v into s, for combine_lanes: the same tree as the portable code. */
__attribute__((target("avx2,fma"))) static inline void store_lanes(__m256 v, float s[8]) { _mm256_storeu_ps(s, v); }

/* The first d mod 8 lanes of the last partial block set, the rest zero: the tail's values, so that a
 * missing coordinate adds fma(0, 0, s) = s, exactly as the portable loop that never sees it. */
__attribute__((target("avx2,fma"))) static inline __m256i tail_mask(int64_t rest) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rest), lane);
}

/* One query against rows x[0..ROWS_PER_SIMD): the recipe with lane u of each accumulator holding the
 * partial sum over t = u mod 8 in increasing t, each step one FMA: the portable kernel's values. */
__attribute__((target("avx2,fma"))) static void distances_avx2(const float *q, const float *const *x, int64_t d,
                                                               int cosine, float *out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t t = 0;
  for (; t + 8 <= d; t += 8) {
    const __m256 qv = _mm256_loadu_ps(q + t);
    __m256 x0 = _mm256_loadu_ps(x[0] + t), x1 = _mm256_loadu_ps(x[1] + t), x2 = _mm256_loadu_ps(x[2] + t),
           x3 = _mm256_loadu_ps(x[3] + t);
    if (cosine) {
      a0 = _mm256_fmadd_ps(qv, x0, a0);
      a1 = _mm256_fmadd_ps(qv, x1, a1);
      a2 = _mm256_fmadd_ps(qv, x2, a2);
      a3 = _mm256_fmadd_ps(qv, x3, a3);
    } else {
      x0 = _mm256_sub_ps(qv, x0);
      x1 = _mm256_sub_ps(qv, x1);
      x2 = _mm256_sub_ps(qv, x2);
      x3 = _mm256_sub_ps(qv, x3);
      a0 = _mm256_fmadd_ps(x0, x0, a0);
      a1 = _mm256_fmadd_ps(x1, x1, a1);
      a2 = _mm256_fmadd_ps(x2, x2, a2);
      a3 = _mm256_fmadd_ps(x3, x3, a3);
    }
  }
  if (t < d) {
    const __m256i m = tail_mask(d - t);
    const __m256 qv = _mm256_maskload_ps(q + t, m);
    __m256 x0 = _mm256_maskload_ps(x[0] + t, m), x1 = _mm256_maskload_ps(x[1] + t, m),
           x2 = _mm256_maskload_ps(x[2] + t, m), x3 = _mm256_maskload_ps(x[3] + t, m);
    if (cosine) {
      a0 = _mm256_fmadd_ps(qv, x0, a0);
      a1 = _mm256_fmadd_ps(qv, x1, a1);
      a2 = _mm256_fmadd_ps(qv, x2, a2);
      a3 = _mm256_fmadd_ps(qv, x3, a3);
    } else {
      x0 = _mm256_sub_ps(qv, x0);
      x1 = _mm256_sub_ps(qv, x1);
      x2 = _mm256_sub_ps(qv, x2);
      x3 = _mm256_sub_ps(qv, x3);
      a0 = _mm256_fmadd_ps(x0, x0, a0);
      a1 = _mm256_fmadd_ps(x1, x1, a1);
      a2 = _mm256_fmadd_ps(x2, x2, a2);
      a3 = _mm256_fmadd_ps(x3, x3, a3);
    }
  }
  float s[8];
  store_lanes(a0, s);
  out[0] = combine_lanes(s, cosine);
  store_lanes(a1, s);
  out[1] = combine_lanes(s, cosine);
  store_lanes(a2, s);
  out[2] = combine_lanes(s, cosine);
  store_lanes(a3, s);
  out[3] = combine_lanes(s, cosine);
}
#endif

static int use_simd = -1; /* decided once: va_search_simd_available() */

static int simd(void) {
  if (use_simd < 0) use_simd = va_search_simd_available();
  return use_simd;
}

float va_search_distance(const float *q, const float *x, int64_t d, int cosine) {
#ifdef VA_SEARCH_X86
  if (simd()) {
    const float *xs[VA_SEARCH_ROWS_PER_SIMD] = {x, x, x, x};
    float out[VA_SEARCH_ROWS_PER_SIMD];
    distances_avx2(q, xs, d, cosine, out);
    return out[0];
  }
#endif
  return va_search_distance_portable(q, x, d, cosine);
}

/* Distances of one query to rows X[0..m) (m <= VA_SEARCH_TILE_ROWS) into out. */
static void tile_distances(const float *q, const float *X, int64_t m, int64_t d, int cosine, int vector, float *out) {
  int64_t i = 0;
#ifdef VA_SEARCH_X86
  if (vector)
    for (; i + VA_SEARCH_ROWS_PER_SIMD <= m; i += VA_SEARCH_ROWS_PER_SIMD) {
      const float *xs[VA_SEARCH_ROWS_PER_SIMD] = {X + i * d, X + (i + 1) * d, X + (i + 2) * d, X + (i + 3) * d};
      distances_avx2(q, xs, d, cosine, out + i);
    }
  if (vector && i < m) { /* the last rows, padded by repeating the last one (its extra results unused) */
    const float *xs[VA_SEARCH_ROWS_PER_SIMD];
    float rest[VA_SEARCH_ROWS_PER_SIMD];
    for (int r = 0; r < VA_SEARCH_ROWS_PER_SIMD; r++) xs[r] = X + (i + r < m ? i + r : m - 1) * d;
    distances_avx2(q, xs, d, cosine, rest);
    for (int r = 0; i + r < m; r++) out[i + r] = rest[r];
    i = m;
  }
#else
  (void)vector;
#endif
  for (; i < m; i++) out[i] = va_search_distance_portable(q, X + i * d, d, cosine);
}

void va_search_scan(const float *Q, int64_t nq, int64_t d, const float *X, int64_t m, const int64_t *ids, int64_t id0,
                    int cosine, int threads, va_topk_t *heaps) {
  const int vector = simd();
  const int64_t qblocks = (nq + VA_SEARCH_QUERY_BLOCK - 1) / VA_SEARCH_QUERY_BLOCK;
  (void)threads;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(dynamic, 1) if (qblocks > 1 && m > 64)
#endif
  for (int64_t b = 0; b < qblocks; b++) {
    float dist[VA_SEARCH_TILE_ROWS];
    const int64_t q0 = b * VA_SEARCH_QUERY_BLOCK,
                  q1 = q0 + VA_SEARCH_QUERY_BLOCK < nq ? q0 + VA_SEARCH_QUERY_BLOCK : nq;
    for (int64_t r0 = 0; r0 < m; r0 += VA_SEARCH_TILE_ROWS) {
      const int64_t rows = m - r0 < VA_SEARCH_TILE_ROWS ? m - r0 : VA_SEARCH_TILE_ROWS;
      for (int64_t qi = q0; qi < q1; qi++) {
        va_topk_t *h = &heaps[qi];
        tile_distances(Q + qi * d, X + r0 * d, rows, d, cosine, vector, dist);
        for (int64_t i = 0; i < rows; i++)
          if (dist[i] <= va_topk_bound(h)) va_topk_push(h, dist[i], ids ? ids[r0 + i] : id0 + r0 + i);
      }
    }
  }
}

void va_search_scan_ref(const float *Q, int64_t nq, int64_t d, const float *X, int64_t m, const int64_t *ids,
                        int64_t id0, int cosine, va_topk_t *heaps) {
  for (int64_t qi = 0; qi < nq; qi++)
    for (int64_t i = 0; i < m; i++)
      va_topk_push(&heaps[qi], (float)va_search_distance_ref(Q + qi * d, X + i * d, d, cosine), ids ? ids[i] : id0 + i);
}

void va_search_probe(const float *Q, int64_t nq, int64_t d, const float *A, int64_t nanchors, int cosine,
                     int64_t nprobe, int threads, int64_t *probes) {
  const int vector = simd();
  (void)threads;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel num_threads(threads > 0 ? threads : 1) if (nq > 1)
#endif
  {
    va_neighbor_t *store = va_malloc((size_t)nprobe * sizeof *store, "probe heap");
    float dist[VA_SEARCH_TILE_ROWS];
#ifdef VECANNEAL_OPENMP
#pragma omp for schedule(dynamic, 4)
#endif
    for (int64_t qi = 0; qi < nq; qi++) {
      va_topk_t h;
      va_topk_init(&h, store, nprobe);
      for (int64_t j0 = 0; j0 < nanchors; j0 += VA_SEARCH_TILE_ROWS) {
        const int64_t rows = nanchors - j0 < VA_SEARCH_TILE_ROWS ? nanchors - j0 : VA_SEARCH_TILE_ROWS;
        tile_distances(Q + qi * d, A + j0 * d, rows, d, cosine, vector, dist);
        for (int64_t j = 0; j < rows; j++) va_topk_push(&h, dist[j], j0 + j);
      }
      va_topk_sorted(&h, store);
      for (int64_t p = 0; p < nprobe; p++) probes[qi * nprobe + p] = store[p].id;
    }
    free(store);
  }
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
