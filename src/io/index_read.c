/* index_read.c: an index read back (io/index_read.h). Rank 0 reads the replicated parts and checks them,
 * every rank receives them by broadcast; slices of /assignments are read by every rank on its own. Every
 * HDF5 call's result is checked and turned into a message: an index that does not read is bad input
 * (exit 3), not an internal failure. */
#include "io/index_read.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/assign.h" /* VA_CPU_ASSIGN_* */
#include "io/h5io.h"    /* va_h5_attr_read_str */
#include "io/index.h"   /* VA_INDEX_FORMAT_VERSION */
#include "util/util.h"

/* A numeric scalar attribute read as mtype into v; 0 when it reads. */
static int attr_num(hid_t obj, const char *name, hid_t mtype, void *v) {
  if (H5Aexists(obj, name) <= 0) return 1;
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  int bad = a < 0 || H5Aread(a, mtype, v) < 0;
  if (a >= 0) H5Aclose(a);
  return bad;
}

/* A whole dataset of exactly the shape (r, d0[, d1]) into buf; 0 when it reads. */
static int read_whole(hid_t f, const char *name, hid_t mtype, int r, int64_t d0, int64_t d1, void *buf) {
  if (H5Lexists(f, name, H5P_DEFAULT) <= 0) return 1;
  hid_t ds = H5Dopen2(f, name, H5P_DEFAULT), sp = ds >= 0 ? H5Dget_space(ds) : -1;
  hsize_t dims[2] = {0, 0};
  int ok = sp >= 0 && H5Sget_simple_extent_ndims(sp) == r && H5Sget_simple_extent_dims(sp, dims, NULL) == r &&
           dims[0] == (hsize_t)d0 && (r == 1 || dims[1] == (hsize_t)d1) &&
           H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0;
  if (sp >= 0) H5Sclose(sp);
  if (ds >= 0) H5Dclose(ds);
  return !ok;
}

/* Rank 0: /pq's scalars and codebooks, when the index has codes; 0 or VA_EXIT_INPUT with err set. */
static int read_codes_head(hid_t f, const char *path, va_index_data_t *ix, char *err, size_t len) {
  if (H5Lexists(f, "/pq", H5P_DEFAULT) <= 0) return 0;
  hid_t g = H5Gopen2(f, "/pq", H5P_DEFAULT);
  int ok = g >= 0 && !attr_num(g, "m", H5T_NATIVE_INT64, &ix->pq_m) &&
           !attr_num(g, "bits", H5T_NATIVE_INT64, &ix->pq_bits) &&
           !attr_num(g, "ksub", H5T_NATIVE_INT64, &ix->pq_ksub) &&
           !attr_num(g, "dsub_max", H5T_NATIVE_INT64, &ix->pq_dsub_max) && ix->pq_m >= 1 && ix->pq_m <= ix->d &&
           ix->pq_bits == 8 && ix->pq_ksub == ((int64_t)1 << ix->pq_bits) &&
           ix->pq_dsub_max == (ix->d + ix->pq_m - 1) / ix->pq_m;
  if (ok) {
    ix->pq_codebooks =
        va_malloc((size_t)(ix->pq_m * ix->pq_ksub * ix->pq_dsub_max) * sizeof(float), "index pq codebooks");
    hid_t ds = H5Lexists(g, "codebooks", H5P_DEFAULT) > 0 ? H5Dopen2(g, "codebooks", H5P_DEFAULT) : -1,
          sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hsize_t dims[3] = {0, 0, 0};
    ok = sp >= 0 && H5Sget_simple_extent_ndims(sp) == 3 && H5Sget_simple_extent_dims(sp, dims, NULL) == 3 &&
         dims[0] == (hsize_t)ix->pq_m && dims[1] == (hsize_t)ix->pq_ksub && dims[2] == (hsize_t)ix->pq_dsub_max &&
         H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ix->pq_codebooks) >= 0;
    if (sp >= 0) H5Sclose(sp);
    if (ds >= 0) H5Dclose(ds);
  }
  if (g >= 0) H5Gclose(g);
  if (ok) return 0;
  snprintf(err, len,
           "index '%s' is damaged: its codes (/pq: attributes m, bits, ksub, dsub_max and the codebooks, m x 2^bits x "
           "ceil(d / m) float) are missing, inconsistent with d = %lld, or do not read (%s)",
           path, (long long)ix->d, va_h5_last_error());
  return VA_EXIT_INPUT;
}

