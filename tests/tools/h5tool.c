/* h5tool.c: test helper for index files and bad inputs (no Python needed in CI).
 *   h5tool attr FILE NAME           print an attribute: NAME on the root, or OBJECT/NAME (config/lr)
 *   h5tool attr-type FILE NAME      print its type: int64, uint64, float64, utf8 (variable-length
 *                                   UTF-8 string), or string (any other string)
 *   h5tool same A B                 exit 0 iff every index dataset is bitwise identical (the codes of
 *                                   compress --codes pq too, when either file has them)
 *   h5tool raw FILE DATASET         write the dataset's bytes, as stored, to standard output
 *   h5tool close A B RTOL [FRAC]    exit 0 iff at most FRAC (default 0) of the assignments differ and
 *                                   every anchor agrees to RTOL relative (||a - b|| <= RTOL ||b||)
 *   h5tool make-bad OUT KIND        write a malformed input (1d, int32, nan, inf, empty, nodata, damaged: a
 *                                   checksummed chunk overwritten, found only by the read) or a
 *                                   valid 64 x 8 one of another type (f64, u8, i8), or huge (1 TiB declared),
 *                                   or sparse: 2000 x 16 in chunks of 100 rows, rows 0..1899 written (all 1)
 *                                   and the last chunk never, and dense: the same values all written
 *   h5tool delete FILE OBJECT       unlink a dataset or group
 *   h5tool poke FILE DATASET I V    set element I (flat index) of a dataset to V (NaN, inf, numbers)
 *   h5tool set-attr FILE NAME V     set a root integer attribute to V */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The anchor counts per iteration are /history/anchor_count (index format 2) or /history/anchors (1). */
static const char *const DATASETS[] = {
    "/anchors",        "/assignments",     "/anchor_count",        "/anchor_mse",
    "/history/energy", "/history/changed", "/history/temperature", "/history/anchor_count"};

/* compress --codes pq: compared by `same` when either file has them. */
static const char *const CODE_DATASETS[] = {"/pq/codebooks", "/pq/codes"};

static int has_codes(hid_t f) { return H5Lexists(f, "/pq", H5P_DEFAULT) > 0; }

static const char *dataset_name(hid_t f, const char *name) {
  if (!strcmp(name, "/history/anchor_count") && H5Lexists(f, name, H5P_DEFAULT) <= 0) return "/history/anchors";
  return name;
}

static void *read_all(hid_t f, const char *name, size_t *bytes, hsize_t *dims, int *rank) {
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  if (d < 0) {
    fprintf(stderr, "missing dataset %s\n", name);
    exit(2);
  }
  hid_t t = H5Dget_type(d), s = H5Dget_space(d);
  *rank = H5Sget_simple_extent_ndims(s);
  H5Sget_simple_extent_dims(s, dims, NULL);
  hssize_t np = H5Sget_simple_extent_npoints(s);
  *bytes = (size_t)np * H5Tget_size(t);
  void *buf = malloc(*bytes ? *bytes : 1);
  H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  H5Tclose(t);
  H5Sclose(s);
  H5Dclose(d);
  return buf;
}

/* Opens attribute NAME of the root, or OBJECT/NAME of that object. */
static hid_t open_attr(hid_t f, const char *name) {
  const char *slash = strrchr(name, '/');
  if (!slash || slash == name) return H5Aopen(f, slash ? name + 1 : name, H5P_DEFAULT);
  char obj[1024];
  snprintf(obj, sizeof obj, "%.*s", (int)(slash - name), name);
  return H5Aopen_by_name(f, obj, slash + 1, H5P_DEFAULT, H5P_DEFAULT);
}

