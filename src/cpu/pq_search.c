/* pq_search.c: the CPU kernels of search on residual PQ codes (cpu/pq_search.h): the tables (their inner
 * loop over the centroids, compiled for AVX2 and portably: the same bits, the products rounded before the
 * sums as without FMA), the four-row scan of coded rows, the list scan of a batch and the decoding
 * reference. */
#include "cpu/pq_search.h"

#include <stdlib.h>
#include <string.h>

#include "cpu/pq.h"    /* va_pq_subspace, va_pq_decode */
#include "util/util.h" /* va_malloc */

#define PQ_SCAN_ROWS 4 /* rows summed at once: four independent chains of table loads and additions */

/* Sums over the columns of each subspace, in increasing t, of the products v_t C_mc,t for every centroid c
 * (products rounded, then added), into out[m ksub + c]; then out = scale out (scale -1 or 1: exact). */
static inline __attribute__((always_inline)) void dots_body(const float *v, int64_t d, int64_t M, int64_t ksub,
                                                            const float *T, float scale, float *out) {
  for (int64_t m = 0; m < M; m++) {
    int64_t col0, width;
    va_pq_subspace(d, M, m, &col0, &width);
    float *o = out + m * ksub;
    for (int64_t c = 0; c < ksub; c++) o[c] = 0.0f;
    for (int64_t t = 0; t < width; t++) {
      const float vt = v[col0 + t];
      const float *col = T + (col0 + t) * ksub;
      for (int64_t c = 0; c < ksub; c++) {
        const float p = vt * col[c];
        o[c] = o[c] + p;
      }
    }
    for (int64_t c = 0; c < ksub; c++) o[c] = scale * o[c];
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void dots_avx2(const float *v, int64_t d, int64_t M, int64_t ksub,
                                                      const float *T, float scale, float *out) {
  dots_body(v, d, M, ksub, T, scale, out);
}
#endif

static void dots_portable(const float *v, int64_t d, int64_t M, int64_t ksub, const float *T, float scale, float *out) {
  dots_body(v, d, M, ksub, T, scale, out);
}

static int have_avx2 = -1; /* decided once */

static void dots(const float *v, int64_t d, int64_t M, int64_t ksub, const float *T, float scale, float *out) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (have_avx2 < 0) {
    __builtin_cpu_init();
    have_avx2 = __builtin_cpu_supports("avx2") != 0;
  }
  if (have_avx2) {
    dots_avx2(v, d, M, ksub, T, scale, out);
    return;
  }
#endif
  dots_portable(v, d, M, ksub, T, scale, out);
}

void va_pq_query_table(const float *q, int64_t d, int64_t M, int64_t ksub, const float *T, float *table) {
  dots(q, d, M, ksub, T, -1.0f, table);
}

float *va_pq_list_terms(const float *A, int64_t nlists, int64_t d, int64_t M, int64_t ksub, const float *T,
                        int threads) {
  const int64_t per = M * ksub;
  float *P = va_malloc((size_t)((nlists > 0 ? nlists : 1) * per) * sizeof(float), "pq list terms");
  float *norms = va_malloc((size_t)per * sizeof(float), "pq centroid norms");
  for (int64_t m = 0; m < M; m++) { /* ||C_mc||^2: the centroid's own column values as v */
    int64_t col0, width;
    va_pq_subspace(d, M, m, &col0, &width);
    for (int64_t c = 0; c < ksub; c++) {
      float s = 0.0f;
      for (int64_t t = 0; t < width; t++) {
        const float x = T[(col0 + t) * ksub + c];
        const float p = x * x;
        s = s + p;
      }
      norms[m * ksub + c] = s;
    }
  }
  (void)threads;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(static)
#endif
  for (int64_t j = 0; j < nlists; j++) {
    float *pj = P + j * per;
    dots(A + j * d, d, M, ksub, T, 1.0f, pj);
    for (int64_t i = 0; i < per; i++) pj[i] = norms[i] + (pj[i] + pj[i]);
  }
  free(norms);
  return P;
}

float va_pq_list_base(const float *q, const float *a, int64_t d, int cosine) {
  double s = 0;
  for (int64_t t = 0; t < d; t++) {
    if (cosine) s += (double)q[t] * (double)a[t];
    else s += ((double)q[t] - (double)a[t]) * ((double)q[t] - (double)a[t]);
  }
  return (float)(cosine ? 1.0 - s : s);
}

void va_pq_list_table(const float *query_table, const float *terms, int64_t M, int64_t ksub, float *table) {
  for (int64_t i = 0; i < M * ksub; i++) table[i] = terms[i] + (query_table[i] + query_table[i]);
}

void va_pq_scan_codes(const float *table, int64_t M, int64_t ksub, float base, const uint8_t *codes, int64_t m,
                      const int64_t *ids, va_topk_t *h) {
  int64_t i = 0;
  for (; i + PQ_SCAN_ROWS <= m; i += PQ_SCAN_ROWS) {
    const uint8_t *c0 = codes + i * M, *c1 = c0 + M, *c2 = c1 + M, *c3 = c2 + M;
    float s0 = base, s1 = base, s2 = base, s3 = base;
    for (int64_t j = 0; j < M; j++) {
      const float *tab = table + j * ksub;
      s0 = s0 + tab[c0[j]];
      s1 = s1 + tab[c1[j]];
      s2 = s2 + tab[c2[j]];
      s3 = s3 + tab[c3[j]];
    }
    /* the bound tightens as entries go in: each row is tested against the current one */
    if (s0 <= va_topk_bound(h)) va_topk_push(h, s0, ids[i]);
    if (s1 <= va_topk_bound(h)) va_topk_push(h, s1, ids[i + 1]);
    if (s2 <= va_topk_bound(h)) va_topk_push(h, s2, ids[i + 2]);
    if (s3 <= va_topk_bound(h)) va_topk_push(h, s3, ids[i + 3]);
  }
  for (; i < m; i++) {
    const uint8_t *c = codes + i * M;
    float s = base;
    for (int64_t j = 0; j < M; j++) s = s + table[j * ksub + c[j]];
    if (s <= va_topk_bound(h)) va_topk_push(h, s, ids[i]);
  }
}

/* Queries [q0, q1) of va_pq_scan_lists on the calling thread, with its own tables. */
static void scan_block(const float *Q, int64_t q0, int64_t q1, int64_t d, const float *A, int64_t M, int64_t ksub,
                       const float *T, const float *terms, const uint8_t *codes, const int64_t *offset,
                       const int64_t *ids, const int64_t *probes, int64_t nprobe, int cosine, va_topk_t *heaps) {
  float *qtable = va_malloc((size_t)(M * ksub) * sizeof(float), "pq search table");
  float *table = cosine ? qtable : va_malloc((size_t)(M * ksub) * sizeof(float), "pq search table");
  for (int64_t q = q0; q < q1; q++) {
    const float *qv = Q + q * d;
    va_pq_query_table(qv, d, M, ksub, T, qtable);
    for (int64_t p = 0; p < nprobe; p++) {
      const int64_t j = probes[q * nprobe + p], r0 = offset[j], m = offset[j + 1] - r0;
      if (m == 0) continue;
      if (!cosine) va_pq_list_table(qtable, terms + j * M * ksub, M, ksub, table);
      va_pq_scan_codes(table, M, ksub, va_pq_list_base(qv, A + j * d, d, cosine), codes + r0 * M, m, ids + r0,
                       &heaps[q]);
    }
  }
  if (table != qtable) free(table);
  free(qtable);
}

void va_pq_scan_lists(const float *Q, int64_t nq, int64_t d, const float *A, int64_t M, int64_t ksub, const float *T,
                      const float *terms, const uint8_t *codes, const int64_t *offset, const int64_t *ids,
                      const int64_t *probes, int64_t nprobe, int cosine, int threads, va_topk_t *heaps) {
  const int parts = threads > 1 && nq > 1 ? (int)(threads < nq ? threads : nq) : 1;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(parts) schedule(static, 1) if (parts > 1)
#endif
  for (int b = 0; b < parts; b++)
    scan_block(Q, nq * b / parts, nq * (b + 1) / parts, d, A, M, ksub, T, terms, codes, offset, ids, probes, nprobe,
               cosine, heaps);
}

double va_pq_distance_ref(const float *q, const float *a, const uint8_t *code, int64_t d, int64_t M, int64_t ksub,
                          const float *codebooks, int cosine) {
  float *e = va_malloc((size_t)d * sizeof(float), "pq decoded residual");
  va_pq_decode(code, d, M, ksub, codebooks, e);
  double s = 0;
  for (int64_t t = 0; t < d; t++) {
    const double x = (double)a[t] + (double)e[t];
    if (cosine) s += (double)q[t] * x;
    else s += ((double)q[t] - x) * ((double)q[t] - x);
  }
  free(e);
  return cosine ? 1.0 - s : s;
}
