/* fuzz_h5probe.c: libFuzzer harness of the HDF5 input validation (va_input_probe in src/h5io.c, the
 * non-exiting core of va_input_open that rank 0 runs on --input FILE:DATASET).
 * The input bytes become FILE.h5 and FILE.h5:/train is validated. Contract checked besides
 * ASan/UBSan: a failure is VA_EXIT_INPUT with a message; a success describes a non-empty 2-D dataset
 * of a supported type; and no HDF5 identifier is left open afterwards (a leaked id keeps the file
 * open inside HDF5, which would then serve stale metadata to the next open of the same path).
 * HDF5 itself is not instrumented: coverage feedback comes from our code, memory errors inside
 * libhdf5 are seen only where they reach an ASan interceptor (memcpy, strlen, ...) or fault. */
#include "fuzz_common.h"

#include <hdf5.h>

#include "io/h5io.h"
#include "util/util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  /* As va_proc_init does: errors are reported by us, not printed by HDF5 (and printing is slow). */
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  /* Self-check: a valid file written at the harness's path must be accepted, or every input would be
   * rejected at H5Fopen and the run would look clean while testing nothing. */
  const char *path = fz_temp_path(".h5");
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[2] = {1, 1};
  hid_t sp = H5Screate_simple(2, dims, NULL);
  hid_t ds = H5Dcreate2(f, "/train", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  float one = 1;
  H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &one);
  H5Dclose(ds);
  H5Sclose(sp);
  H5Fclose(f);
  char spec[4200], err[1024] = "";
  snprintf(spec, sizeof spec, "%s:/train", path);
  va_input_t in;
  int rc = va_input_probe(spec, &in, err, sizeof err);
  FZ_CHECK(rc == 0 && in.n == 1 && in.d == 1, "self-check: a valid 1 x 1 file is rejected: %s", err);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fz_temp_path(".h5");
  fz_write(data, size);
  char spec[4200], err[1024] = "";
  snprintf(spec, sizeof spec, "%s:/train", path);
  va_input_t in;
  int rc = va_input_probe(spec, &in, err, sizeof err);
  if (rc) {
    FZ_CHECK(rc == VA_EXIT_INPUT, "rc %d (%s)", rc, err);
    FZ_CHECK(err[0], "failure without a message");
  } else {
    FZ_CHECK(in.n >= 1 && in.d >= 1, "accepted %lld x %lld", (long long)in.n, (long long)in.d);
    static const int sizes[] = {4, 8, 2, 1, 1};
    FZ_CHECK((int)in.dtype >= 0 && (int)in.dtype <= VA_DT_I8 && in.elem_size == sizes[in.dtype],
             "dtype %d elem_size %d", (int)in.dtype, in.elem_size);
    FZ_CHECK(!strcmp(in.dataset, "/train"), "dataset '%s'", in.dataset);
    FZ_CHECK(in.metric_hint == VA_METRIC_AUTO || in.metric_hint == VA_METRIC_COSINE, "metric_hint %d", in.metric_hint);
  }
  ssize_t open_ids = H5Fget_obj_count((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL);
  if (open_ids != 0) {
    /* Name what is open before failing. */
    hid_t ids[16];
    ssize_t k = H5Fget_obj_ids((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL, 16, ids);
    for (ssize_t i = 0; i < k; i++)
      fprintf(stderr, "open HDF5 id %lld: type %d\n", (long long)ids[i], (int)H5Iget_type(ids[i]));
    FZ_CHECK(open_ids == 0, "%zd HDF5 identifiers left open after va_input_probe (rc %d: %s)", open_ids, rc, err);
  }
  return 0;
}
