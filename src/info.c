/* info.c: `vecanneal info INDEX.h5`, a readable summary of a compressed index (rank 0 reads). */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "h5io.h"
#include "util.h"

static int attr_text(hid_t obj, const char *name, char *out, size_t len) {
  out[0] = 0;
  if (H5Aexists(obj, name) <= 0) return 1;
  hid_t a = VA_H5(H5Aopen(obj, name, H5P_DEFAULT));
  hid_t t = VA_H5(H5Aget_type(a));
  H5T_class_t cls = H5Tget_class(t);
  if (cls == H5T_STRING && !H5Tis_variable_str(t)) {
    size_t sz = H5Tget_size(t);
    char *buf = va_calloc(sz + 1, 1, "attribute");
    VA_H5(H5Aread(a, t, buf));
    snprintf(out, len, "%s", buf);
    free(buf);
  } else if (cls == H5T_INTEGER) {
    long long v;
    VA_H5(H5Aread(a, H5T_NATIVE_LLONG, &v));
    snprintf(out, len, "%lld", v);
  } else if (cls == H5T_FLOAT) {
    double v;
    VA_H5(H5Aread(a, H5T_NATIVE_DOUBLE, &v));
    snprintf(out, len, "%.8g", v);
  }
  H5Tclose(t);
  H5Aclose(a);
  return 0;
}

static herr_t print_config_attr(hid_t loc, const char *name, const H5A_info_t *info, void *ctx) {
  (void)info; (void)ctx;
  char v[VA_PATH_MAX];
  attr_text(loc, name, v, sizeof v);
  printf("    %-22s = %s\n", name, v);
  return 0;
}

typedef struct { uint64_t count; double mse; int64_t j; } anchor_row_t;
static int by_count_desc(const void *pa, const void *pb) {
  const anchor_row_t *a = pa, *b = pb;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return (a->j > b->j) - (a->j < b->j);
}

static int info_rank0(const char *path, char *err, size_t errlen) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) { snprintf(err, errlen, "cannot open index '%s': %s", path, va_h5_last_error()); return VA_EXIT_INPUT; }
  char fmt[64];
  if (attr_text(f, "format", fmt, sizeof fmt) || strcmp(fmt, "vecanneal-index")) {
    snprintf(err, errlen, "'%s' is not a vecanneal index (no format = vecanneal-index attribute)", path);
    H5Fclose(f);
    return VA_EXIT_INPUT;
  }
  static const char *const keys[] = {"version", "source_file", "source_dataset", "source_dtype", "metric", "n", "d", "k_initial",
                                     "k_final", "iterations", "converged", "merges", "splits", "reseeds", "final_energy",
                                     "total_variance", "distortion", "compression_ratio", "backend", "ranks", "seed", "seconds"};
  printf("index %s\n", path);
  char v[VA_PATH_MAX];
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    attr_text(f, keys[i], v, sizeof v);
    printf("  %-18s %s\n", keys[i], v);
  }
  hid_t ds = VA_H5(H5Dopen2(f, "/anchor_count", H5P_DEFAULT));
  hid_t sp = VA_H5(H5Dget_space(ds));
  hsize_t k;
  H5Sget_simple_extent_dims(sp, &k, NULL);
  uint64_t *cnt = va_malloc((size_t)k * sizeof *cnt, "info");
  double *mse = va_malloc((size_t)k * sizeof *mse, "info");
  VA_H5(H5Dread(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, cnt));
  H5Sclose(sp); H5Dclose(ds);
  ds = VA_H5(H5Dopen2(f, "/anchor_mse", H5P_DEFAULT));
  VA_H5(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, mse));
  H5Dclose(ds);
  anchor_row_t *rows = va_malloc((size_t)k * sizeof *rows, "info");
  uint64_t empty = 0;
  for (hsize_t j = 0; j < k; j++) { rows[j] = (anchor_row_t){cnt[j], mse[j], (int64_t)j}; empty += cnt[j] == 0; }
  qsort(rows, (size_t)k, sizeof *rows, by_count_desc);
  size_t show = k < 5 ? (size_t)k : 5;
  printf("  anchors: %llu, empty %llu\n  largest anchors (members, mean squared distance):\n", (unsigned long long)k, (unsigned long long)empty);
  for (size_t i = 0; i < show; i++) printf("    #%-8lld %10llu  %.6g\n", (long long)rows[i].j, (unsigned long long)rows[i].count, rows[i].mse);
  printf("  smallest anchors:\n");
  for (size_t i = 0; i < show; i++) {
    anchor_row_t *r = &rows[k - 1 - i];
    printf("    #%-8lld %10llu  %.6g\n", (long long)r->j, (unsigned long long)r->count, r->mse);
  }
  printf("  config:\n");
  hid_t cg = H5Gopen2(f, "/config", H5P_DEFAULT);
  if (cg >= 0) { H5Aiterate2(cg, H5_INDEX_CRT_ORDER, H5_ITER_INC, NULL, print_config_attr, NULL); H5Gclose(cg); }
  free(rows); free(cnt); free(mse);
  H5Fclose(f);
  return 0;
}

int va_cmd_info(int argc, char **argv) {
  char err[VA_PATH_MAX + 256] = "";
  int rc = 0;
  if (argc != 1 || argv[0][0] == '-') {
    if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) { va_log0("usage: vecanneal info INDEX.h5\n"); return 0; }
    snprintf(err, sizeof err, "usage: vecanneal info INDEX.h5");
    rc = VA_EXIT_USAGE;
  } else if (va_proc.rank == 0) {
    rc = info_rank0(argv[0], err, sizeof err);
  }
  fflush(stdout);
  return va_agree(rc, err);
}
