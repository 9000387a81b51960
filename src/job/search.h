/* search.h: the search job (`vecanneal search`): the k nearest rows of the index's source for every
 * query, through the index's inverted lists (or every row: exact), sharded over the ranks and merged
 * so that the answer is the same for any rank count (docs/search.md). Options come as a struct; argv
 * lives in cli/ alone (cli/search.c). */
#ifndef VECANNEAL_JOB_SEARCH_H
#define VECANNEAL_JOB_SEARCH_H
#include <stddef.h>
#include <stdint.h>

#define VA_SEARCH_MAX_SWEEP 64 /* nprobe values of one sweep */

enum { VA_SEARCH_SCAN_AUTO, VA_SEARCH_SCAN_CODES, VA_SEARCH_SCAN_ROWS }; /* --scan */

typedef struct {
  const char *index, *queries, *data, *out, *metrics, *ground_truth, *sweep_csv, *io;
  const char *backend;   /* the search engine: auto, cpu or cuda (backend/search.h) */
  const char *precision; /* the GPU list scan's products: fp32 (bitwise the CPU), tf32, fp16, bf16 */
  const char *scan;      /* what the lists hold: auto (codes when the index has them), codes or rows */
  int64_t rerank;        /* codes: re-score the best rerank candidates with the rows (0: none; else >= k) */
  int64_t k;
  int64_t nprobe[VA_SEARCH_MAX_SWEEP]; /* the values swept, in order; the output holds the last one's */
  int n_nprobe;
  int exact;     /* scan every row */
  int64_t batch; /* queries per batch */
  int threads;   /* per rank; 0: the cores the rank may use, shared with the node's other ranks */
  int io_mode;   /* derived by va_search_options_resolve */
  int scan_mode; /* VA_SEARCH_SCAN_*, derived by va_search_options_resolve */
} va_search_options_t;

/* Queries per batch by default: enough on each list that its rows, read once, serve several queries (the
 * CPU's cache tiles, the GPU's tiles of 32 queries). */
#define VA_SEARCH_BATCH 16384

/* k 10, nprobe 16, batch VA_SEARCH_BATCH, threads 0, io auto, backend auto, precision fp32, scan auto, no
 * rerank. */
void va_search_options_default(va_search_options_t *o);
/* Local: checks the options and derives the rest; 0, or 1 with err set (a usage error). */
int va_search_options_resolve(va_search_options_t *o, char *err, size_t len);
/* Collective: runs the search; returns the exit code every rank agreed on. */
int va_search_job(const va_search_options_t *o);
#endif