static int cmd_attr_type(const char *file, const char *name) {
  hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return 2;
  hid_t a = open_attr(f, name);
  if (a < 0) return 2;
  hid_t t = H5Aget_type(a);
  H5T_class_t c = H5Tget_class(t);
  if (c == H5T_STRING) printf("%s\n", H5Tis_variable_str(t) > 0 && H5Tget_cset(t) == H5T_CSET_UTF8 ? "utf8" : "string");
  else if (c == H5T_INTEGER) printf("%s%zu\n", H5Tget_sign(t) == H5T_SGN_NONE ? "uint" : "int", 8 * H5Tget_size(t));
  else if (c == H5T_FLOAT) printf("float%zu\n", 8 * H5Tget_size(t));
  else printf("other\n");
  H5Tclose(t);
  H5Aclose(a);
  H5Fclose(f);
  return 0;
}

static int cmd_attr(const char *file, const char *name) {
  hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return 2;
  hid_t a = open_attr(f, name);
  if (a < 0) return 2;
  hid_t t = H5Aget_type(a);
  if (H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) > 0) {
    char *s = NULL;
    H5Aread(a, t, &s);
    printf("%s\n", s ? s : "");
    H5free_memory(s);
  } else if (H5Tget_class(t) == H5T_STRING) {
    char buf[4096] = {0};
    H5Aread(a, t, buf);
    printf("%s\n", buf);
  } else if (H5Tget_class(t) == H5T_INTEGER && H5Tget_sign(t) == H5T_SGN_NONE) {
    unsigned long long v;
    H5Aread(a, H5T_NATIVE_ULLONG, &v);
    printf("%llu\n", v);
  } else if (H5Tget_class(t) == H5T_INTEGER) {
    long long v;
    H5Aread(a, H5T_NATIVE_LLONG, &v);
    printf("%lld\n", v);
  } else {
    double v;
    H5Aread(a, H5T_NATIVE_DOUBLE, &v);
    printf("%.17g\n", v);
  }
  H5Tclose(t);
  H5Aclose(a);
  H5Fclose(f);
  return 0;
}

static int cmd_same(const char *fa, const char *fb) {
  hid_t a = H5Fopen(fa, H5F_ACC_RDONLY, H5P_DEFAULT), b = H5Fopen(fb, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (a < 0 || b < 0) {
    fprintf(stderr, "cannot open inputs\n");
    return 2;
  }
  int diff = 0;
  for (size_t i = 0; i < sizeof DATASETS / sizeof *DATASETS; i++) {
    size_t na, nb;
    hsize_t da[2], db[2];
    int ra, rb;
    void *x = read_all(a, dataset_name(a, DATASETS[i]), &na, da, &ra),
         *y = read_all(b, dataset_name(b, DATASETS[i]), &nb, db, &rb);
    if (na != nb || memcmp(x, y, na)) {
      printf("differs: %s\n", DATASETS[i]);
      diff = 1;
    }
    free(x);
    free(y);
  }
  if (has_codes(a) != has_codes(b)) {
    printf("differs: /pq (codes in one file only)\n");
    diff = 1;
  } else if (has_codes(a)) {
    for (size_t i = 0; i < sizeof CODE_DATASETS / sizeof *CODE_DATASETS; i++) {
      size_t na, nb;
      hsize_t da[3], db[3];
      int ra, rb;
      void *x = read_all(a, CODE_DATASETS[i], &na, da, &ra), *y = read_all(b, CODE_DATASETS[i], &nb, db, &rb);
      if (na != nb || memcmp(x, y, na)) {
        printf("differs: %s\n", CODE_DATASETS[i]);
        diff = 1;
      }
      free(x);
      free(y);
    }
  }
  H5Fclose(a);
  H5Fclose(b);
  if (!diff) printf("bitwise identical: %s %s\n", fa, fb);
  return diff;
}

static int cmd_raw(const char *path, const char *name) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    fprintf(stderr, "cannot open %s\n", path);
    return 2;
  }
  size_t bytes;
  hsize_t dims[8];
  int rank;
  void *buf = read_all(f, name, &bytes, dims, &rank);
  int rc = fwrite(buf, 1, bytes, stdout) == bytes ? 0 : 2;
  free(buf);
  H5Fclose(f);
  return rc;
}

