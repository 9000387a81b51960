/* test_search.c: the search kernels (cpu/search.h) against plain references on deterministic random data.
 * - distance: the AVX2 kernel and the portable one give the same bits (every d from 1 to 40, and 128;
 *   l2 and cosine); both within tolerance of the double reference: l2 |fast - ref| <= 1e-5 (|q|^2 + |x|^2),
 *   cosine |fast - ref| <= 1e-6;
 * - top-k heap: the k smallest of (distance, id) exactly as a full sort finds them, ties included;
 * - scan: the same ids as the double reference except at near-ties (a differing entry's distance within
 *   the tolerance above of the reference's k-th), distances within tolerance and bitwise the portable
 *   recipe's (every lane of the eight-row kernel, odd row counts included); bitwise the same for 1 and
 *   2 threads, and when the rows are cut into blocks (ranks) whose top-k lists are merged;
 * - probe: the nprobe nearest anchors in (key, id) order, as a full sort of the portable keys finds them;
 *   each probed anchor within the l2 tolerance of the true nprobe-th nearest (the key only reorders near-ties).
 * Exits non-zero on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/search.h"
#include "util/rng.h"

#include "../check.h" /* failures, CHECK */

static float *random_matrix(int64_t m, int64_t d, uint64_t seed, int cosine) {
  float *M = malloc((size_t)(m * d) * sizeof(float));
  for (int64_t i = 0; i < m * d; i++) M[i] = (float)(0.3 + va_rand_normal(seed, 77, (uint64_t)i, 0));
  if (cosine) va_search_unit_rows(M, m, d, 1);
  return M;
}

static double sq_norm(const float *x, int64_t d) {
  double s = 0;
  for (int64_t t = 0; t < d; t++) s += (double)x[t] * x[t];
  return s;
}

static double tolerance(const float *q, const float *x, int64_t d, int cosine) {
  return cosine ? 1e-6 : 1e-5 * (sq_norm(q, d) + sq_norm(x, d));
}

static void test_distance(int cosine) {
  int64_t worst_bits = 0;
  double worst_rel = 0;
  for (int64_t d = 1; d <= 128; d = d < 40 ? d + 1 : 128) {
    float *Q = random_matrix(5, d, 3 + (uint64_t)d, cosine), *X = random_matrix(9, d, 5 + (uint64_t)d, cosine);
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 9; j++) {
        const float fast = va_search_distance(Q + i * d, X + j * d, d, cosine),
                    port = va_search_distance_portable(Q + i * d, X + j * d, d, cosine);
        const double ref = va_search_distance_ref(Q + i * d, X + j * d, d, cosine);
        if (memcmp(&fast, &port, sizeof fast)) worst_bits++;
        const double tol = tolerance(Q + i * d, X + j * d, d, cosine);
        CHECK(fabs(fast - ref) <= tol, "d %lld: distance %.9g vs reference %.9g", (long long)d, fast, ref);
        if (fabs(fast - ref) / tol > worst_rel) worst_rel = fabs(fast - ref) / tol;
      }
    free(Q);
    free(X);
    if (d == 128) break;
  }
  CHECK(worst_bits == 0, "%lld distances of the AVX2 kernel differ from the portable kernel's bits",
        (long long)worst_bits);
  printf("distance (%s): AVX2 %s, bitwise the portable kernel; worst error %.3f of the tolerance\n",
         cosine ? "cosine" : "l2", va_search_simd_available() ? "used" : "absent", worst_rel);
}

static int by_order(const void *a, const void *b) {
  const va_neighbor_t *x = a, *y = b;
  return va_search_before(*x, *y) ? -1 : va_search_before(*y, *x) ? 1 : 0;
}

