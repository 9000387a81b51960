/* test_pq_search.c: the kernels of search on PQ codes (cpu/pq_search.h, docs/search.md "Search on codes"), on
 * deterministic random codebooks, codes, anchors and queries, l2 and cosine, d a multiple of M and not:
 * - the tables (query table, l2 anchor terms and list table) and the base bitwise the documented recipe
 *   written out here in plain C (float32, columns in order, products rounded before the sums), so the AVX2
 *   build and the portable one agree;
 * - every row's scanned distance bitwise base + the table entries of its codes in increasing m (the
 *   four-row body and the tail alike), and within 2e-6 (1 + mag) of the reference that decodes the row
 *   and measures it in double (mag: l2 (|q| + |a| + |e|)^2, the size of the cancelling terms; cosine
 *   sum |q_t x_t|);
 * - the list scan (va_pq_scan_lists) of a batch: bitwise the same entries for 1, 2 and 3 threads, and the
 *   k first of the rows of the probed lists under (distance, id) with the distances of the recipe;
 * - empty lists and k above the probed rows (fillers).
 * Exits non-zero on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/pq.h"
#include "cpu/pq_search.h"
#include "util/rng.h"
#include "util/util.h"

#include "../check.h" /* failures, CHECK */

static float normal(uint64_t seed, uint64_t purpose, uint64_t id, uint64_t t) {
  return (float)va_rand_normal(seed, purpose, id, t);
}

/* n rows of d, each scaled to unit length when unit. */
static float *random_rows(int64_t n, int64_t d, uint64_t seed, uint64_t purpose, float scale, int unit) {
  float *X = malloc((size_t)(n * d) * sizeof(float));
  for (int64_t i = 0; i < n; i++) {
    double s = 0;
    for (int64_t t = 0; t < d; t++) {
      X[i * d + t] = scale * normal(seed, purpose, (uint64_t)i, (uint64_t)t);
      s += (double)X[i * d + t] * X[i * d + t];
    }
    if (unit)
      for (int64_t t = 0; t < d; t++) X[i * d + t] = (float)(X[i * d + t] / sqrt(s));
  }
  return X;
}

/* sum over subspace m's columns of v_t C_mc,t, products rounded then added in increasing t. */
static float plain_dot(const float *v, int64_t d, int64_t M, int64_t ksub, const float *C, int64_t m, int64_t c) {
  const int64_t dmax = va_pq_dsub_max(d, M);
  int64_t col0, width;
  va_pq_subspace(d, M, m, &col0, &width);
  float s = 0.0f;
  for (int64_t t = 0; t < width; t++) {
    const float p = v[col0 + t] * C[(m * ksub + c) * dmax + t];
    s = s + p;
  }
  return s;
}

/* The table of query q and anchor a by the documented recipe, written out, and its base. */
static float plain_table(const float *q, const float *a, int64_t d, int64_t M, int64_t ksub, const float *C, int cosine,
                         float *table) {
  const int64_t dmax = va_pq_dsub_max(d, M);
  for (int64_t m = 0; m < M; m++)
    for (int64_t c = 0; c < ksub; c++) {
      const float qt = -plain_dot(q, d, M, ksub, C, m, c);
      if (cosine) table[m * ksub + c] = qt;
      else {
        const float dot_a = plain_dot(a, d, M, ksub, C, m, c);
        int64_t col0, width;
        va_pq_subspace(d, M, m, &col0, &width);
        float norm = 0.0f; /* ||C_mc||^2, products rounded then added */
        for (int64_t t = 0; t < width; t++) {
          const float x = C[(m * ksub + c) * dmax + t], p = x * x;
          norm = norm + p;
        }
        table[m * ksub + c] = (norm + (dot_a + dot_a)) + (qt + qt);
      }
    }
  double s = 0;
  for (int64_t t = 0; t < d; t++) s += cosine ? (double)q[t] * a[t] : ((double)q[t] - a[t]) * ((double)q[t] - a[t]);
  return (float)(cosine ? 1.0 - s : s);
}

