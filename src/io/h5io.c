/* h5io.c: input validation, sharded reads with on-load conversion (HDF5, and vector files through
 * vecfile.h), and sharded writes (see h5io.h). */
#define _GNU_SOURCE
#include "io/h5io.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util/checksum.h" /* va_rows_checksum */
#include "io/files.h"      /* va_temp_name */
#include "util/stall.h"    /* va_stall_guard_* */
#include "core/stop.h"     /* va_stop_requested */
#include "util/util.h"

const char *va_dtype_name(va_dtype_t t) {
  static const char *names[] = {"float32", "float64", "float16", "uint8", "int8", "int32"};
  return names[t];
}

float va_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) bits = sign;
    else { /* subnormal: renormalise */ int e = -1;
      do {
        e++;
        mant <<= 1;
      } while (!(mant & 0x400u));
      bits = sign | (uint32_t)(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 31) bits = sign | 0x7f800000u | mant << 13; /* Inf / NaN */
  else bits = sign | (exp + 112) << 23 | mant << 13;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t va_float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow to Inf */
  if (absx < 0x38800000u) {                                   /* subnormal or zero in half */
    if (absx < 0x33000000u) return (uint16_t)sign;
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)(absx >> 23) + 1 + 13 - 1;
    uint32_t half = mant >> (shift + 1), rem = mant & ((1u << (shift + 1)) - 1), mid = 1u << shift;
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = ((absx >> 13) - (112u << 10)), rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) half++;
  return (uint16_t)(sign | half);
}

hid_t va_h5_half_type(void) {
  hid_t t = VA_H5(H5Tcopy(H5T_IEEE_F32LE));
  VA_H5(H5Tset_fields(t, 15, 10, 5, 0, 10));
  VA_H5(H5Tset_size(t, 2));
  VA_H5(H5Tset_precision(t, 16));
  VA_H5(H5Tset_ebias(t, 15));
  return t;
}

int va_split_spec(const char *spec, char *file, size_t flen, char *dset, size_t dlen) {
  const char *colon = strrchr(spec, ':');
  if (!colon) {
    snprintf(file, flen, "%s", spec);
    snprintf(dset, dlen, "/train");
  } else {
    snprintf(file, flen, "%.*s", (int)(colon - spec), spec);
    snprintf(dset, dlen, "%s", colon + 1);
  }
  return !file[0] || !dset[0];
}

int va_io_collective(int io_mode) {
#ifdef VECANNEAL_PARALLEL_HDF5
  return io_mode != VA_IO_INDEPENDENT && va_proc.nranks >= 1;
#else
  (void)io_mode;
  return 0;
#endif
}

void va_shard_range(int64_t n, int rank, int nranks, int64_t *start, int64_t *count) {
  int64_t base = n / nranks, extra = n % nranks;
  *start = rank * base + (rank < extra ? rank : extra);
  *count = base + (rank < extra);
}

/* Reads a string attribute (fixed or variable length) into out; returns 0 when found. */
static int read_str_attr(hid_t obj, const char *name, char *out, size_t outlen) {
  out[0] = 0;
  if (H5Aexists(obj, name) <= 0) return 1;
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  if (a < 0) return 1;
  /* One string only: H5Aread writes every element of the attribute's dataspace. */
  hid_t sp = H5Aget_space(a);
  hssize_t npts = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
  if (sp >= 0) H5Sclose(sp);
  if (npts != 1) {
    H5Aclose(a);
    return 1;
  }
  hid_t t = H5Aget_type(a);
  int rc = 1;
  if (t >= 0 && H5Tget_class(t) == H5T_STRING) {
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_cset(mt, H5Tget_cset(t)); /* h5py writes UTF-8; HDF5 does not convert ASCII <-> UTF-8 */
    if (H5Tis_variable_str(t) > 0) {
      char *s = NULL;
      H5Tset_size(mt, H5T_VARIABLE);
      if (H5Aread(a, mt, &s) >= 0 && s) {
        snprintf(out, outlen, "%s", s);
        rc = 0;
        H5free_memory(s);
      }
    } else {
      size_t sz = H5Tget_size(t);
      char *buf = calloc(sz + 1, 1);
      H5Tset_size(mt, sz + 1);
      if (buf && H5Aread(a, mt, buf) >= 0) {
        snprintf(out, outlen, "%s", buf);
        rc = 0;
      }
      free(buf);
    }
    H5Tclose(mt);
  }
  if (t >= 0) H5Tclose(t);
  H5Aclose(a);
  return rc;
}

/* Whether every component of an absolute or relative path exists as a link. */
static int path_exists(hid_t file, const char *path) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1;; p++) {
    if (*p == '/' || *p == 0) {
      char c = *p;
      *p = 0;
      if (strcmp(buf, "/") && H5Lexists(file, buf, H5P_DEFAULT) <= 0) return 0;
      if (!c) return 1;
      *p = c;
    }
  }
}

/* --- the input's format ------------------------------------------------------------------------------ */
#define FORMATS_READ                                                                                                   \
  "vecanneal reads HDF5 (.h5, .hdf5; FILE:DATASET), TEXMEX .fvecs, .bvecs and .ivecs, and NumPy .npy files"

/* The names alone: file, dataset and format from spec and the input_format key; a name of no known
 * extension stays VA_INPUT_AUTO (HDF5 if its signature says so: resolve_input). A ':' after a vector
 * file's name is a DATASET part (usage error) unless the whole spec names an existing file. */
static int split_input(const char *spec, int format, va_input_t *in, char *err, size_t errlen) {
  memset(in, 0, sizeof *in);
  const char *colon = strrchr(spec, ':');
  char head[VA_PATH_MAX];
  snprintf(head, sizeof head, "%.*s", colon ? (int)(colon - spec) : 0, spec);
  const int head_format = colon ? va_vecfile_format_of(head) : VA_INPUT_AUTO;
  struct stat st;
  if (format == VA_INPUT_AUTO) {
    if (!colon) format = va_vecfile_format_of(spec);
    else if (va_vecfile_is_vector_format(head_format)) format = head_format;
    else if (head_format != VA_INPUT_HDF5 && va_vecfile_is_vector_format(va_vecfile_format_of(spec)))
      format = va_vecfile_format_of(spec); /* a vector file whose path holds a ':' */
  }
  if (va_vecfile_is_vector_format(format)) {
    if (colon && stat(spec, &st) != 0 && (va_vecfile_is_vector_format(head_format) || stat(head, &st) == 0)) {
      snprintf(err, errlen,
               "input '%s': a .%s file holds one array and has no datasets: give the file alone, without ':%s' (a "
               "DATASET part is for HDF5 files)",
               spec, va_input_format_name(format), colon + 1);
      return VA_EXIT_USAGE;
    }
    snprintf(in->file, sizeof in->file, "%s", spec);
    in->format = format;
    return 0;
  }
  if (va_split_spec(spec, in->file, sizeof in->file, in->dataset, sizeof in->dataset)) {
    snprintf(err, errlen, "input '%s': expected FILE.h5:DATASET", spec);
    return VA_EXIT_USAGE;
  }
  in->format =
      format == VA_INPUT_HDF5 || va_vecfile_format_of(in->file) == VA_INPUT_HDF5 ? VA_INPUT_HDF5 : VA_INPUT_AUTO;
  return 0;
}

