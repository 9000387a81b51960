/* index.c: writes the compressed index: rank 0's copy of the replicated data (anchors, statistics,
 * histories, attributes) and every rank's own slice of /assignments, in input row order. */
#include "io/index.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

double va_index_payload_bytes(int64_t n, int64_t d, int64_t k) {
  return 4.0 * (double)k * (double)d + 4.0 * (double)n + 16.0 * (double)k;
}

static hid_t make_dataset(hid_t loc, const char *name, hid_t type, int rank, int64_t d0, int64_t d1) {
  hsize_t dims[2] = {(hsize_t)d0, (hsize_t)d1};
  hid_t space = VA_H5(H5Screate_simple(rank, dims, NULL));
  hid_t ds = VA_H5(H5Dcreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  H5Sclose(space);
  return ds;
}

static void write_whole_1d(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int64_t len, const void *buf) {
  hid_t ds = make_dataset(loc, name, ftype, 1, len, 0);
  va_h5_write_whole(ds, mtype, buf);
  H5Dclose(ds);
}

static void config_attr(const char *key, const char *value, void *ctx) { va_h5_attr_str(*(hid_t *)ctx, key, value); }

static void index_setup(hid_t f, void *ctx) {
  const va_index_t *ix = ctx;
  const va_state_t *st = ix->st;
  const va_config_t *c = st->cfg;
  hid_t ds = make_dataset(f, "/anchors", H5T_IEEE_F32LE, 2, st->k, st->d);
  va_h5_write_whole(ds, H5T_NATIVE_FLOAT, ix->anchors);
  H5Dclose(ds);
  H5Dclose(make_dataset(f, "/assignments", H5T_STD_U32LE, 1, st->n, 0));
  uint64_t *cnt = va_malloc((size_t)st->k * sizeof(uint64_t), "index counts");
  for (int64_t j = 0; j < st->k; j++) cnt[j] = (uint64_t)ix->counts[j];
  write_whole_1d(f, "/anchor_count", H5T_STD_U64LE, H5T_NATIVE_UINT64, st->k, cnt);
  free(cnt);
  write_whole_1d(f, "/anchor_mse", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, st->k, ix->mse);
  hid_t g = VA_H5(H5Gcreate2(f, "/history", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  int64_t it = st->iter;
  write_whole_1d(g, "energy", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, it, st->h_energy);
  write_whole_1d(g, "changed", H5T_STD_I64LE, H5T_NATIVE_INT64, it, st->h_changed);
  write_whole_1d(g, "anchors", H5T_STD_I64LE, H5T_NATIVE_INT64, it, st->h_k);
  write_whole_1d(g, "temperature", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, it, st->h_temp);
  H5Gclose(g);
  hid_t cg = VA_H5(H5Gcreate2(f, "/config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  va_config_visit(c, config_attr, &cg);
  H5Gclose(cg);
  va_h5_attr_str(f, "format", "vecanneal-index");
  va_h5_attr_str(f, "version", VECANNEAL_VERSION);
  va_h5_attr_str(f, "source_file", ix->in->file);
  va_h5_attr_str(f, "source_dataset", ix->in->dataset);
  va_h5_attr_str(f, "source_dtype", va_dtype_name(ix->in->dtype));
  va_h5_attr_str(f, "metric", st->cosine ? "cosine" : "l2");
  va_h5_attr_i64(f, "n", st->n);
  va_h5_attr_i64(f, "d", st->d);
  va_h5_attr_i64(f, "k_initial", st->k_initial);
  va_h5_attr_i64(f, "k_final", st->k);
  va_h5_attr_i64(f, "seed", (int64_t)c->seed);
  va_h5_attr_i64(f, "ranks", va_proc.nranks);
  va_h5_attr_str(f, "backend", ix->backend);
  va_h5_attr_i64(f, "iterations", st->iter);
  va_h5_attr_i64(f, "converged", st->converged);
  va_h5_attr_i64(f, "merges", st->merges);
  va_h5_attr_i64(f, "splits", st->splits);
  va_h5_attr_i64(f, "reseeds", st->reseeds);
  va_h5_attr_f64(f, "final_energy", ix->energy);
  va_h5_attr_f64(f, "total_variance", st->total_var);
  va_h5_attr_f64(f, "distortion", ix->distortion);
  va_h5_attr_f64(f, "compression_ratio", ix->ratio);
  va_h5_attr_f64(f, "seconds", ix->seconds);
}

static void index_rows(hid_t f, void *ctx) {
  const va_index_t *ix = ctx;
  const va_state_t *st = ix->st;
  hid_t ds = VA_H5(H5Dopen2(f, "/assignments", H5P_DEFAULT));
  va_h5_write_block(ds, H5T_NATIVE_UINT32, st->row0, st->n_local, 1, sizeof(uint32_t), st->assign);
  H5Dclose(ds);
}

int va_index_write(const char *path, const va_index_t *ix) {
  const va_state_t *st = ix->st;
  const double bytes = va_index_payload_bytes(st->n, st->d, st->k) + 32.0 * (double)st->iter;
  return va_h5_write_file("index", path, bytes, st->cfg->io, index_setup, index_rows, (void *)ix);
}
