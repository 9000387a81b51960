/* index_load.c: an index read back (io/index_load.h). Rank 0 reads the replicated parts and checks
 * them, every rank receives them by broadcast; slices of /assignments are read by every rank on its own.
 * Every HDF5 call here returns instead of failing: an index that does not read is bad input (exit 3),
 * agreed on every rank with one message. */
#include "io/index_load.h"

#include <stdlib.h>
#include <string.h>

#include "cpu/assign.h" /* VA_CPU_ASSIGN_* */
#include "io/h5io.h"    /* va_h5_attr_read_str */
#include "util/util.h"

/* The shape of a dataset: its rank (or -1 when it is missing or does not open) and dims[0..1]. */
static int shape(hid_t f, const char *name, hsize_t dims[2]) {
  dims[0] = dims[1] = 0;
  if (H5Lexists(f, name, H5P_DEFAULT) <= 0) return -1;
  hid_t ds = H5Dopen2(f, name, H5P_DEFAULT), sp = ds >= 0 ? H5Dget_space(ds) : -1;
  int r = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
  if (r < 1 || r > 2 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) r = -1;
  if (sp >= 0) H5Sclose(sp);
  if (ds >= 0) H5Dclose(ds);
  return r;
}

/* A whole dataset of exactly the shape (r, d0, d1) into buf; 0 when it reads. */
static int read_whole(hid_t f, const char *name, hid_t mtype, int r, int64_t d0, int64_t d1, void *buf) {
  hsize_t dims[2];
  if (shape(f, name, dims) != r || (int64_t)dims[0] != d0 || (r == 2 && (int64_t)dims[1] != d1)) return 1;
  hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
  int bad = ds < 0 || H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0;
  if (ds >= 0) H5Dclose(ds);
  return bad;
}

static int attr_num(hid_t obj, const char *name, hid_t mtype, void *v) {
  if (H5Aexists(obj, name) <= 0) return 1;
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  int bad = a < 0 || H5Aread(a, mtype, v) < 0;
  if (a >= 0) H5Aclose(a);
  return bad;
}

static void alloc_arrays(va_index_data_t *ix) {
  const size_t kd = (size_t)(ix->k * ix->d);
  ix->anchors = va_malloc(kd * sizeof(float), "index anchors");
  ix->frame = va_malloc(kd * sizeof(float), "index anchors");
  ix->center = va_calloc((size_t)ix->d, sizeof(double), "index centre");
  ix->counts = va_malloc((size_t)ix->k * sizeof(uint64_t), "index counts");
  ix->mse = va_malloc((size_t)ix->k * sizeof(double), "index mse");
}

static int load_rank0(const char *path, va_index_data_t *ix, char *err, size_t len) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    snprintf(err, len, "cannot open index '%s' (missing, damaged or not HDF5): %s", path, va_h5_last_error());
    return VA_EXIT_INPUT;
  }
  char text[64] = "";
  int rc = VA_EXIT_INPUT;
  hsize_t dims[2];
  if (va_h5_attr_read_str(f, "format", text, sizeof text) || strcmp(text, "vecanneal-index")) {
    snprintf(err, len, "'%s' is not a vecanneal index (no format = vecanneal-index attribute)", path);
    goto done;
  }
  if (va_h5_attr_read_str(f, "metric", text, sizeof text) || (strcmp(text, "l2") && strcmp(text, "cosine")) ||
      shape(f, "/anchors", dims) != 2 || dims[0] < 1 || dims[1] < 1) {
    snprintf(err, len, "index '%s' is damaged: no metric attribute or no k x d /anchors", path);
    goto done;
  }
  ix->cosine = !strcmp(text, "cosine");
  ix->k = (int64_t)dims[0];
  ix->d = (int64_t)dims[1];
  if (shape(f, "/assignments", dims) != 1) {
    snprintf(err, len, "index '%s' is damaged: no /assignments", path);
    goto done;
  }
  ix->n = (int64_t)dims[0];
  alloc_arrays(ix);
  if (read_whole(f, "/anchors", H5T_NATIVE_FLOAT, 2, ix->k, ix->d, ix->anchors) ||
      read_whole(f, "/anchor_count", H5T_NATIVE_UINT64, 1, ix->k, 0, ix->counts) ||
      read_whole(f, "/anchor_mse", H5T_NATIVE_DOUBLE, 1, ix->k, 0, ix->mse)) {
    snprintf(err, len, "index '%s' is damaged: /anchors, /anchor_count or /anchor_mse do not read (%s)", path,
             va_h5_last_error());
    goto done;
  }
  /* The frame: /center and (l2) /anchors_centered, written since they were added to format 2. A cosine
   * index without them has the frame anyway (zero centre, /anchors as the kernels saw them). */
  const int has_center = H5Lexists(f, "/center", H5P_DEFAULT) > 0;
  if (has_center && read_whole(f, "/center", H5T_NATIVE_DOUBLE, 1, ix->d, 0, ix->center)) {
    snprintf(err, len, "index '%s' is damaged: /center does not read", path);
    goto done;
  }
  if (ix->cosine) {
    memcpy(ix->frame, ix->anchors, (size_t)(ix->k * ix->d) * sizeof(float));
  } else if (!has_center || read_whole(f, "/anchors_centered", H5T_NATIVE_FLOAT, 2, ix->k, ix->d, ix->frame)) {
    snprintf(err, len,
             "index '%s' (l2) has no /center and /anchors_centered (written by an older vecanneal): new rows cannot be "
             "placed as compress placed its own; compress the data again with this version",
             path);
    goto done;
  }
  ix->cpu_assign = VA_CPU_ASSIGN_AUTO;
  hid_t cg = H5Lexists(f, "/config", H5P_DEFAULT) > 0 ? H5Gopen2(f, "/config", H5P_DEFAULT) : -1;
  if (cg >= 0) {
    if (!va_h5_attr_read_str(cg, "cpu_assign", text, sizeof text))
      ix->cpu_assign = !strcmp(text, "sgemm")   ? VA_CPU_ASSIGN_SGEMM
                       : !strcmp(text, "fused") ? VA_CPU_ASSIGN_FUSED
                                                : VA_CPU_ASSIGN_AUTO;
    H5Gclose(cg);
  }
  ix->total_variance = 0;
  ix->compression_ratio = 0;
  attr_num(f, "total_variance", H5T_NATIVE_DOUBLE, &ix->total_variance);
  attr_num(f, "compression_ratio", H5T_NATIVE_DOUBLE, &ix->compression_ratio);
  rc = 0;