static int cmd_close(const char *fa, const char *fb, double rtol, double max_diff_frac) {
  hid_t a = H5Fopen(fa, H5F_ACC_RDONLY, H5P_DEFAULT), b = H5Fopen(fb, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (a < 0 || b < 0) {
    fprintf(stderr, "cannot open inputs\n");
    return 2;
  }
  int bad = 0;
  size_t na, nb;
  hsize_t da[2], db[2];
  int ra, rb;
  void *x = read_all(a, "/assignments", &na, da, &ra), *y = read_all(b, "/assignments", &nb, db, &rb);
  if (na != nb) {
    printf("assignments: sizes differ\n");
    bad = 1;
  } else {
    size_t n = na / 4, ndiff = 0;
    for (size_t i = 0; i < n; i++) ndiff += ((uint32_t *)x)[i] != ((uint32_t *)y)[i];
    if (ndiff) printf("assignments: %zu of %zu rows differ (allowed fraction %g)\n", ndiff, n, max_diff_frac);
    if ((double)ndiff > max_diff_frac * (double)n) bad = 1;
  }
  free(x);
  free(y);
  float *A = read_all(a, "/anchors", &na, da, &ra), *B = read_all(b, "/anchors", &nb, db, &rb);
  if (na != nb) {
    printf("anchors: shapes differ (%llu vs %llu)\n", (unsigned long long)da[0], (unsigned long long)db[0]);
    bad = 1;
  } else {
    double worst = 0;
    for (hsize_t j = 0; j < da[0]; j++) {
      double e = 0, nrm = 0;
      for (hsize_t t = 0; t < da[1]; t++) {
        double u = A[j * da[1] + t], v = B[j * da[1] + t];
        e += (u - v) * (u - v);
        nrm += v * v;
      }
      double r = nrm > 0 ? sqrt(e / nrm) : sqrt(e);
      if (r > worst) worst = r;
    }
    printf("anchors: worst relative difference %.3g (tolerance %.3g)\n", worst, rtol);
    if (!(worst <= rtol)) bad = 1;
  }
  free(A);
  free(B);
  H5Fclose(a);
  H5Fclose(b);
  return bad;
}

static void write_ds(hid_t f, const char *name, hid_t type, int rank, const hsize_t *dims, const void *buf) {
  hid_t s = H5Screate_simple(rank, dims, NULL);
  hid_t d = H5Dcreate2(f, name, type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (buf) H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  H5Dclose(d);
  H5Sclose(s);
}

static int cmd_make_bad(const char *out, const char *kind) {
  hid_t f = H5Fcreate(out, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) return 2;
  float rows[64 * 8];
  for (int i = 0; i < 64 * 8; i++) rows[i] = (float)((i * 37) % 11);
  hsize_t dims2[2] = {64, 8}, dims1[1] = {512}, empty[2] = {0, 8};
  if (!strcmp(kind, "1d")) write_ds(f, "/train", H5T_NATIVE_FLOAT, 1, dims1, rows);
  else if (!strcmp(kind, "int32")) {
    int v[512] = {0};
    write_ds(f, "/train", H5T_NATIVE_INT, 2, dims2, v);
  } else if (!strcmp(kind, "nan")) {
    rows[7 * 8 + 3] = NAN;
    write_ds(f, "/train", H5T_NATIVE_FLOAT, 2, dims2, rows);
  } else if (!strcmp(kind, "inf")) {
    rows[50 * 8] = INFINITY;
    write_ds(f, "/train", H5T_NATIVE_FLOAT, 2, dims2, rows);
  } else if (!strcmp(kind, "empty")) write_ds(f, "/train", H5T_NATIVE_FLOAT, 2, empty, NULL);
  else if (!strcmp(kind, "nodata")) write_ds(f, "/train", H5T_NATIVE_FLOAT, 2, dims2, NULL);
  else if (!strcmp(kind, "huge")) {
    /* 2^31 x 128 float32 (1 TiB) declared, chunked, nothing written: tiny on disk. */
    hsize_t big[2] = {(hsize_t)1 << 31, 128}, chunk[2] = {1024, 128};
    hid_t s = H5Screate_simple(2, big, NULL), pl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(pl, 2, chunk);
    hid_t d = H5Dcreate2(f, "/train", H5T_NATIVE_FLOAT, s, H5P_DEFAULT, pl, H5P_DEFAULT);
    H5Dclose(d);
    H5Pclose(pl);
    H5Sclose(s);
  } else if (!strcmp(kind, "damaged")) {
    /* 4096 x 16 in chunks of 256 rows with Fletcher-32 checksums; chunk 9 (rows 2304..2559: not the
     * first rank's on 2 or 3 ranks) gets 8 bytes overwritten after the file is closed, so the file opens
     * and the read of those rows fails. */
    enum { R = 4096, C = 16 };
    static float v[R * C];
    for (int i = 0; i < R * C; i++) v[i] = (float)((i * 37) % 1001) * 0.01f;
    hsize_t dims[2] = {R, C}, chunk[2] = {256, C};
    hid_t s = H5Screate_simple(2, dims, NULL), pl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(pl, 2, chunk);
    H5Pset_fletcher32(pl);
    hid_t d = H5Dcreate2(f, "/train", H5T_NATIVE_FLOAT, s, H5P_DEFAULT, pl, H5P_DEFAULT);
    haddr_t addr = HADDR_UNDEF;
    hsize_t csize = 0, coff[2];
    unsigned mask = 0;
    if (H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0 ||
        H5Dget_chunk_info(d, s, 9, coff, &mask, &addr, &csize) < 0 || coff[0] != 9 * 256 || csize < 1024) {
      fprintf(stderr, "damaged: writing or locating chunk 9 failed\n");
      return 2;
    }
    H5Dclose(d);
    H5Pclose(pl);
    H5Sclose(s);
    H5Fclose(f);
    FILE *raw = fopen(out, "r+b");
    const unsigned char junk[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    if (!raw || fseek(raw, (long)addr + 512, SEEK_SET) || fwrite(junk, 1, sizeof junk, raw) != sizeof junk ||
        fclose(raw)) {
      fprintf(stderr, "damaged: cannot overwrite %s\n", out);
      return 2;
    }
    return 0;
  } else if (!strcmp(kind, "sparse") || !strcmp(kind, "dense")) {
    enum { R = 2000, C = 16, WRITTEN = 1900 };
    static float v[R * C];
    for (int i = 0; i < R * C; i++) v[i] = i < WRITTEN * C ? 1.0f + (float)(i % 7) : 0.0f;
    hsize_t dims[2] = {R, C}, chunk[2] = {100, C}, cnt[2] = {!strcmp(kind, "sparse") ? WRITTEN : R, C}, off[2] = {0, 0};
    hid_t s = H5Screate_simple(2, dims, NULL), pl = H5Pcreate(H5P_DATASET_CREATE), ms = H5Screate_simple(2, cnt, NULL);
    H5Pset_chunk(pl, 2, chunk);
    hid_t d = H5Dcreate2(f, "/train", H5T_NATIVE_FLOAT, s, H5P_DEFAULT, pl, H5P_DEFAULT);
    H5Sselect_hyperslab(s, H5S_SELECT_SET, off, NULL, cnt, NULL);
    if (H5Dwrite(d, H5T_NATIVE_FLOAT, ms, s, H5P_DEFAULT, v) < 0) return 2;
    H5Dclose(d);
    H5Pclose(pl);
    H5Sclose(ms);
    H5Sclose(s);
  } else if (!strcmp(kind, "f64")) {
    double v[512];
    for (int i = 0; i < 512; i++) v[i] = rows[i] + 0.25;
    write_ds(f, "/train", H5T_NATIVE_DOUBLE, 2, dims2, v);
  } else if (!strcmp(kind, "u8")) {
    unsigned char v[512];
    for (int i = 0; i < 512; i++) v[i] = (unsigned char)(rows[i] * 20);
    write_ds(f, "/train", H5T_NATIVE_UCHAR, 2, dims2, v);
  } else if (!strcmp(kind, "i8")) {
    signed char v[512];
    for (int i = 0; i < 512; i++) v[i] = (signed char)(rows[i] * 10 - 50);
    write_ds(f, "/train", H5T_NATIVE_SCHAR, 2, dims2, v);
  } else {
    fprintf(stderr, "unknown kind %s\n", kind);
    return 2;
  }
  H5Fclose(f);
  return 0;
}

static int cmd_delete(const char *path, const char *obj) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  int ok = f >= 0 && H5Ldelete(f, obj, H5P_DEFAULT) >= 0;
  if (f >= 0) H5Fclose(f);
  return ok ? 0 : 2;
}

static int cmd_poke(const char *path, const char *name, long long index, const char *value) {
  double v = strtod(value, NULL);
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), d = f >= 0 ? H5Dopen2(f, name, H5P_DEFAULT) : -1;
  hid_t s = d >= 0 ? H5Dget_space(d) : -1;
  int nd = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1, ok = 0;
  if (nd >= 1 && nd <= 2) {
    hsize_t dims[2] = {1, 1}, coord[2];
    H5Sget_simple_extent_dims(s, dims, NULL);
    coord[0] = nd == 2 ? (hsize_t)index / dims[1] : (hsize_t)index;
    coord[1] = nd == 2 ? (hsize_t)index % dims[1] : 0;
    hsize_t one = 1;
    hid_t ms = H5Screate_simple(1, &one, NULL);
    ok = H5Sselect_elements(s, H5S_SELECT_SET, 1, coord) >= 0 &&
         H5Dwrite(d, H5T_NATIVE_DOUBLE, ms, s, H5P_DEFAULT, &v) >= 0;
    H5Sclose(ms);
  }
  if (s >= 0) H5Sclose(s);
  if (d >= 0) H5Dclose(d);
  if (f >= 0) H5Fclose(f);
  return ok ? 0 : 2;
}

static int cmd_set_attr(const char *path, const char *name, long long value) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), a = f >= 0 ? H5Aopen(f, name, H5P_DEFAULT) : -1;
  int ok = a >= 0 && H5Awrite(a, H5T_NATIVE_LLONG, &value) >= 0;
  if (a >= 0) H5Aclose(a);
  if (f >= 0) H5Fclose(f);
  return ok ? 0 : 2;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "attr")) return cmd_attr(argv[2], argv[3]);
  if (argc == 4 && !strcmp(argv[1], "attr-type")) return cmd_attr_type(argv[2], argv[3]);
  if (argc == 4 && !strcmp(argv[1], "same")) return cmd_same(argv[2], argv[3]);
  if (argc == 4 && !strcmp(argv[1], "raw")) return cmd_raw(argv[2], argv[3]);
  if ((argc == 5 || argc == 6) && !strcmp(argv[1], "close"))
    return cmd_close(argv[2], argv[3], atof(argv[4]), argc == 6 ? atof(argv[5]) : 0.0);
  if (argc == 4 && !strcmp(argv[1], "make-bad")) return cmd_make_bad(argv[2], argv[3]);
  if (argc == 4 && !strcmp(argv[1], "delete")) return cmd_delete(argv[2], argv[3]);
  if (argc == 6 && !strcmp(argv[1], "poke")) return cmd_poke(argv[2], argv[3], atoll(argv[4]), argv[5]);
  if (argc == 5 && !strcmp(argv[1], "set-attr")) return cmd_set_attr(argv[2], argv[3], atoll(argv[4]));
  fprintf(stderr, "usage: h5tool attr|attr-type|same|raw|close|make-bad|delete|poke|set-attr ...\n");
  return 2;
}