void va_input_file(const char *spec, int format, char *file, size_t len) {
  va_input_t in;
  char err[VA_PATH_MAX + 256];
  if (split_input(spec, format, &in, err, sizeof err)) snprintf(file, len, "%s", spec);
  else snprintf(file, len, "%s", in.file);
}

int va_input_resolve(const char *spec, int format, va_input_t *in, char *err, size_t errlen) {
  int rc = split_input(spec, format, in, err, errlen);
  if (rc || in->format != VA_INPUT_AUTO) return rc;
  /* A name of no known extension: HDF5 when the file has its signature (a missing file is reported as
   * such by the probe). */
  struct stat st;
  in->format = VA_INPUT_HDF5;
  if (stat(in->file, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  const int seen = va_vecfile_sniff(in->file);
  if (seen == VA_INPUT_HDF5) return 0;
  const char *base = strrchr(in->file, '/'), *dot = strrchr(base ? base : in->file, '.');
  snprintf(err, errlen,
           "input file '%s': unknown format (%s%s%s, and no HDF5 signature%s): " FORMATS_READ
           ", chosen by the extension; rename it, or set input_format (--input-format hdf5|fvecs|bvecs|ivecs|npy)",
           in->file, dot ? "extension '" : "no extension", dot ? dot : "", dot ? "'" : "",
           seen == VA_INPUT_NPY ? "; its content is a NumPy .npy file" : "");
  return VA_EXIT_INPUT;
}

const char *va_input_label(const va_input_t *in, char *buf, size_t len) {
  if (va_vecfile_is_vector_format(in->format) || !in->dataset[0]) snprintf(buf, len, "%s", in->file);
  else snprintf(buf, len, "%s:%s", in->file, in->dataset);
  return buf;
}

/* The file exists, is a regular file and is readable. */
static int check_input_file(const char *file, struct stat *st, char *err, size_t errlen) {
  if (stat(file, st) != 0) {
    snprintf(err, errlen, "input file '%s': %s", file, strerror(errno));
    return VA_EXIT_INPUT;
  }
  if (!S_ISREG(st->st_mode)) {
    snprintf(err, errlen, "input file '%s' is not a regular file", file);
    return VA_EXIT_INPUT;
  }
  if (access(file, R_OK) != 0) {
    snprintf(err, errlen, "input file '%s' is not readable: %s", file, strerror(errno));
    return VA_EXIT_INPUT;
  }
  return 0;
}

/* A vector file: its layout onto va_input_t. */
static int probe_vector_file(va_input_t *in, char *err, size_t errlen) {
  int rc = va_vecfile_probe(in->file, in->format, &in->vec, err, errlen);
  if (rc) return rc;
  const va_vecfile_t *v = &in->vec;
  in->n = v->n;
  in->d = v->d;
  in->elem_size = v->elem;
  in->dtype = v->kind == 'u'   ? VA_DT_U8
              : v->kind == 'i' ? (v->elem == 1 ? VA_DT_I8 : VA_DT_I32)
              : v->elem == 2   ? VA_DT_F16
              : v->elem == 8   ? VA_DT_F64
                               : VA_DT_F32;
  in->metric_hint = VA_METRIC_AUTO; /* no attributes to say cosine */
  return 0;
}

/* An HDF5 input: in->file and in->dataset set, st the file's. */
static int probe_hdf5(va_input_t *in, const struct stat *stp, char *err, size_t errlen) {
  const struct stat st = *stp;
  hid_t f = H5Fopen(in->file, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    const int seen = va_vecfile_sniff(in->file);
    snprintf(err, errlen, "input file '%s' cannot be opened as HDF5 (truncated or not HDF5?): %s%s", in->file,
             va_h5_last_error(),
             seen == VA_INPUT_NPY ? "; its content is a NumPy .npy file: name it .npy or set input_format = npy"
                                  : "; " FORMATS_READ " (input_format, --input-format)");
    return VA_EXIT_INPUT;
  }
  int rc = 0;
  hid_t d = -1, space = -1, type = -1;
  if (!path_exists(f, in->dataset)) {
    snprintf(err, errlen, "input file '%s' has no dataset '%s'", in->file, in->dataset);
    rc = VA_EXIT_INPUT;
    goto done;
  }
  H5O_info_t oi;
  if (H5Oget_info_by_name(f, in->dataset, &oi, H5P_DEFAULT) < 0 || oi.type != H5O_TYPE_DATASET) {
    snprintf(err, errlen, "'%s' in '%s' is not a dataset", in->dataset, in->file);
    rc = VA_EXIT_INPUT;
    goto done;
  }
  d = H5Dopen2(f, in->dataset, H5P_DEFAULT);
  space = d >= 0 ? H5Dget_space(d) : -1;
  type = d >= 0 ? H5Dget_type(d) : -1;
  if (d < 0 || space < 0 || type < 0) {
    snprintf(err, errlen, "dataset '%s' in '%s' cannot be opened: %s", in->dataset, in->file, va_h5_last_error());
    rc = VA_EXIT_INPUT;
    goto done;
  }
  int ndims = H5Sget_simple_extent_ndims(space);
  if (ndims != 2) {
    snprintf(err, errlen, "dataset '%s' in '%s' has %d dimension(s); expected 2 (rows x dims)", in->dataset, in->file,
             ndims);
    rc = VA_EXIT_INPUT;
    goto done;
  }
  hsize_t dims[2];
  H5Sget_simple_extent_dims(space, dims, NULL);
  in->n = (int64_t)dims[0];
  in->d = (int64_t)dims[1];
  if (in->n < 1 || in->d < 1) {
    snprintf(err, errlen, "dataset '%s' in '%s' is empty (%lld x %lld)", in->dataset, in->file, (long long)in->n,
             (long long)in->d);
    rc = VA_EXIT_INPUT;
    goto done;
  }
  H5T_class_t cls = H5Tget_class(type);
  size_t size = H5Tget_size(type);
  if (cls == H5T_FLOAT && size == 4) in->dtype = VA_DT_F32;
  else if (cls == H5T_FLOAT && size == 8) in->dtype = VA_DT_F64;
  else if (cls == H5T_FLOAT && size == 2) in->dtype = VA_DT_F16;
  else if (cls == H5T_INTEGER && size == 1) in->dtype = H5Tget_sign(type) == H5T_SGN_NONE ? VA_DT_U8 : VA_DT_I8;
  else {
    const char *cname = cls == H5T_INTEGER    ? "integer"
                        : cls == H5T_FLOAT    ? "float"
                        : cls == H5T_STRING   ? "string"
                        : cls == H5T_COMPOUND ? "compound"
                                              : "non-numeric";
    snprintf(err, errlen,
             "dataset '%s' in '%s' has an unsupported element type (%s, %zu bytes); supported: float32, float64, "
             "float16, uint8, int8",
             in->dataset, in->file, cname, size);
    rc = VA_EXIT_INPUT;
    goto done;
  }
  in->elem_size = (int)size;
  /* A contiguous dataset whose bytes lie past the end of the file means the file was truncated. */
  hid_t dcpl = H5Dget_create_plist(d);
  if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS) {
    haddr_t off = H5Dget_offset(d);
    double need = (double)in->n * (double)in->d * (double)size;
    if (off == HADDR_UNDEF) {
      snprintf(err, errlen, "dataset '%s' in '%s' has no data written", in->dataset, in->file);
      rc = VA_EXIT_INPUT;
    } else if ((double)off + need > (double)st.st_size) {
      snprintf(err, errlen, "input file '%s' is truncated: dataset '%s' needs bytes up to %.0f, the file has %lld",
               in->file, in->dataset, (double)off + need, (long long)st.st_size);
      rc = VA_EXIT_INPUT;
    }
  }
  /* Chunks never written read as the fill value, but a collective MPI-IO read of a selection that
   * holds some fails in HDF5 1.10 (MPI_File_set_view: invalid datatype) on every rank count: such a
   * dataset is read independently. */
  H5D_space_status_t status;
  if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Dget_space_status(d, &status) >= 0)
    in->sparse = status != H5D_SPACE_STATUS_ALLOCATED;
  if (dcpl >= 0) H5Pclose(dcpl);
  if (rc) goto done;
  char dist[64];
  if (read_str_attr(d, "distance", dist, sizeof dist) && read_str_attr(f, "distance", dist, sizeof dist)) dist[0] = 0;
  in->metric_hint = (strstr(dist, "angular") || strstr(dist, "cosine")) ? VA_METRIC_COSINE : VA_METRIC_AUTO;
done:
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  if (d >= 0) H5Dclose(d);
  H5Fclose(f);
  return rc;
}

