/* index.c: writes the compressed index (format VA_INDEX_FORMAT_VERSION, docs/index-format.md): rank 0's
 * copy of the replicated data (anchors, statistics, histories, attributes) and every rank's own slice of
 * /assignments, in input row order. The file describes itself: every dataset carries `description` and
 * `units`, strings are variable-length UTF-8 (h5py reads them as str), numbers are typed attributes. */
#define _GNU_SOURCE /* realpath */
#include "io/index.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu/pq.h" /* va_pq_subspace */
#include "util/util.h"

double va_index_payload_bytes(int64_t n, int64_t d, int64_t k) {
  return 4.0 * (double)k * (double)d + 4.0 * (double)n + 16.0 * (double)k;
}

double va_index_codes_bytes(int64_t n, int64_t d, int64_t m, int64_t ksub) {
  return (double)n * (double)m + 4.0 * (double)m * (double)ksub * (double)va_pq_dsub_max(d, m) + 16.0 * (double)m;
}

/* What setup writes besides the job's results: the source as rank 0 resolved it. Every rank writes the
 * same attribute values (parallel HDF5 requires identical metadata from every rank). */
typedef struct {
  const va_index_t *ix;
  char source[VA_PATH_MAX];
  int64_t source_size;
} index_write_t;

/* A scalar attribute of file type ftype from a value of memory type mtype. */
static void attr_scalar(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *value) {
  hid_t space = VA_H5(H5Screate(H5S_SCALAR));
  hid_t a = VA_H5(H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT));
  VA_H5(H5Awrite(a, mtype, value));
  VA_H5(H5Aclose(a));
  VA_H5(H5Sclose(space));
}

/* A variable-length UTF-8 string: h5py returns it as str (a fixed-length one comes back as bytes). The
 * bytes are stored as given; a path that is not valid UTF-8 reads back with surrogate escapes. */
void va_index_attr_text(hid_t obj, const char *name, const char *value) {
  hid_t t = VA_H5(H5Tcopy(H5T_C_S1));
  VA_H5(H5Tset_size(t, H5T_VARIABLE));
  VA_H5(H5Tset_cset(t, H5T_CSET_UTF8));
  attr_scalar(obj, name, t, t, &value);
  VA_H5(H5Tclose(t));
}

