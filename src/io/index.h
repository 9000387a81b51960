/* index.h: the compressed index file (schema in docs/index-format.md). */
#ifndef VECANNEAL_INDEX_H
#define VECANNEAL_INDEX_H
#include "core/anneal.h"
#include "io/h5io.h"

/* The layout written (root attribute format_version). Files without that attribute are format 1: no
 * description/units, configuration values as text, the anchor counts per iteration in
 * /history/anchors. Readers (info, python/vecanneal_index.py) accept both. */
#define VA_INDEX_FORMAT_VERSION 2

typedef struct {
  const va_state_t *st;
  const va_input_t *in;
  const float *anchors; /* k x d in input coordinates */
  const double *counts, *mse;
  double energy, distortion, ratio, seconds;
  const char *backend;
} va_index_t;

/* Bytes of the index payload (anchors, assignments, per-anchor statistics). */
double va_index_payload_bytes(int64_t n, int64_t d, int64_t k);
/* Collective: writes the index (atomically: OUT.partial, then renamed). Returns 0 or an exit code. The
 * source is recorded as rank 0 sees it: absolute path, size, and in->checksum (the rows as read). */
int va_index_write(const char *path, const va_index_t *ix);
#endif
