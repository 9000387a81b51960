/* search.h: the CPU kernels of nearest-neighbour search: the distance of a query to a row, a bounded
 * top-k of (distance, row id) per query, the scan of a block of rows for a batch of queries, the
 * nearest anchors of a query (the lists it probes) and the merge of sorted top-k lists.
 * Order: entries compare by distance, then by row id (va_search_before); every top-k here is the k
 * smallest entries under that total order, so it depends only on the set of rows scanned, never on
 * the order, the tiling, the thread count or the rank that held a row.
 * Distance: l2 = sum_t (q_t - x_t)^2, cosine = max(0, 1 - q.x) (unit rows and queries), each computed
 * in float32 by one fixed recipe (eight partial sums over t mod 8 built with fused multiply-adds in
 * increasing t, combined as ((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7))): the AVX2 kernel and the portable
 * one give the same bits, so a distance is a function of the two vectors alone. */
#ifndef VECANNEAL_CPU_SEARCH_H
#define VECANNEAL_CPU_SEARCH_H
#include <stdint.h>

/* A search result entry; id -1 with distance +inf fills a top-k that found fewer than k rows. */
typedef struct {
  float dist;
  int64_t id;
} va_neighbor_t;

/* 1 when a comes before b: smaller distance, then smaller id (-1, the filler, comes last). */
static inline int va_search_before(va_neighbor_t a, va_neighbor_t b) {
  if (a.dist != b.dist) return a.dist < b.dist;
  return (uint64_t)a.id < (uint64_t)b.id;
}

/* The k best entries seen so far, a max-heap on the order above (worst at the root). */
typedef struct {
  va_neighbor_t *e; /* k entries of storage */
  int64_t k, size;
} va_topk_t;

void va_topk_init(va_topk_t *h, va_neighbor_t *storage, int64_t k);
/* Offers an entry: kept when the heap is not full or it comes before the worst kept one. */
void va_topk_push(va_topk_t *h, float dist, int64_t id);
/* The distance an entry must beat (on equal distance, an id below the worst's) to enter: +inf until full. */
static inline float va_topk_bound(const va_topk_t *h) { return h->size < h->k ? __builtin_inff() : h->e[0].dist; }
/* Empties the heap into out[0..k) in ascending order, fillers (-1, +inf) after the found entries. */
void va_topk_sorted(va_topk_t *h, va_neighbor_t *out);

/* One distance (the recipe above); cosine expects unit vectors. */
float va_search_distance(const float *q, const float *x, int64_t d, int cosine);
/* The same recipe without SIMD: the AVX2 kernel must match it bit for bit (tested). */
float va_search_distance_portable(const float *q, const float *x, int64_t d, int cosine);
/* Plain reference: the distance accumulated in double in index order (tests compare within tolerance). */
double va_search_distance_ref(const float *q, const float *x, int64_t d, int cosine);
/* 1 when this processor runs the AVX2 distance kernel. */
int va_search_simd_available(void);

/* Scans rows X (m x d, row i has id ids[i], or id0 + i when ids is NULL) for queries Q (nq x d):
 * offers every (distance, id) to heaps[query]. Rows are taken in tiles of a few hundred that stay in
 * cache while every query of the batch passes over them; queries are spread over up to `threads`
 * threads (each query's heap is touched by one thread). Never holds an m x nq matrix. */
void va_search_scan(const float *Q, int64_t nq, int64_t d, const float *X, int64_t m, const int64_t *ids, int64_t id0,
                    int cosine, int threads, va_topk_t *heaps);
/* The IVF list scan: heaps[q] is offered every row of the lists probes[q * nprobe ...] name (list j:
 * rows [offset[j], offset[j + 1]) of rows, ids ids[...]). The queries are cut into `threads` blocks, one
 * per thread; within a block the queries are grouped by list, so a tile of a list's rows is read from
 * memory once for every query of the block that probes it. */
void va_search_scan_lists(const float *Q, int64_t nq, int64_t d, int64_t nlists, const float *rows,
                          const int64_t *offset, const int64_t *ids, const int64_t *probes, int64_t nprobe, int cosine,
                          int threads, va_topk_t *heaps);
/* The reference: every distance with va_search_distance_ref, rounded to float, offered in row order. */
void va_search_scan_ref(const float *Q, int64_t nq, int64_t d, const float *X, int64_t m, const int64_t *ids,
                        int64_t id0, int cosine, va_topk_t *heaps);

/* The nprobe nearest anchors of each query (A: nanchors x d), ascending by (key, anchor id), into
 * probes[query * nprobe ...]; the key (va_search_probe_key) is the cosine distance, or for l2
 * |a|^2 - 2 q.a, which orders anchors as |q - a|^2 does up to rounding (one FMA a coordinate instead of
 * a subtraction and an FMA; near-ties may order differently from the l2 distance). Threads over
 * queries; the same answer for any thread count. */
void va_search_probe(const float *Q, int64_t nq, int64_t d, const float *A, int64_t nanchors, int cosine,
                     int64_t nprobe, int threads, int64_t *probes);
/* The probe's key of query q and anchor a, without SIMD (the probe's bits: tested). */
float va_search_probe_key(const float *q, const float *a, int64_t d, int cosine);
/* The anchor's term |a|^2 of the l2 key, by the recipe (the GPU probe takes these). */
float va_search_probe_norm(const float *a, int64_t d);

/* Merges nlists sorted lists of k entries each (list l at in[l * stride ...]) into the k first entries
 * of their union, sorted, into out[0..k). */
void va_search_merge(const va_neighbor_t *in, int nlists, int64_t stride, int64_t k, va_neighbor_t *out);

/* Unit rows: x / sqrt(sum x^2) (norm in double, each value rounded to float), as compress normalises
 * cosine rows; a zero row stays zero. Returns the number of zero rows. */
int64_t va_search_unit_rows(float *X, int64_t m, int64_t d, int threads);
#endif