/* The arrays of ix's shape (every rank alike once the scalars are known). */
static void alloc_arrays(va_index_data_t *ix, int need) {
  const size_t kd = (size_t)(ix->k * ix->d);
  ix->anchors = va_malloc(kd * sizeof(float), "index anchors");
  ix->counts = va_malloc((size_t)ix->k * sizeof(uint64_t), "index counts");
  ix->mse = va_malloc((size_t)ix->k * sizeof(double), "index mse");
  if (need & VA_INDEX_FRAME) {
    ix->frame = va_malloc(kd * sizeof(float), "index anchors");
    ix->center = va_calloc((size_t)ix->d, sizeof(double), "index centre");
  }
}

/* Rank 0: the attributes and the replicated datasets; 0 or VA_EXIT_INPUT with err set. */
static int read_rank0(const char *path, int need, va_index_data_t *ix, char *err, size_t len) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    snprintf(err, len, "cannot open index '%s' (missing, damaged or not HDF5): %s", path, va_h5_last_error());
    return VA_EXIT_INPUT;
  }
  char text[64] = "";
  int64_t version = 1;
  int rc = VA_EXIT_INPUT;
  if (va_h5_attr_read_str(f, "format", text, sizeof text) || strcmp(text, "vecanneal-index")) {
    snprintf(err, len, "'%s' is not a vecanneal index (no format = vecanneal-index attribute)", path);
    goto done;
  }
  if ((need & VA_INDEX_SOURCE) && (attr_num(f, "format_version", H5T_NATIVE_INT64, &version) || version < 2)) {
    snprintf(err, len,
             "index '%s' is format 1: it records no checksum of its source, so its rows cannot be checked; "
             "run compress again to write format %d",
             path, VA_INDEX_FORMAT_VERSION);
    goto done;
  }
  if (va_h5_attr_read_str(f, "metric", text, sizeof text) || attr_num(f, "n", H5T_NATIVE_INT64, &ix->n) ||
      attr_num(f, "d", H5T_NATIVE_INT64, &ix->d) || attr_num(f, "k_final", H5T_NATIVE_INT64, &ix->k) || ix->n < 1 ||
      ix->d < 1 || ix->k < 1 || (strcmp(text, "l2") && strcmp(text, "cosine"))) {
    snprintf(err, len, "index '%s' is damaged: a root attribute (metric, n, d, k_final) is missing or unreadable",
             path);
    goto done;
  }
  ix->cosine = !strcmp(text, "cosine");
  ix->source_size = -1;
  if ((need & VA_INDEX_SOURCE) &&
      (va_h5_attr_read_str(f, "source_file", ix->source_file, sizeof ix->source_file) ||
       va_h5_attr_read_str(f, "source_dataset", ix->source_dataset, sizeof ix->source_dataset) ||
       attr_num(f, "source_size", H5T_NATIVE_INT64, &ix->source_size) ||
       attr_num(f, "source_checksum", H5T_NATIVE_UINT64, &ix->source_checksum))) {
    snprintf(err, len,
             "index '%s' is damaged: a root attribute (source_file, source_dataset, source_size, source_checksum) "
             "is missing or unreadable",
             path);
    goto done;
  }
  alloc_arrays(ix, need);
  if (read_whole(f, "/anchors", H5T_NATIVE_FLOAT, 2, ix->k, ix->d, ix->anchors)) {
    snprintf(err, len, "index '%s' is damaged: /anchors is missing, not %lld x %lld float, or does not read (%s)", path,
             (long long)ix->k, (long long)ix->d, va_h5_last_error());
    goto done;
  }
  if (read_whole(f, "/anchor_count", H5T_NATIVE_UINT64, 1, ix->k, 0, ix->counts) ||
      read_whole(f, "/anchor_mse", H5T_NATIVE_DOUBLE, 1, ix->k, 0, ix->mse)) {
    snprintf(err, len,
             "index '%s' is damaged: /anchor_count or /anchor_mse is missing, not of length %lld, or does "
             "not read (%s)",
             path, (long long)ix->k, va_h5_last_error());
    goto done;
  }
  if (need & VA_INDEX_FRAME) {
    /* /center and (l2) /anchors_centered, written since they were added to format 2. A cosine index
     * without them has the frame anyway (zero centre, /anchors as the kernels saw them). */
    const int has_center = H5Lexists(f, "/center", H5P_DEFAULT) > 0;
    if (has_center && read_whole(f, "/center", H5T_NATIVE_DOUBLE, 1, ix->d, 0, ix->center)) {
      snprintf(err, len, "index '%s' is damaged: /center does not read", path);
      goto done;
    }
    if (ix->cosine) {
      memcpy(ix->frame, ix->anchors, (size_t)(ix->k * ix->d) * sizeof(float));
    } else if (!has_center || read_whole(f, "/anchors_centered", H5T_NATIVE_FLOAT, 2, ix->k, ix->d, ix->frame)) {
      snprintf(err, len,
               "index '%s' (l2) has no /center and /anchors_centered (written by an older vecanneal): new rows cannot "
               "be placed as compress placed its own; compress the data again with this version",
               path);
      goto done;
    }
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
  if (read_codes_head(f, path, ix, err, len)) goto done;
  attr_num(f, "total_variance", H5T_NATIVE_DOUBLE, &ix->total_variance);
  attr_num(f, "compression_ratio", H5T_NATIVE_DOUBLE, &ix->compression_ratio);
  rc = 0;
done:
  H5Fclose(f);
  return rc;
}

