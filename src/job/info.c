/* info.c: `vecanneal info INDEX.h5`, a readable summary of a compressed index (rank 0 reads). Reads
 * format 2 (io/index.h) and format 1 (no format_version attribute, /history/anchors, configuration
 * values as text); what a format-1 file does not record is shown as "(not recorded)". */
#include <stdlib.h>
#include <string.h>

#include "io/h5io.h"
#include "io/index.h" /* VA_INDEX_FORMAT_VERSION */
#include "job/info.h"
#include "util/util.h"

/* Every call here returns instead of failing: an index that does not read is a message (exit 3). */
static int attr_text(hid_t obj, const char *name, char *out, size_t len) {
  out[0] = 0;
  if (H5Aexists(obj, name) <= 0) return 1;
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT), t = a >= 0 ? H5Aget_type(a) : -1;
  int rc = 1;
  H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
  if (cls == H5T_STRING) {
    rc = va_h5_attr_read_str(obj, name, out, len);
  } else if (cls == H5T_INTEGER && H5Tget_sign(t) == H5T_SGN_NONE) {
    unsigned long long v;
    if (H5Aread(a, H5T_NATIVE_ULLONG, &v) >= 0) {
      snprintf(out, len, "%llu", v);
      rc = 0;
    }
  } else if (cls == H5T_INTEGER) {
    long long v;
    if (H5Aread(a, H5T_NATIVE_LLONG, &v) >= 0) {
      snprintf(out, len, "%lld", v);
      rc = 0;
    }
  } else if (cls == H5T_FLOAT) {
    double v;
    if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0) {
      va_format_double(v, out, len); /* the shortest text that reads back as the stored double */
      rc = 0;
    }
  }
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
  return rc;
}

/* A 1-D dataset of exactly len values into buf; 0 when it reads. */
static int read_1d(hid_t f, const char *name, hid_t mtype, hsize_t len, void *buf) {
  hid_t ds = H5Dopen2(f, name, H5P_DEFAULT), sp = ds >= 0 ? H5Dget_space(ds) : -1;
  int ok = sp >= 0 && H5Sget_simple_extent_npoints(sp) == (hssize_t)len &&
           H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0;
  if (sp >= 0) H5Sclose(sp);
  if (ds >= 0) H5Dclose(ds);
  return !ok;
}

/* The length of a 1-D dataset, or -1. */
static int64_t length_1d(hid_t f, const char *name) {
  hid_t ds = H5Lexists(f, name, H5P_DEFAULT) > 0 ? H5Dopen2(f, name, H5P_DEFAULT) : -1,
        sp = ds >= 0 ? H5Dget_space(ds) : -1;
  hsize_t len = 0;
  int64_t r = sp >= 0 && H5Sget_simple_extent_ndims(sp) == 1 && H5Sget_simple_extent_dims(sp, &len, NULL) == 1
                  ? (int64_t)len
                  : -1;
  if (sp >= 0) H5Sclose(sp);
  if (ds >= 0) H5Dclose(ds);
  return r;
}

/* An unsigned 64-bit attribute (the source's checksum) into v; 0 when it reads. */
static int attr_u64(hid_t obj, const char *name, unsigned long long *v) {
  if (H5Aexists(obj, name) <= 0) return 1;
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  int rc = a >= 0 && H5Aread(a, H5T_NATIVE_ULLONG, v) >= 0 ? 0 : 1;
  if (a >= 0) H5Aclose(a);
  return rc;
}

/* One line on the run's course from /history: iterations, energy and anchors first -> last. The
 * anchor counts are /history/anchor_count (format 2) or /history/anchors (format 1). */
static void print_history(hid_t f) {
  const char *kname =
      H5Lexists(f, "/history", H5P_DEFAULT) > 0 && H5Lexists(f, "/history/anchor_count", H5P_DEFAULT) > 0
          ? "/history/anchor_count"
          : "/history/anchors";
  const int64_t it = H5Lexists(f, "/history", H5P_DEFAULT) > 0 ? length_1d(f, "/history/energy") : -1;
  if (it < 0 || length_1d(f, kname) != it) {
    printf("  history            (not readable)\n");
    return;
  }
  if (it == 0) {
    printf("  history            0 iterations\n");
    return;
  }
  double *e = va_malloc((size_t)it * sizeof *e, "info");
  int64_t *kk = va_malloc((size_t)it * sizeof *kk, "info");
  if (read_1d(f, "/history/energy", H5T_NATIVE_DOUBLE, (hsize_t)it, e) ||
      read_1d(f, kname, H5T_NATIVE_INT64, (hsize_t)it, kk)) {
    printf("  history            (not readable)\n");
  } else {
    char e0[32], e1[32];
    va_format_double(e[0], e0, sizeof e0);
    va_format_double(e[it - 1], e1, sizeof e1);
    printf("  history            %lld iterations, energy %s -> %s, anchors %lld -> %lld\n", (long long)it, e0, e1,
           (long long)kk[0], (long long)kk[it - 1]);
  }
  free(e);
  free(kk);
}

