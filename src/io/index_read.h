/* index_read.h: a compressed index read back (docs/index-format.md) for the jobs that use one (search,
 * assign, add): its metric, shape, anchors and per-anchor statistics, and on request its recorded source
 * or its frame, replicated on every rank; and each rank's own slice of /assignments. Every failure is
 * bad input (exit 3) agreed over the ranks, with one message naming the file. */
#ifndef VECANNEAL_INDEX_READ_H
#define VECANNEAL_INDEX_READ_H
#include <stdint.h>

#include "core/config.h" /* VA_PATH_MAX */

/* What a job needs beyond the common part (va_index_read's need, or-ed). */
enum {
  VA_INDEX_SOURCE = 1, /* source_*: a format-1 index (no checksum, its rows cannot be checked) is refused */
  VA_INDEX_FRAME = 2   /* frame (l2: /anchors_centered; cosine: /anchors) and center: an l2 index written
                        * before /center existed is refused */
};

typedef struct {
  int cosine;                    /* metric = cosine (else l2) */
  int64_t n, d, k;               /* rows (root n: add counts every row), dimensions, anchors (k_final) */
  int cpu_assign;                /* VA_CPU_ASSIGN_* of /config/cpu_assign (the final pass's kernel) */
  double total_variance;         /* root attribute; 0 when absent */
  double compression_ratio;      /* root attribute; 0 when absent */
  char source_file[VA_PATH_MAX]; /* VA_INDEX_SOURCE: absolute, as compress recorded it */
  char source_dataset[256];      /* VA_INDEX_SOURCE: empty for a vector file */
  int64_t source_size;           /* VA_INDEX_SOURCE: bytes, -1 when compress could not see it (or not read) */
  uint64_t source_checksum;      /* VA_INDEX_SOURCE: va_rows_checksum of the rows as read (util/checksum.h) */
  float *anchors;                /* k x d, /anchors: the source's coordinates (cosine: unit length) */
  uint64_t *counts;              /* k, /anchor_count */
  double *mse;                   /* k, /anchor_mse */
  float *frame;                  /* VA_INDEX_FRAME, else NULL: k x d, the anchors as the final pass saw them */
  double *center;                /* VA_INDEX_FRAME, else NULL: d, /center (cosine without it: zeros) */
  /* /pq, read whenever the index has codes (compress --codes pq, docs/codes.md); pq_m = 0: none */
  int64_t pq_m, pq_bits, pq_ksub, pq_dsub_max; /* subspaces, bits per code, centroids each, widest subspace */
  float *pq_codebooks;                         /* pq_m x pq_ksub x pq_dsub_max (cpu/pq.h's layout), else NULL */
} va_index_data_t;

/* Collective: rank 0 reads and checks the index (format, attributes, shapes, and what need asks for),
 * every rank gets a copy. 0, or VA_EXIT_INPUT agreed on every rank after one message (ix then holds
 * nothing). */
int va_index_read(const char *path, int need, va_index_data_t *ix);
/* Collective: every rank reads /assignments[row0, row0 + count) of path into out (independent reads)
 * and checks /assignments' length against ix->n and each id against ix->k. 0, or VA_EXIT_INPUT agreed. */
int va_index_read_assignments(const char *path, const va_index_data_t *ix, int64_t row0, int64_t count, uint32_t *out);
/* Collective, for an index with codes (ix->pq_m > 0): every rank reads /pq/codes[row0, row0 + count) (count x
 * pq_m bytes) into out and checks its shape against ix->n and ix->pq_m. 0, or VA_EXIT_INPUT agreed. */
int va_index_read_codes(const char *path, const va_index_data_t *ix, int64_t row0, int64_t count, uint8_t *out);
void va_index_data_free(va_index_data_t *ix);
#endif
