/* search.h (backend): the seam of nearest-neighbour search. The search job (job/search.c) hands a
 * search engine this rank's inverted lists and a batch of queries with the lists each one probes; the
 * engine returns each query's top k over its members of those lists (or over every row: exact). The CPU
 * engine runs cpu/search.h; a GPU engine takes the same lists and answers with the same entries (the
 * order of cpu/search.h: distance, then global row id), so the job does not change with the hardware. */
#ifndef VECANNEAL_BACKEND_SEARCH_H
#define VECANNEAL_BACKEND_SEARCH_H
#include <stdint.h>

#include "cpu/search.h" /* va_neighbor_t */

/* One rank's inverted lists: the rows of its shard grouped by anchor. List j holds rows
 * [offset[j], offset[j + 1]) of rows (in list order, d floats each; cosine: unit length) with global
 * row ids ids[...], ascending within a list. */
typedef struct {
  int64_t nlists, nrows, d;
  const int64_t *offset;
  const float *rows;
  const int64_t *ids;
} va_search_lists_t;

typedef struct va_search_engine {
  const char *name;      /* "cpu" */
  const char *precision; /* of the distances: "fp32" */
  int threads;
  /* out[q * k ...] <- the k best of query q's members of lists probes[q * nprobe ...], sorted (fillers
   * when the lists hold fewer than k rows). Q: nq x d queries in the lists' frame. */
  void (*scan_lists)(const struct va_search_engine *e, const va_search_lists_t *lists, const float *Q, int64_t nq,
                     const int64_t *probes, int64_t nprobe, int cosine, int64_t k, va_neighbor_t *out);
  /* The same over every row of the lists (exact search). */
  void (*scan_all)(const struct va_search_engine *e, const va_search_lists_t *lists, const float *Q, int64_t nq,
                   int cosine, int64_t k, va_neighbor_t *out);
} va_search_engine_t;

/* The CPU engine on `threads` threads. */
va_search_engine_t va_search_engine_cpu(int threads);
#endif