int va_index_read(const char *path, int need, va_index_data_t *ix) {
  memset(ix, 0, sizeof *ix);
  char err[VA_PATH_MAX + 512] = "";
  int rc = va_proc.rank == 0 ? read_rank0(path, need, ix, err, sizeof err) : 0;
  if ((rc = va_agree(rc, err))) {
    va_index_data_free(ix);
    return rc;
  }
  /* The scalars first (every rank then allocates alike), then the arrays. */
  va_index_data_t head = *ix;
  VA_MPI(MPI_Bcast(&head, (int)sizeof head, MPI_BYTE, 0, MPI_COMM_WORLD));
  if (va_proc.rank != 0) {
    *ix = head;
    ix->anchors = ix->frame = NULL;
    ix->center = ix->mse = NULL;
    ix->counts = NULL;
    ix->pq_codebooks = NULL;
    alloc_arrays(ix, need);
    if (ix->pq_m > 0)
      ix->pq_codebooks =
          va_malloc((size_t)(ix->pq_m * ix->pq_ksub * ix->pq_dsub_max) * sizeof(float), "index pq codebooks");
  }
  const int kd = (int)(ix->k * ix->d);
  VA_MPI(MPI_Bcast(ix->anchors, kd, MPI_FLOAT, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Bcast(ix->counts, (int)ix->k, MPI_UINT64_T, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Bcast(ix->mse, (int)ix->k, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  if (need & VA_INDEX_FRAME) {
    VA_MPI(MPI_Bcast(ix->frame, kd, MPI_FLOAT, 0, MPI_COMM_WORLD));
    VA_MPI(MPI_Bcast(ix->center, (int)ix->d, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  }
  if (ix->pq_m > 0)
    VA_MPI(MPI_Bcast(ix->pq_codebooks, (int)(ix->pq_m * ix->pq_ksub * ix->pq_dsub_max), MPI_FLOAT, 0, MPI_COMM_WORLD));
  return 0;
}

/* Rows [row0, row0 + count) of dataset `name` (an absolute path) of index `path`, which must hold n rows of
 * `width` values (width 0: a vector of n), read as mtype into out: 1; 0 when the dataset is missing, of
 * another shape or does not read; -1 when the file does not open. */
static int read_rows(const char *path, const char *name, int64_t n, int64_t width, hid_t mtype, int64_t row0,
                     int64_t count, void *out) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return -1;
  int exists = 1; /* every link of the path, parent first: H5Lexists fails on a missing parent */
  char link[128];
  for (const char *c = strchr(name + 1, '/'); exists; c = strchr(c + 1, '/')) {
    const size_t len = c ? (size_t)(c - name) : strlen(name);
    if (len >= sizeof link) break;
    memcpy(link, name, len);
    link[len] = 0;
    exists = H5Lexists(f, link, H5P_DEFAULT) > 0;
    if (!c) break;
  }
  hid_t ds = exists ? H5Dopen2(f, name, H5P_DEFAULT) : -1;
  hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1;
  const int rank = width > 0 ? 2 : 1;
  hsize_t dims[2] = {0, 0}, off[2] = {(hsize_t)row0, 0}, cnt[2] = {(hsize_t)count, (hsize_t)width};
  int ok = sp >= 0 && H5Sget_simple_extent_ndims(sp) == rank && H5Sget_simple_extent_dims(sp, dims, NULL) == rank &&
           dims[0] == (hsize_t)n && (rank == 1 || dims[1] == (hsize_t)width);
  if (ok && count > 0) {
    hid_t mem = H5Screate_simple(rank, cnt, NULL);
    ok = mem >= 0 && H5Sselect_hyperslab(sp, H5S_SELECT_SET, off, NULL, cnt, NULL) >= 0 &&
         H5Dread(ds, mtype, mem, sp, H5P_DEFAULT, out) >= 0;
    if (mem >= 0) H5Sclose(mem);
  }
  if (sp >= 0) H5Sclose(sp);
  if (ds >= 0) H5Dclose(ds);
  H5Fclose(f);
  return ok;
}

/* This rank's slice of /assignments; 0 or VA_EXIT_INPUT with err set. */
static int read_slice(const char *path, const va_index_data_t *ix, int64_t row0, int64_t count, uint32_t *out,
                      char *err, size_t len) {
  const int got = read_rows(path, "/assignments", ix->n, 0, H5T_NATIVE_UINT32, row0, count, out);
  if (got < 0) return snprintf(err, len, "cannot open index '%s': %s", path, va_h5_last_error()), VA_EXIT_INPUT;
  if (!got)
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

int va_index_read_assignments(const char *path, const va_index_data_t *ix, int64_t row0, int64_t count, uint32_t *out) {
  char err[VA_PATH_MAX + 512] = "";
  return va_agree(read_slice(path, ix, row0, count, out, err, sizeof err), err);
}

/* This rank's rows of /pq/codes; 0 or VA_EXIT_INPUT with err set. */
static int read_codes_slice(const char *path, const va_index_data_t *ix, int64_t row0, int64_t count, uint8_t *out,
                            char *err, size_t len) {
  const int got = ix->pq_m > 0 ? read_rows(path, "/pq/codes", ix->n, ix->pq_m, H5T_NATIVE_UINT8, row0, count, out) : 0;
  if (got < 0) return snprintf(err, len, "cannot open index '%s': %s", path, va_h5_last_error()), VA_EXIT_INPUT;
  if (!got)
    return snprintf(err, len,
                    "index '%s' has no codes, or its /pq/codes is not %lld x %lld bytes or does not read (%s)", path,
                    (long long)ix->n, (long long)ix->pq_m, va_h5_last_error()),
           VA_EXIT_INPUT;
  return 0;
}

int va_index_read_codes(const char *path, const va_index_data_t *ix, int64_t row0, int64_t count, uint8_t *out) {
  char err[VA_PATH_MAX + 512] = "";
  return va_agree(read_codes_slice(path, ix, row0, count, out, err, sizeof err), err);
}

void va_index_data_free(va_index_data_t *ix) {
  free(ix->pq_codebooks);
  free(ix->anchors);
  free(ix->counts);
  free(ix->mse);
  free(ix->frame);
  free(ix->center);
  memset(ix, 0, sizeof *ix);
}