static void test_heap(void) {
  const int64_t n = 1000, k = 17;
  va_neighbor_t all[1000], store[17], out[17];
  for (int64_t i = 0; i < n; i++) /* few distinct distances: many ties, broken by id */
    all[i] = (va_neighbor_t){(float)(va_rand_u64(9, 1, (uint64_t)i, 0) % 23),
                             (int64_t)(va_rand_u64(9, 2, (uint64_t)i, 0) % 100000)};
  va_topk_t h;
  va_topk_init(&h, store, k);
  for (int64_t i = 0; i < n; i++) va_topk_push(&h, all[i].dist, all[i].id);
  va_topk_sorted(&h, out);
  qsort(all, (size_t)n, sizeof *all, by_order);
  int same = 1;
  for (int64_t i = 0; i < k; i++) same &= out[i].dist == all[i].dist && out[i].id == all[i].id;
  CHECK(same, "heap's top %lld differs from a full sort", (long long)k);
  va_topk_init(&h, store, k); /* fewer rows than k: fillers after them */
  va_topk_push(&h, 2.0f, 5);
  va_topk_push(&h, 1.0f, 9);
  va_topk_sorted(&h, out);
  CHECK(out[0].id == 9 && out[1].id == 5 && out[2].id == -1 && isinf(out[k - 1].dist), "fillers");
  printf("top-k heap: the k smallest (distance, id) of %lld entries with ties, fillers after short lists\n",
         (long long)n);
}

/* Entry by entry (the struct has padding that copies need not keep). */
static int same_entries(const va_neighbor_t *a, const va_neighbor_t *b, int64_t count) {
  for (int64_t i = 0; i < count; i++)
    if (memcmp(&a[i].dist, &b[i].dist, sizeof a[i].dist) || a[i].id != b[i].id) return 0;
  return 1;
}

static void run_scan(const float *Q, int64_t nq, int64_t d, const float *X, int64_t m, int cosine, int64_t k,
                     int threads, int blocks, va_neighbor_t *out) {
  va_neighbor_t *part = malloc((size_t)(blocks * nq * k) * sizeof *part);
  va_topk_t *h = malloc((size_t)nq * sizeof *h);
  for (int b = 0; b < blocks; b++) { /* rows [m b / blocks, m (b + 1) / blocks): one rank's shard */
    const int64_t r0 = m * b / blocks, r1 = m * (b + 1) / blocks;
    for (int64_t q = 0; q < nq; q++) va_topk_init(&h[q], part + (b * nq + q) * k, k);
    va_search_scan(Q, nq, d, X + r0 * d, r1 - r0, NULL, r0, cosine, threads, h);
    for (int64_t q = 0; q < nq; q++) va_topk_sorted(&h[q], part + (b * nq + q) * k);
  }
  for (int64_t q = 0; q < nq; q++) va_search_merge(part + q * k, blocks, nq * k, k, out + q * k);
  free(h);
  free(part);
}

static void test_scan(int cosine) {
  const int64_t nq = 37, m = 2003, d = 37, k = 10;
  float *Q = random_matrix(nq, d, 11, cosine), *X = random_matrix(m, d, 12, cosine);
  va_neighbor_t *fast = malloc((size_t)(nq * k) * sizeof *fast), *ref = malloc((size_t)(nq * k) * sizeof *ref),
                *other = malloc((size_t)(nq * k) * sizeof *other);
  va_topk_t *h = malloc((size_t)nq * sizeof *h);
  for (int64_t q = 0; q < nq; q++) va_topk_init(&h[q], ref + q * k, k);
  va_search_scan_ref(Q, nq, d, X, m, NULL, 0, cosine, h);
  for (int64_t q = 0; q < nq; q++) va_topk_sorted(&h[q], ref + q * k);
  run_scan(Q, nq, d, X, m, cosine, k, 1, 1, fast);
  int64_t differ = 0, off_recipe = 0;
  for (int64_t q = 0; q < nq; q++)
    for (int64_t i = 0; i < k; i++) {
      const va_neighbor_t a = fast[q * k + i], r = ref[q * k + i];
      const float recipe = va_search_distance_portable(Q + q * d, X + a.id * d, d, cosine);
      off_recipe += memcmp(&recipe, &a.dist, sizeof recipe) != 0;
      const double tol = tolerance(Q + q * d, X + (a.id >= 0 ? a.id : 0) * d, d, cosine);
      CHECK(fabs(a.dist - r.dist) <= tol, "query %lld rank %lld: distance %.9g vs reference %.9g", (long long)q,
            (long long)i, a.dist, r.dist);
      if (a.id != r.id) {
        differ++;
        CHECK(fabs(a.dist - ref[q * k + k - 1].dist) <= tol || fabs(a.dist - r.dist) <= tol,
              "query %lld: id %lld vs reference %lld is no near-tie", (long long)q, (long long)a.id, (long long)r.id);
      }
    }
  CHECK(off_recipe == 0, "%lld scan distances differ from the portable recipe's bits", (long long)off_recipe);
  const int shapes[][2] = {{2, 1}, {1, 2}, {2, 3}, {1, 4}, {2, 7}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    run_scan(Q, nq, d, X, m, cosine, k, shapes[s][0], shapes[s][1], other);
    CHECK(same_entries(fast, other, nq * k), "%d thread(s), %d block(s): not bitwise identical", shapes[s][0],
          shapes[s][1]);
  }
  printf("scan (%s): %lld of %lld entries differ from the double reference (near-ties); bitwise the same for 1-2 "
         "threads and 1-7 merged blocks\n",
         cosine ? "cosine" : "l2", (long long)differ, (long long)(nq * k));
  CHECK(differ * 50 <= nq * k, "too many entries differ: %lld", (long long)differ);
  free(h);
  free(other);
  free(ref);
  free(fast);
  free(Q);
  free(X);
}