/* /sources (an index that `vecanneal add` wrote): one line per input, in /assignments order. */
static void print_sources(hid_t f) {
  if (H5Lexists(f, "/sources", H5P_DEFAULT) <= 0) return;
  printf("  sources:\n");
  char name[32], how[32], file[VA_PATH_MAX], dset[256], n[32], row0[32];
  for (int m = 0;; m++) {
    snprintf(name, sizeof name, "/sources/%d", m);
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) break;
    hid_t g = H5Gopen2(f, name, H5P_DEFAULT);
    if (g < 0) break;
    attr_text(g, "how", how, sizeof how);
    attr_text(g, "file", file, sizeof file);
    attr_text(g, "dataset", dset, sizeof dset);
    attr_text(g, "row0", row0, sizeof row0);
    attr_text(g, "n", n, sizeof n);
    printf("    #%-3d %-8s rows %s + %s  %s%s%s\n", m, how, row0, n, file, dset[0] ? ":" : "", dset);
    H5Gclose(g);
  }
}

/* /pq (compress --codes pq, docs/codes.md): the codes' layout, size and reconstruction error. */
static void print_codes(hid_t f) {
  if (H5Lexists(f, "/pq", H5P_DEFAULT) <= 0) return;
  hid_t g = H5Gopen2(f, "/pq", H5P_DEFAULT);
  if (g < 0) {
    printf("  codes              (not readable)\n");
    return;
  }
  char m[32], bits[32], ksub[32], rows[32], bytes[32], ratio[32], err[32], aerr[32], tsec[32], esec[32];
  int bad = attr_text(g, "m", m, sizeof m) | attr_text(g, "bits", bits, sizeof bits) |
            attr_text(g, "ksub", ksub, sizeof ksub) | attr_text(g, "train_rows", rows, sizeof rows) |
            attr_text(g, "bytes_per_vector", bytes, sizeof bytes) |
            attr_text(g, "compression_ratio", ratio, sizeof ratio) | attr_text(g, "error", err, sizeof err) |
            attr_text(g, "anchor_error", aerr, sizeof aerr) | attr_text(g, "train_seconds", tsec, sizeof tsec) |
            attr_text(g, "encode_seconds", esec, sizeof esec);
  H5Gclose(g);
  if (bad) {
    printf("  codes              (not readable)\n");
    return;
  }
  const double r = strtod(ratio, NULL);
  printf("  codes              pq: %s subspaces x %s bits (%s centroids each), trained on %s rows\n", m, bits, ksub,
         rows);
  printf("  code size          %s bytes per vector with the anchor id, %.4g%% of the raw float32 rows (%.4g x "
         "smaller)\n",
         bytes, 100.0 * r, r > 0 ? 1.0 / r : 0.0);
  printf("  code error         %s of the variance (anchors alone %s)\n", err, aerr);
  printf("  code seconds       codebooks %s, encoding %s\n", tsec, esec);
}

static herr_t print_config_attr(hid_t loc, const char *name, const H5A_info_t *info, void *ctx) {
  (void)info;
  char v[VA_PATH_MAX];
  attr_text(loc, name, v, sizeof v);
  printf("    %-22s = %s\n", name, v);
  ++*(int *)ctx;
  return 0;
}

typedef struct {
  uint64_t count;
  double mse;
  int64_t j;
} anchor_row_t;
static int by_count_desc(const void *pa, const void *pb) {
  const anchor_row_t *a = pa, *b = pb;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return (a->j > b->j) - (a->j < b->j);
}