int va_input_probe_as(const char *spec, int format, va_input_t *in, char *err, size_t errlen) {
  int rc = va_input_resolve(spec, format, in, err, errlen);
  struct stat st;
  if (!rc) rc = check_input_file(in->file, &st, err, errlen);
  if (!rc)
    rc =
        va_vecfile_is_vector_format(in->format) ? probe_vector_file(in, err, errlen) : probe_hdf5(in, &st, err, errlen);
  return rc;
}

int va_input_probe(const char *spec, va_input_t *in, char *err, size_t errlen) {
  return va_input_probe_as(spec, VA_INPUT_AUTO, in, err, errlen);
}

void va_input_open_as(const char *spec, int format, va_input_t *in) {
  char err[VA_PATH_MAX + 1024] = "";
  int rc = 0;
  if (va_proc.rank == 0) rc = va_input_probe_as(spec, format, in, err, sizeof err);
  VA_AGREE_OR_EXIT(rc, err);
  VA_MPI(MPI_Bcast(in, (int)sizeof *in, MPI_BYTE, 0, MPI_COMM_WORLD));
  if (in->format == VA_INPUT_IVECS)
    va_log0("note: '%s' is read as vectors of int32 components converted to float (exact up to 2^24); .ivecs "
            "files usually hold ground-truth neighbour ids, not vectors to compress\n",
            in->file);
}

void va_input_open(const char *spec, va_input_t *in) { va_input_open_as(spec, VA_INPUT_AUTO, in); }

double va_input_staging_bytes(const va_input_t *in, double chunk_bytes, int64_t rows) {
  const double row_bytes = (double)in->d * (double)in->elem_size;
  const double file_row_bytes = va_vecfile_is_vector_format(in->format) ? (double)in->vec.stride : row_bytes;
  if (in->dtype == VA_DT_F32 && file_row_bytes == row_bytes) return 0; /* read in place */
  return fmin(chunk_bytes, (double)rows * row_bytes) / row_bytes * file_row_bytes;
}

static hid_t open_for_io(const char *path, unsigned flags, int collective) {
  hid_t fapl = VA_H5(H5Pcreate(H5P_FILE_ACCESS));
#ifdef VECANNEAL_PARALLEL_HDF5
  if (collective) VA_H5(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
#else
  (void)collective;
#endif
  hid_t f = (flags & H5F_ACC_TRUNC) ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl) : H5Fopen(path, flags, fapl);
  H5Pclose(fapl);
  return f;
}

static hid_t transfer_plist(int collective) {
  hid_t dxpl = VA_H5(H5Pcreate(H5P_DATASET_XFER));
#ifdef VECANNEAL_PARALLEL_HDF5
  if (collective) VA_H5(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE));
#else
  (void)collective;
#endif
  return dxpl;
}

static hid_t mem_type_for(va_dtype_t t) {
  switch (t) {
  case VA_DT_F32: return H5Tcopy(H5T_NATIVE_FLOAT);
  case VA_DT_F64: return H5Tcopy(H5T_NATIVE_DOUBLE);
  case VA_DT_F16: return va_h5_half_type();
  case VA_DT_U8: return H5Tcopy(H5T_NATIVE_UINT8);
  case VA_DT_I8: return H5Tcopy(H5T_NATIVE_INT8);
  case VA_DT_I32: return H5Tcopy(H5T_NATIVE_INT32);
  }
  return -1;
}

/* float16 input goes through a table of all 65536 values (256 KiB, built at the first float16 read):
 * one load per value instead of va_half_to_float's branches (docs/performance.md). The same floats. */
static const float *half_table(void) {
  static float *table = NULL;
  if (!table) {
    table = va_malloc(65536 * sizeof(float), "float16 table");
    for (uint32_t h = 0; h < 65536; h++) table[h] = va_half_to_float((uint16_t)h);
  }
  return table;
}

/* Converts values [lo, hi) of the staged ones to float32 (float32: in place, or copied); the index of the
 * first non-finite one, or INT64_MAX (integer types are always finite). */