static void test_probe(int cosine) {
  const int64_t nq = 13, na = 300, d = 24, np = 16;
  float *Q = random_matrix(nq, d, 21, cosine), *A = random_matrix(na, d, 22, cosine);
  int64_t *probes = malloc((size_t)(nq * np) * sizeof(int64_t)), *probes2 = malloc((size_t)(nq * np) * sizeof(int64_t));
  va_neighbor_t *all = malloc((size_t)(2 * na) * sizeof *all);
  va_search_probe(Q, nq, d, A, na, cosine, np, 1, probes);
  va_search_probe(Q, nq, d, A, na, cosine, np, 2, probes2);
  CHECK(!memcmp(probes, probes2, (size_t)(nq * np) * sizeof(int64_t)), "probe: 1 and 2 threads differ");
  for (int64_t q = 0; q < nq; q++) {
    for (int64_t j = 0; j < na; j++) all[j] = (va_neighbor_t){va_search_probe_key(Q + q * d, A + j * d, d, cosine), j};
    qsort(all, (size_t)na, sizeof *all, by_order);
    va_neighbor_t *exact = all + na; /* the anchors by true distance: a probed one is no farther than the
                                        np-th of them, up to the tolerance */
    for (int64_t j = 0; j < na; j++)
      exact[j] = (va_neighbor_t){(float)va_search_distance_ref(Q + q * d, A + j * d, d, cosine), j};
    qsort(exact, (size_t)na, sizeof *exact, by_order);
    for (int64_t p = 0; p < np; p++) {
      const int64_t a = probes[q * np + p];
      const double dist = va_search_distance_ref(Q + q * d, A + a * d, d, cosine);
      CHECK(dist <= exact[np - 1].dist + tolerance(Q + q * d, A + a * d, d, cosine),
            "probe: query %lld anchor %lld at %.9g is beyond the %lld-th nearest (%.9g)", (long long)q, (long long)a,
            dist, (long long)np, exact[np - 1].dist);
    }
    for (int64_t p = 0; p < np; p++)
      CHECK(probes[q * np + p] == all[p].id, "probe: query %lld place %lld: anchor %lld, sorted %lld", (long long)q,
            (long long)p, (long long)probes[q * np + p], (long long)all[p].id);
  }
  printf("probe (%s): the %lld nearest of %lld anchors in (key, id) order, the same for 1-2 threads\n",
         cosine ? "cosine" : "l2", (long long)np, (long long)na);
  free(all);
  free(probes);
  free(probes2);
  free(Q);
  free(A);
}

int main(void) {
  for (int cosine = 0; cosine <= 1; cosine++) {
    test_distance(cosine);
    test_scan(cosine);
    test_probe(cosine);
  }
  test_heap();
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
  return failures ? 1 : 0;
}
