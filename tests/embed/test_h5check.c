/* test_h5check.c: checks a `vecanneal embed` output for the end-to-end test: the dataset is ROWS x 384
 * float32, the file says distance = angular and dimension = 384, every row is a unit vector, and row i
 * has cosine >= 0.9999 with row REF_FIRST + i of the sentence-transformers reference (embed_ref.f32) --
 * which also proves that rows come back in input order whatever rank wrote them.
 * usage: test_h5check OUT.h5 DATASET REF.f32 ROWS [REF_FIRST] */
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

int main(int argc, char **argv) {
  if (argc < 5) { fprintf(stderr, "usage: test_h5check OUT.h5 DATASET REF.f32 ROWS [REF_FIRST]\n"); return 2; }
  long rows = atol(argv[4]), first = argc > 5 ? atol(argv[5]) : 0;
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t f = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return fail("cannot open the output file");
  /* file attributes */
  char dist[64] = "";
  hid_t a = H5Aopen(f, "distance", H5P_DEFAULT);
  if (a < 0) return fail("no 'distance' attribute");
  hid_t at = H5Aget_type(a);
  if (H5Tget_class(at) != H5T_STRING || H5Tget_size(at) >= sizeof dist || H5Aread(a, at, dist) < 0) return fail("bad 'distance' attribute");
  H5Tclose(at);
  H5Aclose(a);
  if (strcmp(dist, "angular")) return fail("'distance' is not 'angular'");
  int64_t dim = 0;
  a = H5Aopen(f, "dimension", H5P_DEFAULT);
  if (a < 0 || H5Aread(a, H5T_NATIVE_INT64, &dim) < 0 || dim != 384) return fail("'dimension' is not 384");
  H5Aclose(a);
  /* dataset */
  hid_t ds = H5Dopen2(f, argv[2], H5P_DEFAULT);
  if (ds < 0) return fail("dataset missing");
  hid_t sp = H5Dget_space(ds), ty = H5Dget_type(ds);
  hsize_t dims[2] = {0, 0};
  if (H5Sget_simple_extent_ndims(sp) != 2 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) return fail("dataset is not 2-D");
  if (H5Tget_class(ty) != H5T_FLOAT || H5Tget_size(ty) != 4) return fail("dataset is not float32");
  if ((long)dims[0] != rows || dims[1] != 384) {
    fprintf(stderr, "FAIL: dataset is %llu x %llu, expected %ld x 384\n", (unsigned long long)dims[0], (unsigned long long)dims[1], rows);
    return 1;
  }
  float *x = malloc((size_t)rows * 384 * sizeof(float));
  if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) < 0) return fail("cannot read the dataset");
  H5Tclose(ty); H5Sclose(sp); H5Dclose(ds); H5Fclose(f);
  size_t rlen;
  char *rb = fx_read(argv[3], &rlen);
  uint32_t rrows, rdim;
  memcpy(&rrows, rb + 8, 4);
  memcpy(&rdim, rb + 12, 4);
  if (memcmp(rb, "VAEMBF32", 8) || rdim != 384 || (long)rrows < first + rows) return fail("reference too small");
  float *ref = fx_floats(rb + 16 + (size_t)first * 384 * 4, (size_t)rows * 384);
  double minc = 2, maxn = 0;
  long worst = -1;
  for (long i = 0; i < rows; i++) {
    double ab = 0, aa = 0, bb = 0;
    for (int j = 0; j < 384; j++) { ab += (double)x[i * 384 + j] * ref[i * 384 + j]; aa += (double)x[i * 384 + j] * x[i * 384 + j]; bb += (double)ref[i * 384 + j] * ref[i * 384 + j]; }
    double c = ab / sqrt(aa * bb + 1e-300);
    if (c < minc) { minc = c; worst = i; }
    if (fabs(sqrt(aa) - 1) > maxn) maxn = fabs(sqrt(aa) - 1);
  }
  printf("h5check: %s:%s %ld x 384, distance=angular, min cosine to reference %.9f (row %ld), max |norm - 1| %.1e\n", argv[1], argv[2], rows, minc,
         worst, maxn);
  free(x);
  free(rb);
  free(ref);
  if (minc < 0.9999) return fail("a row is below cosine 0.9999 (wrong order or wrong values)");
  if (maxn > 1e-4) return fail("rows are not unit vectors");
  return 0;
}