static int64_t convert_range(va_dtype_t t, const void *src, float *dst, const float *table, int64_t lo, int64_t hi) {
  switch (t) {
  case VA_DT_F32:
    if (src != dst) memcpy(dst + lo, (const float *)src + lo, (size_t)(hi - lo) * 4);
    break;
  case VA_DT_F64:
    for (int64_t i = lo; i < hi; i++) dst[i] = (float)((const double *)src)[i];
    break;
  case VA_DT_F16:
    for (int64_t i = lo; i < hi; i++) dst[i] = table[((const uint16_t *)src)[i]];
    break;
  case VA_DT_U8:
    for (int64_t i = lo; i < hi; i++) dst[i] = (float)((const uint8_t *)src)[i];
    return INT64_MAX;
  case VA_DT_I8:
    for (int64_t i = lo; i < hi; i++) dst[i] = (float)((const int8_t *)src)[i];
    return INT64_MAX;
  case VA_DT_I32:
    for (int64_t i = lo; i < hi; i++) dst[i] = (float)((const int32_t *)src)[i];
    return INT64_MAX;
  }
  for (int64_t i = lo; i < hi; i++)
    if (!isfinite(dst[i])) return i;
  return INT64_MAX;
}

/* Converts nvals staged values to float32 in pieces of 1M values on up to `threads` threads (one thread
 * checking a large shard's float32 rows slows a large GPU job's read; docs/performance.md); returns the
 * index of the first non-finite value or -1. */
static int64_t convert_to_f32(va_dtype_t t, const void *src, float *dst, int64_t nvals, int threads) {
  const float *table = t == VA_DT_F16 ? half_table() : NULL; /* made here, before any thread reads it */
  const int64_t per = (int64_t)1 << 20, pieces = (nvals + per - 1) / per;
  int64_t bad = INT64_MAX;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads > 1 && pieces > 1 ? threads : 1) schedule(static) reduction(min : bad)
#endif
  for (int64_t p = 0; p < pieces; p++) {
    const int64_t b = convert_range(t, src, dst, table, p * per, (p + 1) * per < nvals ? (p + 1) * per : nvals);
    if (b < bad) bad = b;
  }
  (void)threads;
  return bad == INT64_MAX ? -1 : bad;
}

/* --- raw reads ----------------------------------------------------------------------------------------
 * A contiguous dataset without external storage whose file type is the memory type (no conversion), in
 * a file opened with the default (sec2) driver, is one block of raw rows in the file. Independent reads
 * of it use pread on several threads straight into the destination: H5Dread reads it on one thread,
 * the largest part of a large GPU job's start (docs/performance.md).
 * The block's offset (H5Dget_offset) is checked against H5Dread on the first and last rows, so a file
 * this reading would misplace (a user block, say) falls back to H5Dread, as does everything else. */

/* Rows [row, row + 1) by H5Dread and by pread at off: the same bytes. */
static int raw_row_matches(hid_t d, hid_t mtype, int fd, int64_t off, const va_input_t *in, int64_t row) {
  const size_t row_bytes = (size_t)(in->d * in->elem_size);
  char *a = va_malloc(2 * row_bytes, "row check"), *b = a + row_bytes;
  hid_t fspace = H5Dget_space(d);
  hsize_t o[2] = {(hsize_t)row, 0}, c[2] = {1, (hsize_t)in->d};
  hid_t mspace = H5Screate_simple(2, c, NULL);
  int ok = fspace >= 0 && mspace >= 0 && H5Sselect_hyperslab(fspace, H5S_SELECT_SET, o, NULL, c, NULL) >= 0 &&
           H5Dread(d, mtype, mspace, fspace, H5P_DEFAULT, a) >= 0 &&
           pread(fd, b, row_bytes, (off_t)(off + row * (int64_t)row_bytes)) == (ssize_t)row_bytes &&
           memcmp(a, b, row_bytes) == 0;
  if (mspace >= 0) H5Sclose(mspace);
  if (fspace >= 0) H5Sclose(fspace);
  free(a);
  return ok;
}

/* The file offset of the dataset's raw rows where they can be read so, else -1. */
static int64_t raw_rows_offset(hid_t f, hid_t d, hid_t mtype, const va_input_t *in, int fd) {
  int64_t off = -1;
  hid_t dcpl = H5Dget_create_plist(d), ftype = H5Dget_type(d), fapl = H5Fget_access_plist(f);
  if (fd >= 0 && dcpl >= 0 && ftype >= 0 && fapl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS &&
      H5Pget_external_count(dcpl) == 0 && H5Tequal(ftype, mtype) > 0 && H5Pget_driver(fapl) == H5FD_SEC2) {
    const haddr_t a = H5Dget_offset(d);
    struct stat sb;
    const int64_t bytes = in->n * in->d * in->elem_size;
    if (a != HADDR_UNDEF && fstat(fd, &sb) == 0 && (int64_t)a + bytes <= (int64_t)sb.st_size &&
        raw_row_matches(d, mtype, fd, (int64_t)a, in, 0) && raw_row_matches(d, mtype, fd, (int64_t)a, in, in->n - 1))
      off = (int64_t)a;
  }
  if (fapl >= 0) H5Pclose(fapl);
  if (ftype >= 0) H5Tclose(ftype);
  if (dcpl >= 0) H5Pclose(dcpl);
  return off;
}

