/* index_view.c: reads an index for the jobs that use it (index_view.h). Every HDF5 call's result is
 * checked and turned into a message: a damaged index is bad input, not an internal failure. */
#include "io/index_view.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5io.h"  /* va_h5_attr_read_str */
#include "io/index.h" /* VA_INDEX_FORMAT_VERSION */
#include "util/util.h"

/* A numeric scalar attribute read as mtype into v; 0 when it reads. */
static int attr_number(hid_t obj, const char *name, hid_t mtype, void *v) {
  if (H5Aexists(obj, name) <= 0) return 1;
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  int rc = a >= 0 && H5Aread(a, mtype, v) >= 0 ? 0 : 1;
  if (a >= 0) H5Aclose(a);
  return rc;
}

/* Rank 0: the attributes and anchors; 0 or VA_EXIT_INPUT with err set. */
static int read_view(const char *path, va_index_view_t *ix, char *err, size_t len) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0)
    return snprintf(err, len, "cannot open index '%s' (missing, damaged or not HDF5): %s", path, va_h5_last_error()),
           VA_EXIT_INPUT;
  char text[64] = "";
  int64_t version = 1;
  int rc = VA_EXIT_INPUT;
  if (va_h5_attr_read_str(f, "format", text, sizeof text) || strcmp(text, "vecanneal-index")) {
    snprintf(err, len, "'%s' is not a vecanneal index (no format = vecanneal-index attribute)", path);
    goto done;
  }
  if (attr_number(f, "format_version", H5T_NATIVE_INT64, &version) || version < 2) {
    snprintf(err, len,
             "index '%s' is format 1: it records no checksum of its source, so its rows cannot be checked; "
             "run compress again to write format %d",
             path, VA_INDEX_FORMAT_VERSION);
    goto done;
  }
  if (va_h5_attr_read_str(f, "metric", text, sizeof text) || attr_number(f, "n", H5T_NATIVE_INT64, &ix->n) ||
      attr_number(f, "d", H5T_NATIVE_INT64, &ix->d) || attr_number(f, "k_final", H5T_NATIVE_INT64, &ix->k) ||
      va_h5_attr_read_str(f, "source_file", ix->source_file, sizeof ix->source_file) ||
      va_h5_attr_read_str(f, "source_dataset", ix->source_dataset, sizeof ix->source_dataset) ||
      attr_number(f, "source_size", H5T_NATIVE_INT64, &ix->source_size) ||
      attr_number(f, "source_checksum", H5T_NATIVE_UINT64, &ix->source_checksum) || ix->n < 1 || ix->d < 1 ||
      ix->k < 1 || (strcmp(text, "l2") && strcmp(text, "cosine"))) {
    snprintf(err, len,
             "index '%s' is damaged: a root attribute (metric, n, d, k_final, source_file, source_dataset, "
             "source_size, source_checksum) is missing or unreadable",
             path);
    goto done;
  }
  ix->cosine = !strcmp(text, "cosine");
  hid_t ds = H5Dopen2(f, "/anchors", H5P_DEFAULT), sp = ds >= 0 ? H5Dget_space(ds) : -1;
  hsize_t dims[2] = {0, 0};
  int ok = sp >= 0 && H5Sget_simple_extent_ndims(sp) == 2 && H5Sget_simple_extent_dims(sp, dims, NULL) == 2 &&
           dims[0] == (hsize_t)ix->k && dims[1] == (hsize_t)ix->d;
  if (ok) {
    ix->anchors = va_malloc((size_t)(ix->k * ix->d) * sizeof(float), "index anchors");
    ok = H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ix->anchors) >= 0;
  }
  if (sp >= 0) H5Sclose(sp);
  if (ds >= 0) H5Dclose(ds);
  if (!ok) {
    snprintf(err, len, "index '%s' is damaged: /anchors is missing, not %lld x %lld float, or does not read (%s)", path,
             (long long)ix->k, (long long)ix->d, va_h5_last_error());
    goto done;
  }
  rc = 0;
done:
  H5Fclose(f);
  return rc;
}

void va_index_view_load(const char *path, va_index_view_t *ix) {
  memset(ix, 0, sizeof *ix);
  char err[VA_PATH_MAX + 512] = "";
  int rc = va_proc.rank == 0 ? read_view(path, ix, err, sizeof err) : 0;
  VA_AGREE_OR_EXIT(rc, err);
  /* Everything but the anchors' pointer, then the anchors. */
  float *mine = ix->anchors;
  VA_MPI(MPI_Bcast(ix, (int)sizeof *ix, MPI_BYTE, 0, MPI_COMM_WORLD));
  ix->anchors = va_proc.rank == 0 ? mine : va_malloc((size_t)(ix->k * ix->d) * sizeof(float), "index anchors");
  VA_MPI(MPI_Bcast(ix->anchors, (int)(ix->k * ix->d), MPI_FLOAT, 0, MPI_COMM_WORLD));
}

/* This rank's slice; 0 or VA_EXIT_INPUT with err set. */
static int read_slice(const char *path, const va_index_view_t *ix, int64_t row0, int64_t count, uint32_t *out,
                      char *err, size_t len) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return snprintf(err, len, "cannot open index '%s': %s", path, va_h5_last_error()), VA_EXIT_INPUT;
  hid_t ds = H5Dopen2(f, "/assignments", H5P_DEFAULT), sp = ds >= 0 ? H5Dget_space(ds) : -1;
  hsize_t dim = 0, off = (hsize_t)row0, cnt = (hsize_t)count;
  int ok = sp >= 0 && H5Sget_simple_extent_ndims(sp) == 1 && H5Sget_simple_extent_dims(sp, &dim, NULL) == 1 &&
           dim == (hsize_t)ix->n;
  if (ok && count > 0) {
    hid_t mem = H5Screate_simple(1, &cnt, NULL);
    ok = mem >= 0 && H5Sselect_hyperslab(sp, H5S_SELECT_SET, &off, NULL, &cnt, NULL) >= 0 &&
         H5Dread(ds, H5T_NATIVE_UINT32, mem, sp, H5P_DEFAULT, out) >= 0;
    if (mem >= 0) H5Sclose(mem);
  }
  if (sp >= 0) H5Sclose(sp);
  if (ds >= 0) H5Dclose(ds);
  H5Fclose(f);
  if (!ok)
    return snprintf(err, len,
                    "index '%s' is damaged: /assignments is missing, not of length %lld, or does not read (%s)", path,
                    (long long)ix->n, va_h5_last_error()),
           VA_EXIT_INPUT;
  for (int64_t i = 0; i < count; i++)
    if (out[i] >= (uint64_t)ix->k)
      return snprintf(err, len, "index '%s' is damaged: /assignments[%lld] = %u names no anchor (k = %lld)", path,
                      (long long)(row0 + i), out[i], (long long)ix->k),
             VA_EXIT_INPUT;
  return 0;
}

void va_index_read_assignments(const char *path, const va_index_view_t *ix, int64_t row0, int64_t count,
                               uint32_t *out) {
  char err[VA_PATH_MAX + 512] = "";
  VA_AGREE_OR_EXIT(read_slice(path, ix, row0, count, out, err, sizeof err), err);
}

void va_index_view_free(va_index_view_t *ix) {
  free(ix->anchors);
  ix->anchors = NULL;
}
