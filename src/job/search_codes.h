/* search_codes.h: the search job's scan on the index's codes (docs/search.md, "Search on codes"): this
 * rank's codes grouped into the inverted lists, and one batch of queries scanned through lookup tables
 * (the search engine's scan_codes: cpu/pq_search.h or cuda/pq_search.h), with the optional re-ranking of
 * the best candidates by the original rows. */
#ifndef VECANNEAL_JOB_SEARCH_CODES_H
#define VECANNEAL_JOB_SEARCH_CODES_H
#include <stdint.h>

#include "backend/search.h" /* va_search_engine_t, va_search_lists_t */
#include "cpu/search.h"     /* va_neighbor_t */
#include "io/index_read.h"  /* va_index_data_t */

typedef struct {
  const va_index_data_t *ix; /* read with VA_INDEX_FRAME: its frame anchors and /pq codebooks */
  float *T;                  /* the codebooks transposed (va_pq_transpose) */
  float *terms;              /* l2: the anchors' terms (va_pq_list_terms), k x pq_m x pq_ksub; cosine: NULL */
  uint8_t *codes;            /* this rank's rows' codes in list order (nrows x pq_m) */
  const int64_t *offset;     /* list j: rows [offset[j], offset[j + 1]) */
  const int64_t *ids;        /* global row ids in list order */
  const float *rows; /* rerank > 0: this rank's rows [row0, row0 + nloc) in row order (cosine: unit), else NULL */
  int64_t row0, nloc, k, rerank;
  int threads;
} va_search_codes_t;

/* Collective: c->codes <- this rank's slice of /pq/codes, rows [row0, row0 + nloc), each row's M codes moved
 * to its place pos[i] in list order; c->T <- the transposed codebooks, c->terms <- the anchors' terms (l2). 0, or
 * VA_EXIT_INPUT agreed (nothing left allocated). */
int va_search_codes_lists(const char *index, va_search_codes_t *c, const int64_t *pos);
/* Frees what va_search_codes_lists made. */
void va_search_codes_free(va_search_codes_t *c);

/* Collective: one batch of nb queries. Qf: the queries in the codes' frame (l2: less /center; cosine: unit),
 * Q: as the rows are measured (l2: as read; cosine: unit), probes: nb x nprobe lists; engine (prepared with
 * lists, which hold c's codes) scans the codes. local (nb x k, sorted) <- this rank's k best by code
 * distance; with rerank R: the best R of every rank's code candidates (merged
 * over the ranks by (code distance, id), the same set for any rank count) re-scored with this rank's rows by
 * the exact distance of cpu/search.h, its k best of those it holds. The caller merges local over the ranks. */
void va_search_codes_batch(const va_search_codes_t *c, const va_search_engine_t *engine, const va_search_lists_t *lists,
                           const float *Qf, const float *Q, int64_t nb, const int64_t *probes, int64_t nprobe,
                           va_neighbor_t *local);
#endif