int64_t va_input_raw_offset(const va_input_t *in) {
  if (va_vecfile_is_vector_format(in->format)) return in->vec.lead ? -1 : in->vec.offset;
  hid_t f = H5Fopen(in->file, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = f >= 0 ? H5Dopen2(f, in->dataset, H5P_DEFAULT) : -1;
  hid_t mtype = mem_type_for(in->dtype);
  int fd = open(in->file, O_RDONLY);
  int64_t off = d >= 0 && mtype >= 0 ? raw_rows_offset(f, d, mtype, in, fd) : -1;
  if (fd >= 0) close(fd);
  if (mtype >= 0) H5Tclose(mtype);
  if (d >= 0) H5Dclose(d);
  if (f >= 0) H5Fclose(f);
  return off;
}

/* The one read loop: into out (in place for float32), or, with out NULL, into the sink's buffers, one
 * chunk of sink->rows rows each (in place for float32 again); raw reads where they apply (above).
 * Vector files are read with pread, independently: their rows, packed (a TEXMEX row's d checked and
 * dropped in staging), go through the same conversion, NaN/Inf check and checksum as HDF5's. */
static void read_rows(const va_input_t *in, int64_t start, int64_t count, float *out, size_t chunk_bytes, int io_mode,
                      int threads, va_read_result_t *res, const va_row_sink_t *sink) {
  const int vec = va_vecfile_is_vector_format(in->format);
  const int collective = !vec && va_io_collective(io_mode) && !in->sparse;
  char err[VA_PATH_MAX + 1024] = "";
  int rc = 0, fd = -1;
  hid_t f = -1, d = -1, fspace = -1, mtype = -1, dxpl = -1;
  if (vec) {
    fd = open(in->file, O_RDONLY);
    if (fd < 0) {
      snprintf(err, sizeof err, "cannot open '%s' for reading: %s", in->file, strerror(errno));
      rc = VA_EXIT_INPUT;
    }
  } else {
    f = open_for_io(in->file, H5F_ACC_RDONLY, collective);
    if (f < 0) {
      snprintf(err, sizeof err, "cannot open '%s' for reading: %s", in->file, va_h5_last_error());
      rc = VA_EXIT_INPUT;
    }
  }
  VA_AGREE_OR_EXIT(rc, err);
  va_h5_scope(VA_EXIT_INPUT, "input", in->file);
  if (collective) va_stall_guard_begin(VA_EXIT_INPUT, "input", in->file);
  int64_t raw_off = -1;
  if (!vec) {
    d = VA_H5(H5Dopen2(f, in->dataset, H5P_DEFAULT));
    fspace = VA_H5(H5Dget_space(d));
    mtype = VA_H5(mem_type_for(in->dtype));
    dxpl = transfer_plist(collective);
    fd = collective ? -1 : open(in->file, O_RDONLY);
    raw_off = collective ? -1 : raw_rows_offset(f, d, mtype, in, fd);
  }
  const int64_t row_bytes = in->d * in->elem_size;
  /* A TEXMEX row's record is longer than its components (its d first): read into staging, packed. */
  const int64_t file_row_bytes = vec ? in->vec.stride : row_bytes;
  const int convert = in->dtype != VA_DT_F32, packed = file_row_bytes != row_bytes;
  int64_t chunk_rows = sink ? sink->rows : (int64_t)chunk_bytes / row_bytes;
  if (chunk_rows < 1) chunk_rows = 1;
  if (chunk_rows > count && count > 0) chunk_rows = count;
  /* float32 lands in place; other types, and TEXMEX records, go through one staging chunk (never a
   * second shard copy). */
  void *stage = convert || packed ? va_malloc((size_t)(chunk_rows * file_row_bytes), "read staging buffer") : NULL;
  float none = 0; /* the destination of a collective round with no rows here */
  int64_t rounds = (count + chunk_rows - 1) / chunk_rows;
  if (collective) VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &rounds, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
  res->bad_row = -1;
  res->checksum = 0;
  for (int64_t r = 0; r < rounds; r++) {
    /* A stop request ends the read between chunks (collective rounds: on every rank at the same one);
     * the caller's stop point ends the job. */
    int stop = va_stop_requested();
    if (collective) VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (stop) break;
    int64_t r0 = r * chunk_rows, nr = count - r0;
    if (nr > chunk_rows) nr = chunk_rows;
    if (nr < 0) nr = 0;
    float *dst = out ? out + r0 * in->d : nr > 0 ? sink->buffer(sink->ctx, r0) : &none;
    void *buf = convert ? stage : (void *)dst; /* the packed rows in their file type */
    if (vec) {
      if (nr > 0 &&
          va_vecfile_read(&in->vec, fd, in->file, start + r0, nr, packed ? stage : buf, buf, threads, err, sizeof err))
        rc = VA_EXIT_INPUT;
    } else {
      hsize_t mdims[2] = {(hsize_t)(nr > 0 ? nr : 1), (hsize_t)in->d};
      hid_t mspace = VA_H5(H5Screate_simple(2, mdims, NULL));
      if (nr > 0) {
        hsize_t off[2] = {(hsize_t)(start + r0), 0}, cnt[2] = {(hsize_t)nr, (hsize_t)in->d};
        VA_H5(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off, NULL, cnt, NULL));
      } else {
        VA_H5(H5Sselect_none(fspace));
        VA_H5(H5Sselect_none(mspace));
      }
      const int failed = raw_off >= 0 ? nr > 0 && va_pread_threads(fd, buf, (size_t)(nr * row_bytes),
                                                                   raw_off + (start + r0) * row_bytes, threads) < 0
                                      : H5Dread(d, mtype, mspace, fspace, dxpl, buf) < 0;
      if (failed) {
        snprintf(err, sizeof err, "reading rows %lld..%lld of '%s:%s' failed (truncated or damaged file?): %s",
                 (long long)(start + r0), (long long)(start + r0 + nr - 1), in->file, in->dataset,
                 raw_off >= 0 ? "a read of its raw rows failed or ended short" : va_h5_last_error());
        /* Inside a collective transfer the peers may wait for this rank: no agreement is possible. */
        if (collective) va_abort_job(VA_EXIT_INPUT, "%s", err);
        rc = VA_EXIT_INPUT;
      }
      H5Sclose(mspace);
    }
    if (nr > 0 && !rc && res->bad_row < 0) {
      int64_t bad = convert_to_f32(in->dtype, buf, dst, nr * in->d, threads);
      if (bad >= 0) res->bad_row = start + r0 + bad / in->d;
      else res->checksum += va_rows_checksum(dst, (size_t)in->d * sizeof(float), start + r0, nr, threads);
    }
    if (nr > 0 && sink) sink->filled(sink->ctx, r0, nr); /* also after a failed read: the job stops after the loop */
    if (collective) va_stall_guard_progress();
    if (rc) break;
  }
  free(stage);
  if (fd >= 0) close(fd);
  if (!vec) {
    H5Pclose(dxpl);
    H5Tclose(mtype);
    H5Sclose(fspace);
    H5Dclose(d);
    H5Fclose(f);
  }
  va_stall_guard_end();
  va_h5_scope(0, NULL, NULL);
  VA_AGREE_OR_EXIT(rc, err);
}

void va_input_read(const va_input_t *in, int64_t start, int64_t count, float *out, size_t chunk_bytes, int io_mode,
                   int threads, va_read_result_t *res) {
  read_rows(in, start, count, out, chunk_bytes, io_mode, threads, res, NULL);
}

void va_input_read_into(const va_input_t *in, int64_t start, int64_t count, int io_mode, int threads,
                        va_read_result_t *res, const va_row_sink_t *sink) {
  read_rows(in, start, count, NULL, 0, io_mode, threads, res, sink);
}

/* --- writing ------------------------------------------------------------------------------------ */
static int write_collective; /* how the file in hand was opened */
/* Without MPI-IO, between va_h5_write_open and va_h5_write_close: the POSIX descriptor through which every
 * rank puts its rows straight into the datasets' storage, -1 otherwise, and this rank's first failure
 * there. A failed write does not end the job at once: every rank finishes (skipping its writes after a
 * failure), then the ranks agree and all exit, so one message and one exit code come out, and no rank
 * removes the file while another still opens it. */
static int raw_fd = -1;
static char raw_error[1536];

