/* index_load.h: an index read back (docs/index-format.md) for the commands that place new rows in it
 * (assign, add): its anchors in the frame the final pass used, its per-anchor statistics, and slices of
 * /assignments. */
#ifndef VECANNEAL_INDEX_LOAD_H
#define VECANNEAL_INDEX_LOAD_H
#include <stdint.h>

typedef struct {
  int64_t n, d, k;
  int cosine;       /* metric = cosine */
  int cpu_assign;   /* VA_CPU_ASSIGN_* of /config/cpu_assign (the final pass's kernel) */
  float *anchors;   /* k x d, /anchors: the source's coordinates */
  float *frame;     /* k x d, the anchors as the final pass saw them (l2: /anchors_centered; cosine: /anchors) */
  double *center;   /* d, /center (cosine: zeros) */
  uint64_t *counts; /* k, /anchor_count */
  double *mse;      /* k, /anchor_mse */
  double total_variance, compression_ratio;
} va_index_data_t;

/* Collective: rank 0 reads and checks the index (format, shapes, the frame: an l2 index written before
 * /center existed cannot place new rows exactly and is refused), every rank gets a copy. 0, or
 * VA_EXIT_INPUT agreed on every rank with one message naming the file. */
int va_index_load(const char *path, va_index_data_t *ix);
void va_index_data_free(va_index_data_t *ix);
/* Collective: every rank reads /assignments[row0, row0 + count) of path into out (independent reads);
 * 0, or VA_EXIT_INPUT agreed. */
int va_index_load_assignments(const char *path, int64_t row0, int64_t count, uint32_t *out);
#endif
