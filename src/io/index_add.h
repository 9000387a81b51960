/* index_add.h: writing an index with rows added to an existing one (`vecanneal add`,
 * docs/index-format.md "Added rows"): everything of the old index copied, /assignments extended,
 * /anchor_count and /anchor_mse replaced, the input recorded in /sources. */
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
} va_index_add_t;

/* Collective: writes path (atomically, as va_h5_write_file). Every rank reads the old index's
 * replicated parts itself (parallel HDF5 wants identical metadata from every rank). Returns 0 or an
 * exit code (VA_EXIT_OUTPUT agreed; VA_EXIT_INPUT when the old index stops reading). */
int va_index_write_added(const char *path, const va_index_add_t *a, int io_mode);
#endif