/* err: the system's error number, or 0 after a failed HDF5 call (its error stack gives the reason). */
static void raw_failed(const char *call, int err, int line) {
  if (raw_error[0]) return;
  if (err) {
    H5Eclear2(H5E_DEFAULT); /* the reason is err, not an earlier HDF5 message */
    errno = err;
  }
  va_h5_write_failure(call, __FILE__, line, raw_error, sizeof raw_error);
}

/* What this rank wrote into the file in hand, for the read-back check: a dataset's selection (whole, or
 * a block of rows), the memory type and the hash of the bytes handed to H5Dwrite. */
typedef struct {
  char dset[256];
  hid_t memtype;
  int whole, ndims;
  hsize_t off[2], cnt[2];
  size_t bytes;
  uint64_t hash;
} written_t;
static written_t *written;
static int nwritten, written_cap;

static void note_written(hid_t dset, hid_t memtype, int whole, int ndims, const hsize_t *off, const hsize_t *cnt,
                         const void *buf, size_t bytes) {
  if (nwritten == written_cap) {
    written_cap = written_cap ? 2 * written_cap : 64;
    written_t *w = realloc(written, (size_t)written_cap * sizeof *w);
    if (!w) va_abort_job(VA_EXIT_RESOURCE, "out of memory for the record of the blocks written");
    written = w;
  }
  written_t *w = &written[nwritten++];
  memset(w, 0, sizeof *w);
  if (H5Iget_name(dset, w->dset, sizeof w->dset) <= 0) va_h5_fail("H5Iget_name", __FILE__, __LINE__);
  w->memtype = VA_H5(H5Tcopy(memtype));
  w->whole = whole;
  w->ndims = ndims;
  for (int q = 0; q < ndims && off; q++) {
    w->off[q] = off[q];
    w->cnt[q] = cnt[q];
  }
  w->bytes = bytes;
  w->hash = va_hash_bytes(buf, bytes, 0);
  va_stall_guard_progress();
}

static void forget_written(void) {
  for (int i = 0; i < nwritten; i++) H5Tclose(written[i].memtype);
  free(written);
  written = NULL;
  nwritten = written_cap = 0;
}

/* Reads back every block this rank wrote into tmp; 0, or 1 with err naming the first that differs. */
static int read_back(const char *tmp, char *err, size_t errlen) {
  if (!nwritten) return 0;
  hid_t f = H5Fopen(tmp, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    snprintf(err, errlen, "it cannot be opened after writing: %s", va_h5_last_error());
    return 1;
  }
  size_t most = 1;
  for (int i = 0; i < nwritten; i++) most = written[i].bytes > most ? written[i].bytes : most;
  void *buf = va_malloc(most, "read-back buffer");
  int bad = 0;
  for (int i = 0; i < nwritten && !bad; i++) {
    const written_t *w = &written[i];
    hid_t d = H5Dopen2(f, w->dset, H5P_DEFAULT), fs = d >= 0 ? H5Dget_space(d) : -1, ms = -1;
    int ok = d >= 0 && fs >= 0;
    if (ok && !w->whole) {
      ms = H5Screate_simple(w->ndims, w->cnt, NULL);
      ok = ms >= 0 && H5Sselect_hyperslab(fs, H5S_SELECT_SET, w->off, NULL, w->cnt, NULL) >= 0;
    }
    ok = ok && H5Dread(d, w->memtype, w->whole ? H5S_ALL : ms, w->whole ? H5S_ALL : fs, H5P_DEFAULT, buf) >= 0;
    if (!ok) snprintf(err, errlen, "%s cannot be read back: %s", w->dset, va_h5_last_error());
    else if (va_hash_bytes(buf, w->bytes, 0) != w->hash) {
      if (w->whole) snprintf(err, errlen, "%s does not read back as written", w->dset);
      else
        snprintf(err, errlen, "rows %llu..%llu of %s do not read back as written", (unsigned long long)w->off[0],
                 (unsigned long long)(w->off[0] + w->cnt[0] - 1), w->dset);
      ok = 0;
    }
    bad = !ok;
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    if (d >= 0) H5Dclose(d);
  }
  free(buf);
  H5Fclose(f);
  return bad;
}

int va_space_check(const char *what, const char *path, double bytes) {
  char err[VA_PATH_MAX * 2 + 256] = "", dir[VA_PATH_MAX + 16];
  int rc = 0;
  if (va_proc.rank == 0 &&
      !getenv("VECANNEAL_FAULT_SKIP_SPACE_CHECK")) { /* tests: let the reservation or the write meet it */
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    struct statvfs fs;
    const double margin = 65536.0; /* HDF5's own structures beyond the data */
    if (statvfs(dir, &fs) == 0 && (double)fs.f_bavail * (double)fs.f_frsize < bytes + margin) {
      snprintf(err, sizeof err,
               "cannot write the %s '%s': %s: it needs about %.1f MB and the file system holding '%s' has %.1f MB free",
               what, path, strerror(ENOSPC), (bytes + margin) / 1e6, dir,
               (double)fs.f_bavail * (double)fs.f_frsize / 1e6);
      rc = VA_EXIT_OUTPUT;
    }
  }
  return va_agree(rc, err);
}

/* Rank 0, right after creating tmp: reserves its expected size on disk (fallocate, keeping the file's
 * size: HDF5 writes into the reserved blocks and its closing truncation gives back what is left), so
 * that a full file system is found before any data is written, and not by a write inside a collective
 * call (which HDF5 1.10 does not survive on every rank). 0, or the errno of a full disk or quota;
 * file systems without fallocate reserve nothing. */
static int reserve_space(const char *tmp, double bytes) {
  if (getenv("VECANNEAL_FAULT_SKIP_RESERVE")) return 0; /* tests: let the write itself meet the full disk */
  int fd = open(tmp, O_WRONLY);
  if (fd < 0) return 0;
  int rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)(bytes + 1048576.0)) == 0 ? 0 : errno;
  close(fd);
  return rc == ENOSPC || rc == EDQUOT || rc == EFBIG ? rc : 0;
}