void va_index_attr_i64(hid_t obj, const char *name, int64_t v) {
  attr_scalar(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}
void va_index_attr_u64(hid_t obj, const char *name, uint64_t v) {
  attr_scalar(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v);
}
void va_index_attr_f64(hid_t obj, const char *name, double v) {
  attr_scalar(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

hid_t va_index_dataset(hid_t loc, const char *name, hid_t type, int rank, int64_t d0, int64_t d1,
                       const char *description, const char *units) {
  hsize_t dims[2] = {(hsize_t)d0, (hsize_t)d1};
  hid_t space = VA_H5(H5Screate_simple(rank, dims, NULL));
  hid_t ds = va_h5_create_dataset(loc, name, type, space, H5P_DEFAULT);
  VA_H5(H5Sclose(space));
  va_index_attr_text(ds, "description", description);
  va_index_attr_text(ds, "units", units);
  return ds;
}

void va_index_write_1d(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int64_t len, const void *buf,
                       const char *description, const char *units) {
  hid_t ds = va_index_dataset(loc, name, ftype, 1, len, 0, description, units);
  va_h5_write_whole(ds, mtype, buf);
  VA_H5(H5Dclose(ds));
}

/* One attribute per configuration key, typed: int64, float64 or UTF-8 text. The visitor's text of a
 * number reads back exactly (strtoll, strtod of its shortest round-trip form). */
static void config_attr(const char *key, const char *value, void *ctx) {
  hid_t g = *(hid_t *)ctx;
  switch (va_config_key_kind(key)) {
  case VA_CONFIG_INTEGER: va_index_attr_i64(g, key, (int64_t)strtoll(value, NULL, 10)); break;
  case VA_CONFIG_REAL: va_index_attr_f64(g, key, strtod(value, NULL)); break;
  default: va_index_attr_text(g, key, value); break;
  }
}

/* /pq (docs/index-format.md): the codebooks, each subspace's width and iterations, the figures as
 * attributes, and /pq/codes created for index_rows to fill. */
static void codes_setup(hid_t f, const va_state_t *st, const va_index_codes_t *c) {
  const char *u_vec = st->cosine ? "1" : "source";
  hid_t g = VA_H5(H5Gcreate2(f, "/pq", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  va_index_attr_text(g, "description",
                     "residual product-quantization codes: row i is approximately its anchor plus, for every "
                     "subspace m, centroid codes[i, m] of codebook m in that subspace's columns (docs/codes.md)");
  va_index_attr_i64(g, "m", c->m);
  va_index_attr_i64(g, "bits", c->bits);
  va_index_attr_i64(g, "ksub", c->ksub);
  va_index_attr_i64(g, "dsub_max", c->dsub_max);
  va_index_attr_i64(g, "train_rows", c->train_rows);
  va_index_attr_f64(g, "bytes_per_vector", c->bytes_per_vector);
  va_index_attr_f64(g, "compression_ratio", c->compression_ratio);
  va_index_attr_f64(g, "variance", c->variance);
  va_index_attr_f64(g, "anchor_error", c->anchor_error);
  va_index_attr_f64(g, "error", c->error);
  va_index_attr_f64(g, "train_seconds", c->train_seconds);
  va_index_attr_f64(g, "encode_seconds", c->encode_seconds);
  hsize_t dims[3] = {(hsize_t)c->m, (hsize_t)c->ksub, (hsize_t)c->dsub_max};
  hid_t space = VA_H5(H5Screate_simple(3, dims, NULL));
  hid_t ds = va_h5_create_dataset(g, "codebooks", H5T_IEEE_F32LE, space, H5P_DEFAULT);
  VA_H5(H5Sclose(space));
  va_index_attr_text(ds, "description",
                     "centroids of every subspace's codebook (m x ksub x dsub_max), residuals in the index's frame "
                     "(x - center - anchor for l2, unit x - anchor for cosine); values past a subspace's width are 0");
  va_index_attr_text(ds, "units", u_vec);
  va_h5_write_whole(ds, H5T_NATIVE_FLOAT, c->codebooks);
  VA_H5(H5Dclose(ds));
  int64_t *width = va_malloc((size_t)c->m * sizeof(int64_t), "pq widths");
  for (int64_t m = 0; m < c->m; m++) {
    int64_t col0;
    va_pq_subspace(st->d, c->m, m, &col0, &width[m]);
  }
  va_index_write_1d(g, "subspace_dims", H5T_STD_I64LE, H5T_NATIVE_INT64, c->m, width,
                    "columns of each subspace, consecutive from column 0: d / m each, the first d mod m one more",
                    "columns");
  free(width);
  va_index_write_1d(g, "iterations", H5T_STD_I64LE, H5T_NATIVE_INT64, c->m, c->iterations,
                    "iterations of each subspace's codebook loop", "iterations");
  VA_H5(H5Dclose(va_index_dataset(g, "codes", H5T_STD_U8LE, 2, st->n, c->m,
                                  "code (row of that subspace's codebook) of every source row in every subspace, in "
                                  "source row order (n x m)",
                                  "code")));
  VA_H5(H5Gclose(g));
}

static void index_setup(hid_t f, void *ctx) {
  const index_write_t *w = ctx;
  const va_index_t *ix = w->ix;
  const va_state_t *st = ix->st;
  const va_config_t *c = st->cfg;
  /* Units: "source" is the source vectors' own unit, "1" dimensionless; cosine rows are unit vectors
   * and their distances 1 - x.a, so both are dimensionless there. */
  const char *u_vec = st->cosine ? "1" : "source", *u_dist = st->cosine ? "1" : "source^2";
  hid_t ds = va_index_dataset(f, "/anchors", H5T_IEEE_F32LE, 2, st->k, st->d,
                              st->cosine ? "anchor vectors (k x d), unit length, in the source's coordinates"
                                         : "anchor vectors (k x d) in the source's coordinates",
                              u_vec);
  va_h5_write_whole(ds, H5T_NATIVE_FLOAT, ix->anchors);
  VA_H5(H5Dclose(ds));
  /* The frame of the final pass, so that `assign` and `add` put new rows where compress put its own:
   * rows are x - center (l2; each value rounded to float32) and the kernels saw st->A, which /anchors
   * (A + center, rounded) does not give back exactly. cosine: center is zero and /anchors is st->A. */
  va_index_write_1d(f, "/center", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, st->d, st->center,
                    st->cosine
                        ? "zeros: cosine rows are only scaled to unit length"
                        : "mean subtracted from every source row (each value rounded to float32) before the assign",
                    u_vec);
  if (!st->cosine) {
    ds = va_index_dataset(f, "/anchors_centered", H5T_IEEE_F32LE, 2, st->k, st->d,
                          "anchor vectors (k x d) as the final pass compared rows with them: in the frame of /center",
                          u_vec);
    va_h5_write_whole(ds, H5T_NATIVE_FLOAT, st->A);
    VA_H5(H5Dclose(ds));
  }
  VA_H5(
      H5Dclose(va_index_dataset(f, "/assignments", H5T_STD_U32LE, 1, st->n, 0,
                                "anchor id (row of /anchors) of every source row, in source row order", "anchor id")));
  uint64_t *cnt = va_malloc((size_t)st->k * sizeof(uint64_t), "index counts");
  for (int64_t j = 0; j < st->k; j++) cnt[j] = (uint64_t)ix->counts[j];
  va_index_write_1d(f, "/anchor_count", H5T_STD_U64LE, H5T_NATIVE_UINT64, st->k, cnt,
                    "source rows assigned to each anchor", "rows");
  free(cnt);
  va_index_write_1d(f, "/anchor_mse", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, st->k, ix->mse,
                    st->cosine ? "mean of 1 - x.a over each anchor's members (0 when it has none)"
                               : "mean squared distance of each anchor's members to it (0 when it has none)",
                    u_dist);
  hid_t g = VA_H5(H5Gcreate2(f, "/history", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  const int64_t it = st->iter;
  va_index_write_1d(g, "energy", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, it, st->h_energy,
                    "energy (mean distance of the rows to their anchors) of each iteration, before its update", u_dist);
  va_index_write_1d(g, "changed", H5T_STD_I64LE, H5T_NATIVE_INT64, it, st->h_changed,
                    "source rows whose anchor changed in each iteration (the first counts every row)", "rows");
  va_index_write_1d(g, "anchor_count", H5T_STD_I64LE, H5T_NATIVE_INT64, it, st->h_k,
                    "number of anchors at the end of each iteration", "anchors");
  va_index_write_1d(g, "temperature", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, it, st->h_temp,
                    "temperature T used by each iteration", "1");
  VA_H5(H5Gclose(g));
  /* Creation order tracked: readers list the keys in the key table's order, not by name. */
  hid_t gcpl = VA_H5(H5Pcreate(H5P_GROUP_CREATE));
  VA_H5(H5Pset_attr_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  hid_t cg = VA_H5(H5Gcreate2(f, "/config", H5P_DEFAULT, gcpl, H5P_DEFAULT));
  VA_H5(H5Pclose(gcpl));
  va_config_visit(c, config_attr, &cg);
  VA_H5(H5Gclose(cg));
  va_index_attr_text(f, "format", "vecanneal-index");
  va_index_attr_i64(f, "format_version", VA_INDEX_FORMAT_VERSION);
  va_index_attr_text(f, "description", "vecanneal compressed index: anchors and the anchor of every source row");
  va_index_attr_text(f, "version", VECANNEAL_VERSION);
  va_index_attr_text(f, "source_file", w->source);
  va_index_attr_i64(f, "source_size", w->source_size);
  va_index_attr_u64(f, "source_checksum", ix->in->checksum);
  va_index_attr_text(f, "source_dataset", ix->in->dataset);
  va_index_attr_text(f, "source_dtype", va_dtype_name(ix->in->dtype));
  va_index_attr_text(f, "metric", st->cosine ? "cosine" : "l2");
  va_index_attr_i64(f, "n", st->n);
  va_index_attr_i64(f, "d", st->d);
  va_index_attr_i64(f, "train_rows", ix->train_rows);
  va_index_attr_i64(f, "k_initial", st->k_initial);
  va_index_attr_i64(f, "k_final", st->k);
  va_index_attr_i64(f, "seed", (int64_t)c->seed);
  va_index_attr_i64(f, "ranks", va_proc.nranks);
  va_index_attr_text(f, "backend", ix->backend);
  va_index_attr_i64(f, "iterations", st->iter);
  va_index_attr_i64(f, "converged", st->converged);
  va_index_attr_i64(f, "merges", st->merges);
  va_index_attr_i64(f, "splits", st->splits);
  va_index_attr_i64(f, "reseeds", st->reseeds);
  va_index_attr_f64(f, "final_energy", ix->energy);
  va_index_attr_f64(f, "total_variance", st->total_var);
  va_index_attr_f64(f, "distortion", ix->distortion);
  va_index_attr_f64(f, "compression_ratio", ix->ratio);
  va_index_attr_f64(f, "seconds", ix->seconds);
  if (ix->codes) codes_setup(f, st, ix->codes);
}

static void index_rows(hid_t f, void *ctx) {
  const va_index_t *ix = ((const index_write_t *)ctx)->ix;
  const va_state_t *st = ix->st;
  hid_t ds = VA_H5(H5Dopen2(f, "/assignments", H5P_DEFAULT));
  va_h5_write_block(ds, H5T_NATIVE_UINT32, st->row0, st->n_local, 1, sizeof(uint32_t), st->assign);
  VA_H5(H5Dclose(ds));
  if (ix->codes) {
    ds = VA_H5(H5Dopen2(f, "/pq/codes", H5P_DEFAULT));
    va_h5_write_block(ds, H5T_NATIVE_UINT8, st->row0, st->n_local, ix->codes->m, (size_t)ix->codes->m,
                      ix->codes->codes);
    VA_H5(H5Dclose(ds));
  }
}

void va_index_resolve_source(const char *file, char *out, size_t len, int64_t *size) {
  char *real = realpath(file, NULL), cwd[VA_PATH_MAX];
  if (real) snprintf(out, len, "%s", real);
  else if (file[0] != '/' && getcwd(cwd, sizeof cwd)) snprintf(out, len, "%s/%s", cwd, file);
  else snprintf(out, len, "%s", file);
  free(real);
  struct stat sb;
  *size = stat(out, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

int va_index_write(const char *path, const va_index_t *ix) {
  const va_state_t *st = ix->st;
  index_write_t w = {.ix = ix};
  if (va_proc.rank == 0) va_index_resolve_source(ix->in->file, w.source, sizeof w.source, &w.source_size);
  VA_MPI(MPI_Bcast(w.source, (int)sizeof w.source, MPI_CHAR, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Bcast(&w.source_size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
  const double bytes = va_index_payload_bytes(st->n, st->d, st->k) + 4.0 * (double)st->k * (double)st->d +
                       32.0 * (double)st->iter +
                       (ix->codes ? va_index_codes_bytes(st->n, st->d, ix->codes->m, ix->codes->ksub) : 0.0);
  return va_h5_write_file("index", path, bytes, st->cfg->io, index_setup, index_rows, &w);
}
