/* index_add.h: writing an index with rows added to an existing one (`vecanneal add`,
 * docs/index-format.md "Added rows"): everything of the old index copied, /assignments extended (and
 * /pq/codes, when the index has codes), /anchor_count and /anchor_mse replaced, the input recorded in
 * /sources. */
#ifndef VECANNEAL_INDEX_ADD_H
#define VECANNEAL_INDEX_ADD_H
#include <stdint.h>

#include "core/config.h" /* VA_PATH_MAX */

typedef struct {
  char file[VA_PATH_MAX], dataset[256], dtype[16]; /* file: absolute (io/index.h va_index_resolve_source) */
  int64_t size;
  uint64_t checksum;
} va_index_source_t;

typedef struct {
  const char *old_path;
  int64_t n_old, n_new, k;
  /* This rank's blocks: old rows [old_row0, +old_n_local) of the old /assignments, new rows
   * [new_row0, +new_n_local) of the input (written at n_old + new_row0). */
  int64_t old_row0, old_n_local, new_row0, new_n_local;
  const uint32_t *old_assign, *new_assign;
  const uint64_t *counts; /* k: old counts + the new rows' */
  const double *mse;      /* k */
  double final_energy, distortion, ratio;
  double bytes;             /* the file's expected size (the free-space check) */
  va_index_source_t source; /* the input added (the same on every rank) */
  /* Codes (docs/codes.md), when the old index has /pq (pq_m > 0; else none is written): the old rows'
   * codes of this rank's old block and the new rows' of its new block (rows x pq_m each), and the /pq
   * errors over every row (the same on every rank); the rest of /pq is copied. */
  int64_t pq_m;
  const uint8_t *old_codes, *new_codes;
  double pq_anchor_error, pq_error;
} va_index_add_t;

/* The /pq attributes add brings up to date with its new rows' sums (docs/codes.md, "Added rows"). */
typedef struct {
  double variance, anchor_error, error;
} va_index_code_errors_t;

/* Collective: writes path (atomically, as va_h5_write_file). Every rank reads the old index's
 * replicated parts itself (parallel HDF5 wants identical metadata from every rank). Returns 0 or an
 * exit code (VA_EXIT_OUTPUT agreed; VA_EXIT_INPUT when the old index stops reading). */
int va_index_write_added(const char *path, const va_index_add_t *a, int io_mode);
/* Collective, for an index with /pq: its variance, anchor_error and error attributes, read by rank 0 and
 * given to every rank. 0, or VA_EXIT_INPUT agreed after one message naming the file. */
int va_index_read_code_errors(const char *path, va_index_code_errors_t *out);
#endif