int va_h5_write_open(va_h5_out_t *o, const char *what, const char *path, double bytes, int io_mode,
                     va_h5_setup_fn setup, void *ctx) {
  o->collective = va_io_collective(io_mode);
  o->file = -1;
  snprintf(o->what, sizeof o->what, "%s", what);
  snprintf(o->path, sizeof o->path, "%s", path);
  char err[VA_PATH_MAX * 2 + 1024] = "";
  int rc = 0;
  hid_t f = -1;
  va_temp_name(path, ".partial", o->tmp, sizeof o->tmp);
  va_pending_add(o->tmp, 0); /* removed by any exit that does not complete it */
  if ((rc = va_space_check(what, path, bytes))) return rc;
  if (o->collective || va_proc.rank == 0) {
    f = open_for_io(o->tmp, H5F_ACC_TRUNC, o->collective);
    if (f < 0) {
      snprintf(err, sizeof err, "cannot write the %s '%s': creating '%s' failed: %s", what, path, o->tmp,
               va_write_failure_reason(o->tmp));
      rc = VA_EXIT_OUTPUT;
    }
  }
  if (va_agree(rc, err)) {
    if (f >= 0) H5Fclose(f);
    return VA_EXIT_OUTPUT;
  }
  /* Nothing is written yet: a full disk found here ends the job at once (closing the file would flush
   * its first metadata, the very write that may fail inside a collective call). */
  const int reserve = va_proc.rank == 0 ? reserve_space(o->tmp, bytes) : 0;
  if (reserve)
    va_abort_job(VA_EXIT_OUTPUT, "cannot write the %s '%s': %s (reserving %.1f MB for '%s' failed)", what, path,
                 strerror(reserve), bytes / 1e6, o->tmp);
  write_collective = o->collective;
  va_h5_scope(VA_EXIT_OUTPUT, what, path);
  if (o->collective) {
    va_stall_guard_begin(VA_EXIT_OUTPUT, what, path);
    setup(f, ctx);
    o->file = f;
    return 0;
  }
  /* Serial HDF5 takes one writer of a file at a time, but the rows need no HDF5 once their datasets
   * exist with their storage allocated (va_h5_create_dataset): rank 0 makes the file and its objects and
   * closes it, then every rank at once opens it read-only to find its datasets and writes its rows with
   * pwrite at their place in that storage. */
  if (va_proc.rank == 0) {
    setup(f, ctx);
    VA_H5(H5Fclose(f));
  }
  VA_MPI(MPI_Barrier(MPI_COMM_WORLD));
  raw_error[0] = 0;
  o->file = open_for_io(o->tmp, H5F_ACC_RDONLY, 0);
  if (o->file < 0) raw_failed("H5Fopen", 0, __LINE__);
  if (o->file >= 0 && (raw_fd = open(o->tmp, O_WRONLY)) < 0) {
    raw_failed("open", errno, __LINE__);
    VA_H5(H5Fclose(o->file));
    o->file = -1; /* no rows from this rank: close reports why */
  }
  return 0;
}

int va_h5_write_close(va_h5_out_t *o) {
  char err[VA_PATH_MAX * 2 + 1024] = "";
  int rc = 0;
  if (o->collective) {
    VA_H5(H5Fclose(o->file));
  } else {
    if (raw_fd >= 0 && close(raw_fd) != 0) raw_failed("close", errno, __LINE__);
    raw_fd = -1;
    if (o->file >= 0) VA_H5(H5Fclose(o->file));
    /* as a failure inside a write through HDF5 does, this ends the job (every rank, VA_EXIT_OUTPUT) */
    VA_AGREE_OR_EXIT(raw_error[0] ? VA_EXIT_OUTPUT : 0, raw_error);
  }
  o->file = -1;
  va_stall_guard_end();
  va_h5_scope(0, NULL, NULL);
  VA_MPI(MPI_Barrier(MPI_COMM_WORLD));
  /* Through MPI-IO every rank reads back what it wrote: a write the MPI-IO layer dropped (Open MPI's
   * OMPIO reports a full disk on stderr but not to HDF5) reads as zeros here. Without MPI-IO (serial
   * HDF5, io = independent) every write's result was checked where it was made, so nothing was recorded
   * to read. */
  char why[1024] = "";
  if (read_back(o->tmp, why, sizeof why)) {
    snprintf(err, sizeof err, "cannot write the %s '%s': %s (%s)", o->what, o->path, why,
             va_write_failure_reason(o->tmp));
    rc = VA_EXIT_OUTPUT;
  }
  forget_written();
  if (va_agree(rc, err)) return VA_EXIT_OUTPUT;
  /* Only a complete file gets the final name. */
  if (va_proc.rank == 0 && rename(o->tmp, o->path) != 0) {
    snprintf(err, sizeof err, "cannot write the %s '%s': renaming '%s' to it failed: %s", o->what, o->path, o->tmp,
             strerror(errno));
    rc = VA_EXIT_OUTPUT;
  }
  if (va_agree(rc, err)) return VA_EXIT_OUTPUT;
  va_pending_drop(o->tmp);
  return 0;
}

int va_h5_write_file(const char *what, const char *path, double bytes, int io_mode, va_h5_setup_fn setup,
                     va_h5_rows_fn rows, void *ctx) {
  va_h5_out_t o;
  int rc = va_h5_write_open(&o, what, path, bytes, io_mode, setup, ctx);
  if (rc) return rc;
  if (o.file >= 0) rows(o.file, ctx);
  return va_h5_write_close(&o);
}

hid_t va_h5_create_dataset(hid_t loc, const char *name, hid_t type, hid_t space, hid_t lcpl) {
  hid_t dcpl = VA_H5(H5Pcreate(H5P_DATASET_CREATE));
  VA_H5(H5Pset_layout(dcpl, H5D_CONTIGUOUS));
  VA_H5(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY));
  VA_H5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
  hid_t ds = VA_H5(H5Dcreate2(loc, name, type, space, lcpl, dcpl, H5P_DEFAULT));
  VA_H5(H5Pclose(dcpl));
  return ds;
}

void va_h5_write_whole(hid_t dset, hid_t memtype, const void *buf) {
  if (raw_fd >= 0) va_fatal_at(__FILE__, __LINE__, "va_h5_write_whole called inside rows (it belongs in setup)");
  hid_t fspace = VA_H5(H5Dget_space(dset));
  hid_t mspace = VA_H5(H5Scopy(fspace));
  hid_t dxpl = transfer_plist(write_collective);
  if (write_collective && va_proc.rank != 0) {
    VA_H5(H5Sselect_none(fspace));
    VA_H5(H5Sselect_none(mspace));
  }
  const hssize_t points = H5Sget_select_npoints(fspace);
  if (points > 0 || write_collective) VA_H5(H5Dwrite(dset, memtype, mspace, fspace, dxpl, buf));
  if (points > 0 && write_collective)
    note_written(dset, memtype, 1, 0, NULL, NULL, buf, (size_t)points * H5Tget_size(memtype));
  H5Pclose(dxpl);
  H5Sclose(mspace);
  H5Sclose(fspace);
}

int64_t va_h5_row_rounds(int64_t local_rows, int64_t chunk_rows) {
  int64_t rounds = (local_rows + chunk_rows - 1) / chunk_rows;
  if (write_collective) VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &rounds, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
  return rounds;
}

/* Rows at their place in the dataset's contiguous storage, by pwrite on raw_fd: the bytes go to the file
 * as they are, so the memory type must be the file type (both little-endian IEEE or integers of one size
 * on the hosts this runs on). */