static int info_rank0(const char *path, char *err, size_t errlen) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    snprintf(err, errlen, "cannot open index '%s' (missing, damaged or not HDF5): %s", path, va_h5_last_error());
    return VA_EXIT_INPUT;
  }
  char fmt[64];
  if (attr_text(f, "format", fmt, sizeof fmt) || strcmp(fmt, "vecanneal-index")) {
    snprintf(err, errlen, "'%s' is not a vecanneal index (no format = vecanneal-index attribute)", path);
    H5Fclose(f);
    return VA_EXIT_INPUT;
  }
  /* format_version and source_size/source_checksum are printed apart (format 1 lacks them). */
  static const char *const keys[] = {
      "version",        "source_dataset", "source_dtype",      "metric",  "n",      "d",       "k_initial",
      "k_final",        "iterations",     "converged",         "merges",  "splits", "reseeds", "final_energy",
      "total_variance", "distortion",     "compression_ratio", "backend", "ranks",  "seed",    "seconds"};
  const int64_t k = length_1d(f, "/anchor_count");
  uint64_t *cnt = va_malloc((size_t)(k > 0 ? k : 1) * sizeof *cnt, "info");
  double *mse = va_malloc((size_t)(k > 0 ? k : 1) * sizeof *mse, "info");
  if (k < 1 || length_1d(f, "/anchor_mse") != k || read_1d(f, "/anchor_count", H5T_NATIVE_UINT64, (hsize_t)k, cnt) ||
      read_1d(f, "/anchor_mse", H5T_NATIVE_DOUBLE, (hsize_t)k, mse)) {
    snprintf(err, errlen,
             "index '%s' is damaged: its /anchor_count and /anchor_mse datasets are missing or do not read (%s)", path,
             va_h5_last_error());
    free(cnt);
    free(mse);
    H5Fclose(f);
    return VA_EXIT_INPUT;
  }
  printf("index %s\n", path);
  char v[VA_PATH_MAX];
  long long version = 1;
  if (!attr_text(f, "format_version", v, sizeof v)) version = strtoll(v, NULL, 10);
  printf("  %-18s %lld%s\n", "format_version", version,
         version > VA_INDEX_FORMAT_VERSION ? " (newer than this vecanneal: fields it does not know are not shown)"
                                           : "");
  attr_text(f, "source_file", v, sizeof v);
  printf("  %-18s %s\n", "source_file", v);
  printf("  %-18s %s\n", "source_size", attr_text(f, "source_size", v, sizeof v) ? "(not recorded)" : v);
  unsigned long long sum;
  if (attr_u64(f, "source_checksum", &sum)) printf("  %-18s (not recorded)\n", "source_checksum");
  else printf("  %-18s %016llx\n", "source_checksum", sum);
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    attr_text(f, keys[i], v, sizeof v);
    printf("  %-18s %s\n", keys[i], v);
  }
  if (!attr_text(f, "train_rows", v, sizeof v)) printf("  %-18s %s\n", "train_rows", v);
  print_history(f);
  print_codes(f);
  print_sources(f);
  anchor_row_t *rows = va_malloc((size_t)k * sizeof *rows, "info");
  uint64_t empty = 0;
  for (int64_t j = 0; j < k; j++) {
    rows[j] = (anchor_row_t){cnt[j], mse[j], j};
    empty += cnt[j] == 0;
  }
  qsort(rows, (size_t)k, sizeof *rows, by_count_desc);
  size_t show = k < 5 ? (size_t)k : 5;
  printf("  anchors: %llu, empty %llu\n  largest anchors (members, mean squared distance):\n", (unsigned long long)k,
         (unsigned long long)empty);
  for (size_t i = 0; i < show; i++)
    printf("    #%-8lld %10llu  %.6g\n", (long long)rows[i].j, (unsigned long long)rows[i].count, rows[i].mse);
  printf("  smallest anchors:\n");
  for (size_t i = 0; i < show; i++) {
    anchor_row_t *r = &rows[k - 1 - i];
    printf("    #%-8lld %10llu  %.6g\n", (long long)r->j, (unsigned long long)r->count, r->mse);
  }
  printf("  config:\n");
  hid_t cg = H5Gopen2(f, "/config", H5P_DEFAULT);
  if (cg >= 0) {
    /* Key table order where the file tracks creation order (format 2), else by name. */
    int printed = 0;
    if (H5Aiterate2(cg, H5_INDEX_CRT_ORDER, H5_ITER_INC, NULL, print_config_attr, &printed) < 0 && !printed)
      H5Aiterate2(cg, H5_INDEX_NAME, H5_ITER_INC, NULL, print_config_attr, &printed);
    H5Gclose(cg);
  }
  free(rows);
  free(cnt);
  free(mse);
  H5Fclose(f);
  return 0;
}

int va_info_job(const char *path) {
  char err[VA_PATH_MAX + 256] = "";
  int rc = va_proc.rank == 0 ? info_rank0(path, err, sizeof err) : 0;
  fflush(stdout);
  return va_agree(rc, err);
}
