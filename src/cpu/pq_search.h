/* pq_search.h: the CPU kernels of search on residual product-quantization codes (docs/search.md, "Search on
 * codes"): a query's lookup table over each subspace's centroids, the asymmetric distance of coded rows
 * through it, the scan of a batch's probed lists into top-k heaps (cpu/search.h's order), and the plain
 * reference that decodes a row and measures it in double.
 * Frame: queries and anchors as compress trained the codes: for l2 the query less /center and the
 * anchors of /anchors_centered; for cosine the unit query and the unit anchors (docs/codes.md).
 * Distances, float32, each by one fixed recipe (so a distance depends on the query, the anchor and the
 * row's codes alone, never on the thread, the rank or the order of the scan). With the query's table
 * qt[m ksub + c] = -(q_m . C_mc) (the products over subspace m's columns rounded, then added in increasing t):
 * - l2: the distance to the decoded row a + e, ||q - a - e||^2 = ||q - a||^2 + sum_m (||C_m||^2 + 2 a_m . C_m
 *   - 2 q_m . C_m) for the centroids C_m the row's codes name. The list's terms P_j[m ksub + c] = ||C_mc||^2 +
 *   2 a_m . C_mc are computed once per anchor (va_pq_list_terms), the list's table is P_j + 2 qt, the base
 *   ||q - a||^2 (in double, rounded), and a row's distance is base + table[0, code_0] + table[1, code_1] + ...
 *   in increasing m. It differs from the direct ||r_m - C_mc||^2 tables (r = q - a) by rounding only (the
 *   terms cancel where q is near a + e: the unit test bounds the difference), and costs M ksub additions a
 *   list instead of d ksub subtractions, products and additions.
 * - cosine: the query's table alone for every list, the base 1 - q.a (double, rounded); a row's distance is
 *   base + table[0, code_0] + ... in increasing m: 1 - q.(a + e), the cosine distance to the decoded row (not
 *   clamped at 0, not divided by the decoded row's norm, which is near 1: a ranking, as faiss's
 *   inner-product tables give).
 * Codebooks come transposed (va_pq_transpose, cpu/pq.h), so that a table's inner loop runs over the ksub
 * centroids. */
#ifndef VECANNEAL_CPU_PQ_SEARCH_H
#define VECANNEAL_CPU_PQ_SEARCH_H
#include <stdint.h>

#include "cpu/search.h" /* va_topk_t */

/* table (M x ksub) <- the query's table qt = -(q_m . C_mc) (the recipe above). */
void va_pq_query_table(const float *q, int64_t d, int64_t M, int64_t ksub, const float *T, float *table);
/* l2: the anchors' terms, nlists x M x ksub (malloc'ed): ||C_mc||^2 + 2 a_m . C_mc for every anchor a of A,
 * anchors spread over `threads` threads. */
float *va_pq_list_terms(const float *A, int64_t nlists, int64_t d, int64_t M, int64_t ksub, const float *T,
                        int threads);
/* l2: table <- terms + 2 query_table, the table of one query and one list (M x ksub). */
void va_pq_list_table(const float *query_table, const float *terms, int64_t M, int64_t ksub, float *table);
/* The distance every row of anchor a's list starts from: ||q - a||^2 for l2, 1 - q.a for cosine. */
float va_pq_list_base(const float *q, const float *a, int64_t d, int cosine);

/* Offers rows codes[0..m) (M codes each, row i with id ids[i]) to heap h at distance base + the sum of
 * their codes' table entries in increasing m; four rows at a time (independent sums), the table in L1. */
void va_pq_scan_codes(const float *table, int64_t M, int64_t ksub, float base, const uint8_t *codes, int64_t m,
                      const int64_t *ids, va_topk_t *h);

/* The list scan on codes: heaps[q] is offered every row of the lists probes[q * nprobe ...] name (list j:
 * rows [offset[j], offset[j + 1]) of codes (M bytes each) with ids ids[...]), measured through query q's
 * table for that list. Q: nq x d queries, A: the anchors, both in the frame above; terms: va_pq_list_terms of
 * A for l2, NULL for cosine. Queries are spread over `threads` threads (each query's heap is one thread's);
 * the answer does not depend on their number. */
void va_pq_scan_lists(const float *Q, int64_t nq, int64_t d, const float *A, int64_t M, int64_t ksub, const float *T,
                      const float *terms, const uint8_t *codes, const int64_t *offset, const int64_t *ids,
                      const int64_t *probes, int64_t nprobe, int cosine, int threads, va_topk_t *heaps);

/* Plain reference: the row a + decoded residual (va_pq_decode) measured against q in double, columns in
 * order: l2 sum (q_t - x_t)^2, cosine 1 - q.x (not clamped). codebooks: cpu/pq.h's layout. */
double va_pq_distance_ref(const float *q, const float *a, const uint8_t *code, int64_t d, int64_t M, int64_t ksub,
                          const float *codebooks, int cosine);
#endif