static void write_rows_raw(hid_t dset, hid_t memtype, int64_t row0, int64_t nrows, int64_t cols, const void *buf) {
  if (raw_error[0]) return;
  const haddr_t base = H5Dget_offset(dset);
  hid_t ftype = VA_H5(H5Dget_type(dset));
  const htri_t same = H5Tequal(ftype, memtype);
  VA_H5(H5Tclose(ftype));
  if (base == HADDR_UNDEF || same <= 0)
    va_fatal_at(__FILE__, __LINE__,
                "a dataset written by rows needs storage allocated when it is made "
                "(va_h5_create_dataset) and its own type in memory");
  hid_t fspace = VA_H5(H5Dget_space(dset));
  const int rank = VA_H5(H5Sget_simple_extent_ndims(fspace));
  VA_H5(H5Sclose(fspace));
  const size_t esize = H5Tget_size(memtype), row_bytes = (size_t)(rank > 1 ? cols : 1) * esize;
  const char *p = buf;
  size_t left = (size_t)nrows * row_bytes;
  off_t at = (off_t)base + (off_t)row0 * (off_t)row_bytes;
  while (left > 0) {
    const ssize_t w = pwrite(raw_fd, p, left < ((size_t)1 << 30) ? left : ((size_t)1 << 30), at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      raw_failed("pwrite", w == 0 ? EIO : errno, __LINE__);
      return;
    }
    p += w;
    at += w;
    left -= (size_t)w;
  }
}

void va_h5_write_rows(hid_t dset, hid_t memtype, int64_t row0, int64_t nrows, int64_t cols, const void *buf) {
  if (nrows <= 0 && !write_collective) return;
  /* Fault injection for tests: VECANNEAL_FAULT_WRITE_FAILS_ON=R fails rank R's first block of rows as a
   * full disk would, inside the transfer its peers are in (without MPI-IO: as its pwrite would). */
  const char *fault = getenv("VECANNEAL_FAULT_WRITE_FAILS_ON");
  if (fault && atoi(fault) == va_proc.rank && nrows > 0) {
    if (raw_fd >= 0) {
      raw_failed("pwrite (VECANNEAL_FAULT_WRITE_FAILS_ON)", ENOSPC, __LINE__);
      return;
    }
    H5Eclear2(H5E_DEFAULT);
    errno = ENOSPC;
    va_h5_fail("H5Dwrite (VECANNEAL_FAULT_WRITE_FAILS_ON)", __FILE__, __LINE__);
  }
  if (raw_fd >= 0) {
    write_rows_raw(dset, memtype, row0, nrows, cols, buf);
    return;
  }
  hid_t fspace = VA_H5(H5Dget_space(dset));
  int rank = VA_H5(H5Sget_simple_extent_ndims(fspace));
  hsize_t mdims[2] = {(hsize_t)(nrows > 0 ? nrows : 1), (hsize_t)cols};
  hid_t mspace = VA_H5(H5Screate_simple(rank, mdims, NULL));
  hsize_t off[2] = {(hsize_t)row0, 0}, cnt[2] = {(hsize_t)nrows, (hsize_t)cols};
  if (nrows > 0) {
    VA_H5(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off, NULL, cnt, NULL));
  } else {
    VA_H5(H5Sselect_none(fspace));
    VA_H5(H5Sselect_none(mspace));
  }
  hid_t dxpl = transfer_plist(write_collective);
  VA_H5(H5Dwrite(dset, memtype, mspace, fspace, dxpl, buf));
  if (nrows > 0 && write_collective)
    note_written(dset, memtype, 0, rank, off, cnt, buf, (size_t)(nrows * (rank > 1 ? cols : 1)) * H5Tget_size(memtype));
  H5Pclose(dxpl);
  H5Sclose(mspace);
  H5Sclose(fspace);
}

/* The 16 MiB chunk loop of both block writes: rows from buf, or fetched into a staging buffer. */
static void write_block(hid_t dset, hid_t memtype, int64_t row0, int64_t nrows, int64_t cols, size_t row_bytes,
                        const void *buf, va_h5_fetch_fn fetch, void *ctx) {
  int64_t chunk = (int64_t)((16u << 20) / (row_bytes > 0 ? row_bytes : 1));
  if (chunk < 1) chunk = 1;
  void *stage = fetch ? va_malloc((size_t)(nrows < chunk ? (nrows > 0 ? nrows : 1) : chunk) * row_bytes,
                                  "staging buffer for a block of rows")
                      : NULL;
  int64_t rounds = va_h5_row_rounds(nrows, chunk);
  for (int64_t r = 0; r < rounds; r++) {
    int64_t r0 = r * chunk, nr = nrows - r0 > chunk ? chunk : nrows - r0;
    if (nr < 0) nr = 0;
    const void *rows = buf ? (const char *)buf + (nr > 0 ? r0 : 0) * (int64_t)row_bytes : stage;
    if (fetch && nr > 0) fetch(ctx, r0, nr, stage);
    va_h5_write_rows(dset, memtype, row0 + r0, nr, cols, rows);
  }
  free(stage);
}

void va_h5_write_block(hid_t dset, hid_t memtype, int64_t row0, int64_t nrows, int64_t cols, size_t row_bytes,
                       const void *buf) {
  write_block(dset, memtype, row0, nrows, cols, row_bytes, buf, NULL, NULL);
}

void va_h5_write_block_fetched(hid_t dset, hid_t memtype, int64_t row0, int64_t nrows, int64_t cols, size_t row_bytes,
                               va_h5_fetch_fn fetch, void *ctx) {
  write_block(dset, memtype, row0, nrows, cols, row_bytes, NULL, fetch, ctx);
}

int va_h5_attr_read_str(hid_t obj, const char *name, char *out, size_t outlen) {
  return read_str_attr(obj, name, out, outlen);
}

static void attr_write(hid_t obj, const char *name, hid_t type, const void *value) {
  hid_t space = VA_H5(H5Screate(H5S_SCALAR));
  if (H5Aexists(obj, name) > 0) VA_H5(H5Adelete(obj, name));
  hid_t a = VA_H5(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT));
  VA_H5(H5Awrite(a, type, value));
  H5Aclose(a);
  H5Sclose(space);
}

void va_h5_attr_str(hid_t obj, const char *name, const char *value) {
  hid_t t = VA_H5(H5Tcopy(H5T_C_S1));
  VA_H5(H5Tset_size(t, strlen(value) + 1));
  VA_H5(H5Tset_strpad(t, H5T_STR_NULLTERM));
  attr_write(obj, name, t, value);
  H5Tclose(t);
}

void va_h5_attr_i64(hid_t obj, const char *name, int64_t value) { attr_write(obj, name, H5T_NATIVE_INT64, &value); }
void va_h5_attr_f64(hid_t obj, const char *name, double value) { attr_write(obj, name, H5T_NATIVE_DOUBLE, &value); }