static float plain_distance(const float *table, int64_t M, int64_t ksub, float base, const uint8_t *code) {
  float s = base;
  for (int64_t m = 0; m < M; m++) s = s + table[m * ksub + code[m]];
  return s;
}

typedef struct {
  int64_t d, M, ksub, nlists, nrows;
  int cosine;
  float *C, *T, *A, *Q;
  uint8_t *codes;
  int64_t *offset, *ids;
} fixture_t;

/* nrows coded rows over nlists lists (list j gets rows at random, list 1 left empty), ids a permutation. */
static fixture_t make(int64_t d, int64_t M, int64_t ksub, int64_t nlists, int64_t nrows, int64_t nq, int cosine,
                      uint64_t seed) {
  fixture_t f = {d, M, ksub, nlists, nrows, cosine, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  const int64_t dmax = va_pq_dsub_max(d, M);
  f.C = calloc((size_t)(M * ksub * dmax), sizeof(float));
  for (int64_t m = 0; m < M; m++) {
    int64_t col0, width;
    va_pq_subspace(d, M, m, &col0, &width);
    for (int64_t c = 0; c < ksub; c++)
      for (int64_t t = 0; t < width; t++)
        f.C[(m * ksub + c) * dmax + t] = (cosine ? 0.05f : 0.5f) * normal(seed, 1, (uint64_t)(m * ksub + c), t);
  }
  f.T = va_pq_transpose(f.C, d, M, ksub);
  f.A = random_rows(nlists, d, seed, 2, 2.0f, cosine);
  f.Q = random_rows(nq, d, seed, 3, 2.0f, cosine);
  f.codes = malloc((size_t)(nrows * M));
  for (int64_t i = 0; i < nrows * M; i++) f.codes[i] = (uint8_t)(va_rand_u64(seed, 4, (uint64_t)i, 0) % ksub);
  f.offset = calloc((size_t)(nlists + 1), sizeof(int64_t));
  int64_t *list = malloc((size_t)nrows * sizeof(int64_t));
  for (int64_t i = 0; i < nrows; i++) {
    list[i] = (int64_t)(va_rand_u64(seed, 5, (uint64_t)i, 0) % (uint64_t)nlists);
    if (list[i] == 1 && nlists > 2) list[i] = 2;
    f.offset[list[i] + 1]++;
  }
  for (int64_t j = 0; j < nlists; j++) f.offset[j + 1] += f.offset[j];
  f.ids = malloc((size_t)nrows * sizeof(int64_t));
  for (int64_t i = 0; i < nrows; i++) f.ids[i] = (i * 7919) % nrows; /* a permutation: nrows prime to 7919 */
  free(list);
  return f;
}

static void release(fixture_t *f) {
  free(f->C);
  free(f->T);
  free(f->A);
  free(f->Q);
  free(f->codes);
  free(f->offset);
  free(f->ids);
}

/* One query against every list: the table, the scanned distances, the reference. */
static void test_rows(const fixture_t *f, int64_t q) {
  const int64_t d = f->d, M = f->M, ksub = f->ksub;
  float *table = malloc((size_t)(M * ksub) * sizeof(float)), *want = malloc((size_t)(M * ksub) * sizeof(float));
  float *e = malloc((size_t)d * sizeof(float));
  va_neighbor_t *all = malloc((size_t)(f->nrows + 1) * sizeof *all);
  const float *qv = f->Q + q * d;
  float *qt = malloc((size_t)(M * ksub) * sizeof(float));
  float *terms = f->cosine ? NULL : va_pq_list_terms(f->A, f->nlists, d, M, ksub, f->T, 2);
  va_pq_query_table(qv, d, M, ksub, f->T, qt);
  for (int64_t j = 0; j < f->nlists; j++) {
    const float *a = f->A + j * d;
    if (f->cosine) memcpy(table, qt, (size_t)(M * ksub) * sizeof(float));
    else va_pq_list_table(qt, terms + j * M * ksub, M, ksub, table);
    const float plain_base = plain_table(qv, a, d, M, ksub, f->C, f->cosine, want);
    CHECK(!memcmp(table, want, (size_t)(M * ksub) * sizeof(float)), "d %lld M %lld %s: table of list %lld differs",
          (long long)d, (long long)M, f->cosine ? "cosine" : "l2", (long long)j);
    const int64_t r0 = f->offset[j], m = f->offset[j + 1] - r0;
    const float base = va_pq_list_base(qv, a, d, f->cosine);
    CHECK(!memcmp(&base, &plain_base, sizeof base), "list %lld: base %.9g, the recipe gives %.9g", (long long)j, base,
          plain_base);
    va_topk_t h;
    va_topk_init(&h, all, m);
    va_pq_scan_codes(table, M, ksub, base, f->codes + r0 * M, m, f->ids + r0, &h);
    CHECK(h.size == m, "list %lld: %lld of %lld rows offered", (long long)j, (long long)h.size, (long long)m);
    for (int64_t x = 0; x < h.size; x++) {
      int64_t i = -1; /* the row of that id in the list */
      for (int64_t y = 0; y < m; y++)
        if (f->ids[r0 + y] == all[x].id) i = y;
      CHECK(i >= 0, "id %lld is not in list %lld", (long long)all[x].id, (long long)j);
      if (i < 0) continue;
      const uint8_t *code = f->codes + (r0 + i) * M;
      const float recipe = plain_distance(table, M, ksub, base, code);
      CHECK(!memcmp(&recipe, &all[x].dist, sizeof recipe), "list %lld row %lld: %.9g, the recipe gives %.9g",
            (long long)j, (long long)i, all[x].dist, recipe);
      const double ref = va_pq_distance_ref(qv, a, code, d, M, ksub, f->C, f->cosine);
      va_pq_decode(code, d, M, ksub, f->C, e);
      double mag = 0, nq2 = 0, na2 = 0, ne2 = 0;
      for (int64_t t = 0; t < d; t++) {
        mag += fabs((double)qv[t] * ((double)a[t] + e[t]));
        nq2 += (double)qv[t] * qv[t], na2 += (double)a[t] * a[t], ne2 += (double)e[t] * e[t];
      }
      if (!f->cosine) mag = (sqrt(nq2) + sqrt(na2) + sqrt(ne2)) * (sqrt(nq2) + sqrt(na2) + sqrt(ne2));
      CHECK(fabs(all[x].dist - ref) <= 2e-6 * (1 + mag), "d %lld M %lld %s list %lld row %lld: %.9g, reference %.9g",
            (long long)d, (long long)M, f->cosine ? "cosine" : "l2", (long long)j, (long long)i, all[x].dist, ref);
    }
  }
  free(terms);
  free(qt);
  free(all);
  free(e);
  free(want);
  free(table);
}

/* The list scan of nq queries over nprobe lists each on `threads` threads, sorted into out (nq x k). */
static void scan(const fixture_t *f, int64_t nq, const int64_t *probes, int64_t nprobe, int64_t k, int threads,
                 va_neighbor_t *out) {
  va_topk_t *heaps = malloc((size_t)nq * sizeof *heaps);
  for (int64_t q = 0; q < nq; q++) va_topk_init(&heaps[q], out + q * k, k);
  float *terms = f->cosine ? NULL : va_pq_list_terms(f->A, f->nlists, f->d, f->M, f->ksub, f->T, threads);
  va_pq_scan_lists(f->Q, nq, f->d, f->A, f->M, f->ksub, f->T, terms, f->codes, f->offset, f->ids, probes, nprobe,
                   f->cosine, threads, heaps);
  for (int64_t q = 0; q < nq; q++) va_topk_sorted(&heaps[q], out + q * k);
  free(terms);
  free(heaps);
}

static int before(const void *x, const void *y) {
  const va_neighbor_t a = *(const va_neighbor_t *)x, b = *(const va_neighbor_t *)y;
  return va_search_before(a, b) ? -1 : va_search_before(b, a) ? 1 : 0;
}

static void test_lists(const fixture_t *f, int64_t nq, int64_t nprobe, int64_t k) {
  const int64_t d = f->d, M = f->M, ksub = f->ksub;
  int64_t *probes = malloc((size_t)(nq * nprobe) * sizeof(int64_t));
  for (int64_t q = 0; q < nq; q++)
    for (int64_t p = 0; p < nprobe; p++) probes[q * nprobe + p] = (q * 3 + p * 5) % f->nlists; /* distinct lists */
  va_neighbor_t *one = malloc((size_t)(nq * k) * sizeof *one), *other = malloc((size_t)(nq * k) * sizeof *other);
  scan(f, nq, probes, nprobe, k, 1, one);
  for (int threads = 2; threads <= 3; threads++) {
    scan(f, nq, probes, nprobe, k, threads, other);
    for (int64_t i = 0; i < nq * k; i++)
      CHECK(one[i].id == other[i].id && !memcmp(&one[i].dist, &other[i].dist, sizeof(float)),
            "%d threads: entry %lld differs", threads, (long long)i);
  }
  /* Every probed row by the recipe, sorted: the k first are the scan's. */
  float *table = malloc((size_t)(M * ksub) * sizeof(float));
  va_neighbor_t *all = malloc((size_t)(f->nrows + k) * sizeof *all);
  for (int64_t q = 0; q < nq; q++) {
    int64_t n = 0;
    const float *qv = f->Q + q * d;
    for (int64_t p = 0; p < nprobe; p++) {
      const int64_t j = probes[q * nprobe + p];
      const float base = plain_table(qv, f->A + j * d, d, M, ksub, f->C, f->cosine, table);
      for (int64_t i = f->offset[j]; i < f->offset[j + 1]; i++)
        all[n++] = (va_neighbor_t){plain_distance(table, M, ksub, base, f->codes + i * M), f->ids[i]};
    }
    qsort(all, (size_t)n, sizeof *all, before);
    for (int64_t i = n; i < k; i++) all[i] = (va_neighbor_t){INFINITY, -1};
    for (int64_t i = 0; i < k; i++)
      CHECK(one[q * k + i].id == all[i].id && !memcmp(&one[q * k + i].dist, &all[i].dist, sizeof(float)),
            "d %lld M %lld %s query %lld place %lld: (%.9g, %lld), expected (%.9g, %lld)", (long long)d, (long long)M,
            f->cosine ? "cosine" : "l2", (long long)q, (long long)i, one[q * k + i].dist, (long long)one[q * k + i].id,
            all[i].dist, (long long)all[i].id);
  }
  free(all);
  free(table);
  free(other);
  free(one);
  free(probes);
}

static void run(int64_t d, int64_t M, int64_t ksub, int cosine, uint64_t seed) {
  fixture_t f = make(d, M, ksub, 12, 997, 37, cosine, seed);
  for (int64_t q = 0; q < 5; q++) test_rows(&f, q);
  test_lists(&f, 37, 4, 10);
  test_lists(&f, 37, 1, 200);  /* k above a list's rows: fillers */
  test_lists(&f, 5, 12, 1000); /* every list, k above every row */
  release(&f);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  va_proc_init();
  for (int cosine = 0; cosine <= 1; cosine++) {
    run(30, 8, 256, cosine, 1);   /* d not a multiple of M: 6 subspaces of 4 columns, 2 of 3 */
    run(128, 16, 256, cosine, 2); /* 8 columns each */
    run(128, 32, 256, cosine, 3); /* 4 columns each */
    run(7, 7, 256, cosine, 4);    /* one column each */
    run(12, 3, 16, cosine, 5);    /* fewer centroids than 256 */
  }
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
