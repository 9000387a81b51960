/* index_view.h: reading a compressed index (format 2, docs/index-format.md) for a job that uses it
 * (search): its metric, shape, recorded source and anchors, replicated on every rank, and each rank's
 * own slice of /assignments. Every failure is bad input (exit 3) agreed over the ranks, one message. */
#ifndef VECANNEAL_INDEX_VIEW_H
#define VECANNEAL_INDEX_VIEW_H
#include <stdint.h>

#include "core/config.h" /* VA_PATH_MAX */

typedef struct {
  int cosine;                    /* metric = cosine (else l2) */
  int64_t n, d, k;               /* source rows, dimensions, anchors (k_final) */
  char source_file[VA_PATH_MAX]; /* absolute, as compress recorded it */
  char source_dataset[256];      /* empty for a vector file */
  int64_t source_size;           /* bytes, -1 when compress could not see it */
  uint64_t source_checksum;      /* va_rows_checksum of the rows as read (util/checksum.h) */
  float *anchors;                /* k x d, in the source's coordinates (cosine: unit length); free() */
} va_index_view_t;

/* Collective: rank 0 reads the root attributes and /anchors of path and broadcasts them. A file that
 * is missing, not an index, of format 1 (no recorded checksum) or damaged ends every rank with
 * VA_EXIT_INPUT after one message. */
void va_index_view_load(const char *path, va_index_view_t *ix);
/* Collective: every rank reads /assignments[row0, row0 + count) into out (independent reads) and
 * checks each id against ix->k; a failure anywhere ends every rank with VA_EXIT_INPUT. */
void va_index_read_assignments(const char *path, const va_index_view_t *ix, int64_t row0, int64_t count, uint32_t *out);
void va_index_view_free(va_index_view_t *ix);
#endif
