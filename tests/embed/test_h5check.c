/* test_h5check.c: checks a `vecanneal embed` output for the end-to-end tests: the dataset is ROWS x 384
 * float32, the file says distance = angular and dimension = 384, every row is a unit vector, and row i
 * has cosine >= MIN_COSINE (default 0.9999) with row REF_FIRST + i of the reference -- which also proves
 * that rows come back in input order whatever rank wrote them. The reference is sentence-transformers'
 * embed_ref.f32, or another embed output given as FILE.h5:/DATASET (the CPU encoder's, for the GPU test).
 * usage: test_h5check OUT.h5 DATASET REF ROWS [REF_FIRST] [MIN_COSINE] */
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

static int fail(const char *msg) {
  fprintf(stderr, "FAIL: %s\n", msg);
  return 1;
}

/* rows x 384 float32 from FILE's DATASET (which must hold at least first + rows rows), or NULL. */
static float *read_rows(hid_t f, const char *dataset, long first, long rows, int exact) {
  hid_t ds = H5Dopen2(f, dataset, H5P_DEFAULT);
  if (ds < 0) {
    fprintf(stderr, "FAIL: dataset %s missing\n", dataset);
    return NULL;
  }
  hid_t sp = H5Dget_space(ds), ty = H5Dget_type(ds);
  hsize_t dims[2] = {0, 0};
  if (H5Sget_simple_extent_ndims(sp) != 2 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
    fprintf(stderr, "FAIL: %s is not 2-D\n", dataset);
    return NULL;
  }
  if (H5Tget_class(ty) != H5T_FLOAT || H5Tget_size(ty) != 4) {
    fprintf(stderr, "FAIL: %s is not float32\n", dataset);
    return NULL;
  }
  if ((exact ? (long)dims[0] != rows : (long)dims[0] < first + rows) || dims[1] != 384) {
    fprintf(stderr, "FAIL: %s is %llu x %llu, expected %s%ld x 384\n", dataset, (unsigned long long)dims[0],
            (unsigned long long)dims[1], exact ? "" : "at least ", first + rows);
    return NULL;
  }
  hsize_t start[2] = {(hsize_t)first, 0}, count[2] = {(hsize_t)rows, 384};
  hid_t mem = H5Screate_simple(2, count, NULL);
  float *x = malloc((size_t)rows * 384 * sizeof(float));
  if (H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
      H5Dread(ds, H5T_NATIVE_FLOAT, mem, sp, H5P_DEFAULT, x) < 0) {
    fprintf(stderr, "FAIL: cannot read %s\n", dataset);
    free(x);
    x = NULL;
  }
  H5Sclose(mem);
  H5Tclose(ty);
  H5Sclose(sp);
  H5Dclose(ds);
  return x;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: test_h5check OUT.h5 DATASET REF ROWS [REF_FIRST] [MIN_COSINE]\n");
    return 2;
  }
  long rows = atol(argv[4]), first = argc > 5 ? atol(argv[5]) : 0;
  double min_cos = argc > 6 ? atof(argv[6]) : 0.9999;
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t f = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return fail("cannot open the output file");
  /* file attributes */
  char dist[64] = "";
  hid_t a = H5Aopen(f, "distance", H5P_DEFAULT);
  if (a < 0) return fail("no 'distance' attribute");
  hid_t at = H5Aget_type(a);
  if (H5Tget_class(at) != H5T_STRING || H5Tget_size(at) >= sizeof dist || H5Aread(a, at, dist) < 0)
    return fail("bad 'distance' attribute");
  H5Tclose(at);
  H5Aclose(a);
  if (strcmp(dist, "angular")) return fail("'distance' is not 'angular'");
  int64_t dim = 0;
  a = H5Aopen(f, "dimension", H5P_DEFAULT);
  if (a < 0 || H5Aread(a, H5T_NATIVE_INT64, &dim) < 0 || dim != 384) return fail("'dimension' is not 384");
  H5Aclose(a);
  float *x = read_rows(f, argv[2], 0, rows, 1);
  H5Fclose(f);
  if (!x) return 1;
  float *ref = NULL;
  const char *colon = strstr(argv[3], ".h5:");
  if (colon) { /* another embed output */
    char file[4096];
    snprintf(file, sizeof file, "%.*s", (int)(colon + 3 - argv[3]), argv[3]);
    hid_t rf = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (rf < 0) return fail("cannot open the reference file");
    ref = read_rows(rf, colon + 4, first, rows, 0);
    H5Fclose(rf);
    if (!ref) return 1;
  } else {
    size_t rlen;
    char *rb = fx_read(argv[3], &rlen);
    uint32_t rrows, rdim;
    memcpy(&rrows, rb + 8, 4);
    memcpy(&rdim, rb + 12, 4);
    if (memcmp(rb, "VAEMBF32", 8) || rdim != 384 || (long)rrows < first + rows) return fail("reference too small");
    ref = fx_floats(rb + 16 + (size_t)first * 384 * 4, (size_t)rows * 384);
    free(rb);
  }
  double minc = 2, maxn = 0;
  long worst = -1;
  for (long i = 0; i < rows; i++) {
    double c = fx_cosine(x + i * 384, ref + i * 384, 384), nr = 0;
    for (int j = 0; j < 384; j++) nr += (double)x[i * 384 + j] * x[i * 384 + j];
    if (!(c >= minc)) {
      minc = c;
      worst = i;
    }
    if (!(fabs(sqrt(nr) - 1) <= maxn)) maxn = fabs(sqrt(nr) - 1);
  }
  printf("h5check: %s:%s %ld x 384, distance=angular, min cosine to %s %.9f (row %ld), max |norm - 1| %.1e\n", argv[1],
         argv[2], rows, argv[3], minc, worst, maxn);
  free(x);
  free(ref);
  if (!(minc >= min_cos)) {
    fprintf(stderr, "FAIL: a row is below cosine %g (wrong order or wrong values)\n", min_cos);
    return 1;
  }
  if (!(maxn <= 1e-4)) return fail("rows are not unit vectors");
  return 0;
}
