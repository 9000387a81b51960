/* assign.c: `vecanneal assign`, the job: the index and the input checked, each rank's block of new rows
 * placed in the index (job/nearest.h), the anchor ids and distances written to HDF5 in row order. */
#include "job/assign.h"

#include <stdlib.h>
#include <string.h>

#include "core/metrics.h"
#include "io/h5io.h"
#include "io/index.h" /* va_index_attr_*, va_index_dataset */
#include "io/index_read.h"
#include "job/nearest.h"
#include "util/util.h"

typedef struct {
  const va_assign_options_t *o;
  const va_index_data_t *ix;
  const va_input_t *in;
  const va_nearest_t *near;
  const char *dataset;
} assign_write_t;

static void assign_setup(hid_t f, void *ctx) {
  const assign_write_t *w = ctx;
  const char *u_dist = w->ix->cosine ? "1" : "source^2";
  VA_H5(H5Dclose(va_index_dataset(f, w->dataset, H5T_STD_U32LE, 1, w->in->n, 0,
                                  "anchor id (row of the index's /anchors) of every input row, in input row order",
                                  "anchor id")));
  VA_H5(H5Dclose(va_index_dataset(f, "/distance", H5T_IEEE_F32LE, 1, w->in->n, 0,
                                  w->ix->cosine ? "1 - x.a to that anchor (x scaled to unit length)"
                                                : "squared Euclidean distance to that anchor",
                                  u_dist)));
  va_index_attr_text(f, "format", "vecanneal-assign");
  va_index_attr_text(f, "description", "nearest anchor of an index for every row of an input");
  va_index_attr_text(f, "version", VECANNEAL_VERSION);
  va_index_attr_text(f, "index", w->o->index);
  va_index_attr_text(f, "input", w->o->cfg.input);
  va_index_attr_u64(f, "input_checksum", w->in->checksum);
  va_index_attr_text(f, "metric", w->ix->cosine ? "cosine" : "l2");
  va_index_attr_i64(f, "n", w->in->n);
  va_index_attr_i64(f, "d", w->in->d);
  va_index_attr_i64(f, "k", w->ix->k);
}

static void assign_rows(hid_t f, void *ctx) {
  const assign_write_t *w = ctx;
  hid_t ds = VA_H5(H5Dopen2(f, w->dataset, H5P_DEFAULT));
  va_h5_write_block(ds, H5T_NATIVE_UINT32, w->near->row0, w->near->n_local, 1, sizeof(uint32_t), w->near->assign);
  VA_H5(H5Dclose(ds));
  ds = VA_H5(H5Dopen2(f, "/distance", H5P_DEFAULT));
  va_h5_write_block(ds, H5T_NATIVE_FLOAT, w->near->row0, w->near->n_local, 1, sizeof(float), w->near->dist);
  VA_H5(H5Dclose(ds));
}

int va_assign_job(const va_assign_options_t *o) {
  const double t_start = va_now();
  const va_config_t *cfg = &o->cfg;
  char out_file[VA_PATH_MAX], dataset[256];
  va_split_spec(o->out, out_file, sizeof out_file, dataset, sizeof dataset);
  if (!strrchr(o->out, ':')) snprintf(dataset, sizeof dataset, "/assign"); /* no DATASET part given */
  va_index_data_t ix;
  va_input_t in;
  va_nearest_t near;
  int rc = va_nearest_job(o->index, "assignment file", out_file, cfg, &ix, &in, &near, NULL, NULL);
  if (rc) return rc;
  assign_write_t w = {.o = o, .ix = &ix, .in = &in, .near = &near, .dataset = dataset};
  va_tick_t t = va_tick();
  rc = va_h5_write_file("assignment file", out_file, 8.0 * (double)in.n + 65536.0, cfg->io, assign_setup, assign_rows,
                        &w);
  va_tock(VA_PH_WRITE, t);
  if (!rc) {
    va_log0("assigned %lld rows of %s to the %lld anchors of %s: %s:%s and %s:/distance, %.2f s\n", (long long)in.n,
            cfg->input, (long long)ix.k, o->index, out_file, dataset, out_file, va_now() - t_start);
    va_run_summary_t sum = {.n = in.n,
                            .d = in.d,
                            .k_initial = ix.k,
                            .k_final = ix.k,
                            .total_seconds = va_now() - t_start,
                            .backend = near.backend,
                            .device = near.backend};
    rc = va_metrics_write(cfg->metrics, &sum, cfg);
  }
  va_nearest_free(&near);
  va_index_data_free(&ix);
  return rc;
}
