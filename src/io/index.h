/* index.h: the compressed index file (schema in docs/index-format.md). */
#ifndef VECANNEAL_INDEX_H
#define VECANNEAL_INDEX_H
#include "core/anneal.h"
#include "io/h5io.h"

/* The layout written (root attribute format_version). Files without that attribute are format 1: no
 * description/units, configuration values as text, the anchor counts per iteration in
 * /history/anchors. Readers (info, python/vecanneal_index.py) accept both. */
#define VA_INDEX_FORMAT_VERSION 2

/* compress --codes pq (docs/codes.md): what /pq holds, and the figures of its attributes. */
typedef struct {
  int64_t m, bits, ksub, dsub_max; /* subspaces, bits per code, centroids per subspace (2^bits), widest subspace */
  int64_t train_rows;              /* rows the codebooks were trained on */
  float *codebooks;                /* m x ksub x dsub_max, in the job's frame (cpu/pq.h) */
  uint8_t *codes;                  /* this rank's rows x m */
  int64_t *iterations;             /* m: iterations of each subspace's loop */
  double bytes_per_vector;         /* m bits / 8 + 4 (the uint32 anchor id) */
  double compression_ratio;        /* bytes_per_vector / (4 d): the share of the raw float32 rows */
  double variance;      /* mean squared distance of the rows (in the job's frame) to their mean, over every row */
  double anchor_error;  /* sum over rows of ||x - anchor||^2, / n / variance: the anchors alone */
  double error;         /* sum over rows of ||x - anchor - decoded residual||^2, / n / variance */
  double train_seconds; /* the codebooks' training, the residuals' gathering included */
  double encode_seconds;
} va_index_codes_t;

typedef struct {
  const va_state_t *st;
  const va_input_t *in;
  const float *anchors; /* k x d in input coordinates */
  const double *counts, *mse;
  double energy, distortion, ratio, seconds;
  int64_t train_rows; /* rows the anchors were trained on (train_sample; n when 0) */
  const char *backend;
  const va_index_codes_t *codes; /* NULL: codes = none, no /pq */
} va_index_t;

/* Bytes of the index payload (anchors, assignments, per-anchor statistics). */
double va_index_payload_bytes(int64_t n, int64_t d, int64_t k);
/* Bytes /pq adds: codes and codebooks. */
double va_index_codes_bytes(int64_t n, int64_t d, int64_t m, int64_t ksub);
/* Collective: writes the index (atomically: OUT.partial, then renamed). Returns 0 or an exit code. The
 * source is recorded as rank 0 sees it: absolute path, size, and in->checksum (the rows as read). */
int va_index_write(const char *path, const va_index_t *ix);
/* Local (rank 0): a source as an index records it: its absolute path (symbolic links resolved; the
 * working directory prepended when the file cannot be resolved any more) into out, and its size in bytes
 * (-1 when it cannot be seen). */
void va_index_resolve_source(const char *file, char *out, size_t len, int64_t *size);

/* Inside a va_h5_write_file setup (io/index_add.c writes an index too): typed scalar attributes (string:
 * variable-length UTF-8), and a dataset (rank 1: d0; rank 2: d0 x d1) with its description and units,
 * left open; write_1d creates and writes a whole 1-D one from rank 0's buffer. */
void va_index_attr_text(hid_t obj, const char *name, const char *value);
void va_index_attr_i64(hid_t obj, const char *name, int64_t v);
void va_index_attr_u64(hid_t obj, const char *name, uint64_t v);
void va_index_attr_f64(hid_t obj, const char *name, double v);
hid_t va_index_dataset(hid_t loc, const char *name, hid_t type, int rank, int64_t d0, int64_t d1,
                       const char *description, const char *units);
void va_index_write_1d(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int64_t len, const void *buf,
                       const char *description, const char *units);
#endif