done:
  H5Fclose(f);
  return rc;
}

int va_index_load(const char *path, va_index_data_t *ix) {
  memset(ix, 0, sizeof *ix);
  char err[VA_PATH_MAX + 512] = "";
  int rc = va_proc.rank == 0 ? load_rank0(path, ix, err, sizeof err) : 0;
  if ((rc = va_agree(rc, err))) {
    va_index_data_free(ix);
    return rc;
  }
  /* The scalars first (every rank then allocates alike), then the arrays. */
  va_index_data_t head = *ix;
  VA_MPI(MPI_Bcast(&head, (int)sizeof head, MPI_BYTE, 0, MPI_COMM_WORLD));
  if (va_proc.rank != 0) {
    *ix = head;
    alloc_arrays(ix);
  }
  const int kd = (int)(ix->k * ix->d);
  VA_MPI(MPI_Bcast(ix->anchors, kd, MPI_FLOAT, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Bcast(ix->frame, kd, MPI_FLOAT, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Bcast(ix->center, (int)ix->d, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Bcast(ix->counts, (int)ix->k, MPI_UINT64_T, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Bcast(ix->mse, (int)ix->k, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  return 0;
}

void va_index_data_free(va_index_data_t *ix) {
  free(ix->anchors);
  free(ix->frame);
  free(ix->center);
  free(ix->counts);
  free(ix->mse);
  memset(ix, 0, sizeof *ix);
}

int va_index_load_assignments(const char *path, int64_t row0, int64_t count, uint32_t *out) {
  char err[VA_PATH_MAX + 256] = "";
  int rc = 0;
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t ds = f >= 0 ? H5Dopen2(f, "/assignments", H5P_DEFAULT) : -1, sp = ds >= 0 ? H5Dget_space(ds) : -1;
  hsize_t start = (hsize_t)row0, cnt = (hsize_t)count;
  hid_t ms = H5Screate_simple(1, &cnt, NULL);
  if (sp < 0 || ms < 0 ||
      (count > 0 && (H5Sselect_hyperslab(sp, H5S_SELECT_SET, &start, NULL, &cnt, NULL) < 0 ||
                     H5Dread(ds, H5T_NATIVE_UINT32, ms, sp, H5P_DEFAULT, out) < 0))) {
    snprintf(err, sizeof err, "index '%s': /assignments rows %lld..%lld do not read: %s", path, (long long)row0,
             (long long)(row0 + count), va_h5_last_error());
    rc = VA_EXIT_INPUT;
  }
  if (ms >= 0) H5Sclose(ms);
  if (sp >= 0) H5Sclose(sp);
  if (ds >= 0) H5Dclose(ds);
  if (f >= 0) H5Fclose(f);
  return va_agree(rc, err);
}
