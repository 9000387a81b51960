/* test_read.c: the sharded HDF5 read into buffers a caller hands out (va_input_read_into, how a
 * CUDA job reads its rows straight into pinned staging) against the whole-shard read
 * (va_input_read) and the values written: every row of the rank's block delivered once, in order,
 * with the floats written, and the same first NaN/Inf row, for float32 and float16 data, independent
 * and (parallel HDF5) collective transfers, and buffers of several sizes, on however many ranks mpirun
 * gives (CTest: 1, 2, 3 and 4). Then the raw reads (pread on several threads, h5io.c): taken for a
 * contiguous native dataset (also one large enough to be split over threads), not for a chunked or a
 * big-endian one, and either way the values written, also in a file with a user block. A chunked
 * dataset whose last chunks were never written reads as its fill value (zeros) on every rank count and
 * transfer mode. The rows' checksum (h5io.h) is the same for both reads and, summed over ranks, for any
 * rank count. Rank 0 writes the file; a row count that does not divide evenly leaves the ranks unequal
 * blocks. The vector files of io/vecfile.h (.fvecs, .bvecs, .npy written here) go through the same two
 * reads with the same checks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/checksum.h"
#include "io/h5io.h"
#include "util/util.h"

#include "../check.h" /* failures, CHECK */

/* A sink that copies each delivered chunk to its place in a shard-sized array and checks the order (of
 * the rows each buffer is asked for, and of those announced). */
typedef struct {
  float *buf, *shard;
  int64_t d, next_row, calls, errors;
} sink_state_t;

static float *sink_buffer(void *ctx, int64_t local_row0) {
  sink_state_t *s = ctx;
  if (local_row0 != s->next_row) s->errors++;                       /* a buffer asked for other rows than come next */
  for (int64_t e = 0; e < (int64_t)s->d * 64; e++) s->buf[e] = NAN; /* a value the read must overwrite */
  return s->buf;
}

static void sink_filled(void *ctx, int64_t local_row0, int64_t nrows) {
  sink_state_t *s = ctx;
  if (local_row0 != s->next_row) s->errors++;
  memcpy(s->shard + local_row0 * s->d, s->buf, (size_t)(nrows * s->d) * sizeof(float));
  s->next_row = local_row0 + nrows;
  s->calls++;
}

/* Value e of the data written (before a NaN is put in, and before float16 rounding). */
static float value_at(int64_t e) { return (float)sin(0.37 * (double)e) * 3.0f + (float)(e % 7) * 0.125f; }

/* How the float32 dataset is stored (half = 0): contiguous little-endian, chunked, contiguous
 * big-endian, contiguous little-endian in a file with a 512-byte user block. */
enum { LAYOUT_PLAIN, LAYOUT_CHUNKED, LAYOUT_BIG_ENDIAN, LAYOUT_USERBLOCK, LAYOUT_SPARSE };
/* LAYOUT_SPARSE: chunked in 100 rows, only rows [0, SPARSE_WRITTEN) written (the last chunks never were). */
#define SPARSE_WRITTEN 900

static void write_file(const char *path, int64_t n, int64_t d, int half, int64_t nan_row, int layout) {
  if (va_proc.rank != 0) return;
  float *X = malloc((size_t)(n * d) * sizeof(float));
  for (int64_t i = 0; i < n * d; i++) X[i] = value_at(i);
  if (nan_row >= 0) X[nan_row * d + d / 2] = NAN;
  if (nan_row >= 0 && n > 100000) X[(n - 1000) * d] = INFINITY; /* a second bad row, in another piece of the check */
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (layout == LAYOUT_USERBLOCK) H5Pset_userblock(fcpl, 512);
  hsize_t dims[2] = {(hsize_t)n, (hsize_t)d}, chunk[2] = {(hsize_t)(n < 100 ? n : 100), (hsize_t)d};
  if (layout == LAYOUT_CHUNKED || layout == LAYOUT_SPARSE) H5Pset_chunk(dcpl, 2, chunk);
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  hid_t sp = H5Screate_simple(2, dims, NULL);
  hid_t ftype = half ? va_h5_half_type() : H5Tcopy(layout == LAYOUT_BIG_ENDIAN ? H5T_IEEE_F32BE : H5T_IEEE_F32LE);
  hid_t ds = H5Dcreate2(f, "/train", ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (half) {
    uint16_t *h = malloc((size_t)(n * d) * sizeof(uint16_t));
    for (int64_t i = 0; i < n * d; i++) h[i] = va_float_to_half(X[i]);
    H5Dwrite(ds, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, h);
    free(h);
  } else if (layout == LAYOUT_SPARSE) {
    hsize_t off[2] = {0, 0}, cnt[2] = {SPARSE_WRITTEN, (hsize_t)d};
    hid_t fs = H5Dget_space(ds), ms = H5Screate_simple(2, cnt, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL);
    H5Dwrite(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, X);
    H5Sclose(ms);
    H5Sclose(fs);
  } else {
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, X);
  }
  H5Dclose(ds);
  H5Tclose(ftype);
  H5Sclose(sp);
  H5Fclose(f);
  H5Pclose(dcpl);
  H5Pclose(fcpl);
  free(X);
}

/* Rows [row0, row0 + count) hold the values written (float16: as rounded), up to the first NaN row. */
static int64_t rows_not_written(const float *got, int64_t row0, int64_t count, int64_t d, int half, int64_t nan_row) {
  int64_t bad = 0;
  for (int64_t i = 0; i < count && row0 + i != nan_row; i++)
    for (int64_t t = 0; t < d; t++) {
      const float want =
          half ? va_half_to_float(va_float_to_half(value_at((row0 + i) * d + t))) : value_at((row0 + i) * d + t);
      bad += memcmp(&got[i * d + t], &want, sizeof want) != 0;
    }
  return bad;
}

static void read_case(const char *path, int64_t n, int64_t d, int half, int64_t nan_row, int io, int64_t sink_rows) {
  char spec[VA_PATH_MAX + 16];
  snprintf(spec, sizeof spec, "%s:/train", path);
  va_input_t in;
  va_input_open(spec, &in);
  int64_t row0, count;
  va_shard_range(in.n, va_proc.rank, va_proc.nranks, &row0, &count);
  float *whole = malloc((size_t)((count ? count : 1) * d) * sizeof(float)),
        *got = malloc((size_t)((count ? count : 1) * d) * sizeof(float));
  va_read_result_t res_whole, res_into;
  va_input_read(&in, row0, count, whole, (size_t)(5 * d * in.elem_size), io, 3, &res_whole); /* 5-row chunks */
  sink_state_t s = {malloc((size_t)(64 * d) * sizeof(float)), got, d, 0, 0, 0};
  va_row_sink_t sink = {sink_rows, sink_buffer, sink_filled, &s};
  va_input_read_into(&in, row0, count, io, 3, &res_into, &sink);
  const int64_t bad_whole = res_whole.bad_row, bad_into = res_into.bad_row;
  if (nan_row < 0) {
    /* The checksum: both reads alike, and over all ranks that of the whole dataset (as one rank sees it). */
    CHECK(res_whole.checksum == res_into.checksum, "%s io %d: checksums differ between the reads",
          half ? "float16" : "float32", io);
    uint64_t total = res_whole.checksum, want = 0;
    VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
    float *row = malloc((size_t)d * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
      for (int64_t t = 0; t < d; t++)
        row[t] = half ? va_half_to_float(va_float_to_half(value_at(i * d + t))) : value_at(i * d + t);
      want += va_rows_checksum(row, (size_t)d * sizeof(float), i, 1, 1);
    }
    free(row);
    CHECK(total == want, "%s io %d: the checksum summed over %d ranks is not the dataset's",
          half ? "float16" : "float32", io, va_proc.nranks);
  }
  const char *what = half ? "float16" : "float32";
  CHECK(rows_not_written(whole, row0, count, d, half, nan_row) == 0, "%s io %d: the rows read are not those written",
        what, io);
  CHECK(s.errors == 0, "%s io %d buffers of %lld rows: chunks out of order", what, io, (long long)sink_rows);
  CHECK(s.next_row == count, "%s io %d buffers of %lld rows: %lld of %lld rows delivered", what, io,
        (long long)sink_rows, (long long)s.next_row, (long long)count);
  CHECK(s.calls == (count + sink_rows - 1) / sink_rows, "%s: %lld buffers filled for %lld rows of %lld", what,
        (long long)s.calls, (long long)count, (long long)sink_rows);
  /* Rows from the NaN row on may differ once it is found (both reads stop checking); compare up to it. */
  int64_t upto = nan_row >= row0 && nan_row < row0 + count ? nan_row - row0 : count;
  CHECK(memcmp(whole, got, (size_t)(upto * d) * sizeof(float)) == 0,
        "%s io %d buffers of %lld rows: other floats than the whole-shard read", what, io, (long long)sink_rows);
  CHECK(bad_whole == bad_into, "%s io %d: first bad row %lld vs %lld", what, io, (long long)bad_whole,
        (long long)bad_into);
  int64_t want_bad = nan_row >= row0 && nan_row < row0 + count ? nan_row : -1;
  CHECK(bad_into == want_bad, "%s io %d: first bad row %lld, want %lld", what, io, (long long)bad_into,
        (long long)want_bad);
  free(s.buf);
  free(whole);
  free(got);
}

/* A float32 file in the given layout, read independently on 3 threads as a whole shard (chunks of 64
 * MiB) and through 64-row buffers: the values written and the first bad row of the shard (nan_row
 * >= 0: a NaN there, and on large files an Inf at row n - 1000 too); the raw read taken where it
 * applies (raw: 1 must, 0 must not, -1 either way). */
static void layout_case(const char *path, int64_t n, int64_t d, int layout, int raw, int64_t nan_row,
                        const char *what) {
  write_file(path, n, d, 0, nan_row, layout);
  VA_MPI(MPI_Barrier(MPI_COMM_WORLD));
  char spec[VA_PATH_MAX + 16];
  snprintf(spec, sizeof spec, "%s:/train", path);
  va_input_t in;
  va_input_open(spec, &in);
  const int64_t off = va_input_raw_offset(&in);
  CHECK(raw < 0 || (off >= 0) == raw, "%s: raw read %s, want %s", what, off >= 0 ? "taken" : "not taken",
        raw ? "taken" : "not taken");
  int64_t row0, count, bad = -1;
  va_read_result_t res;
  va_shard_range(in.n, va_proc.rank, va_proc.nranks, &row0, &count);
  float *whole = malloc((size_t)((count ? count : 1) * d) * sizeof(float)),
        *got = malloc((size_t)((count ? count : 1) * d) * sizeof(float));
  const int64_t inf_row = nan_row >= 0 && n > 100000 ? n - 1000 : -1;
  const int64_t want_bad = nan_row >= row0 && nan_row < row0 + count   ? nan_row
                           : inf_row >= row0 && inf_row < row0 + count ? inf_row
                                                                       : -1;
  va_input_read(&in, row0, count, whole, (size_t)64 << 20, VA_IO_INDEPENDENT, 3, &res);
  bad = res.bad_row;
  CHECK(bad == want_bad && rows_not_written(whole, row0, count, d, 0, want_bad) == 0,
        "%s: the whole-shard read is not the rows written (first bad row %lld, want %lld)", what, (long long)bad,
        (long long)want_bad);
  sink_state_t s = {malloc((size_t)(64 * d) * sizeof(float)), got, d, 0, 0, 0};
  va_row_sink_t sink = {64, sink_buffer, sink_filled, &s};
  va_input_read_into(&in, row0, count, VA_IO_INDEPENDENT, 3, &res, &sink);
  bad = res.bad_row;
  CHECK(s.errors == 0 && s.next_row == count && bad == want_bad &&
            rows_not_written(got, row0, count, d, 0, want_bad) == 0,
        "%s: the buffered read is not the rows written", what);
  if (va_proc.rank == 0)
    printf("%s: raw read %s (offset %lld)\n", what, off >= 0 ? "taken" : "not taken", (long long)off);
  free(s.buf);
  free(whole);
  free(got);
  VA_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* A chunked dataset whose last chunks were never written: rows past SPARSE_WRITTEN read as zeros (the
 * fill value), in both transfer modes (a collective MPI-IO read of such a selection fails in HDF5 1.10,
 * so such a dataset is read independently). */
static void sparse_case(const char *path, int64_t n, int64_t d) {
  write_file(path, n, d, 0, -1, LAYOUT_SPARSE);
  VA_MPI(MPI_Barrier(MPI_COMM_WORLD));
  char spec[VA_PATH_MAX + 16];
  snprintf(spec, sizeof spec, "%s:/train", path);
  va_input_t in;
  va_input_open(spec, &in);
  CHECK(in.sparse, "a dataset with unwritten chunks is not marked sparse");
  int64_t row0, count;
  va_shard_range(in.n, va_proc.rank, va_proc.nranks, &row0, &count);
  float *got = malloc((size_t)((count ? count : 1) * d) * sizeof(float));
  const int ios[] = {VA_IO_INDEPENDENT, VA_IO_COLLECTIVE};
  for (int a = 0; a < 2; a++) {
    va_read_result_t res;
    va_input_read(&in, row0, count, got, (size_t)(7 * d * 4), ios[a], 2, &res);
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; i++)
      for (int64_t t = 0; t < d; t++) {
        const float want = row0 + i < SPARSE_WRITTEN ? value_at((row0 + i) * d + t) : 0.0f;
        wrong += got[i * d + t] != want;
      }
    CHECK(wrong == 0 && res.bad_row == -1,
          "unwritten chunks, io %d: %lld values are not those written or the fill value", ios[a], (long long)wrong);
  }
  free(got);
  VA_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* --- vector files: value e of a file of the given format, as the read must deliver it --------------- */
static float vector_value(int format, int64_t e) {
  if (format == VA_INPUT_BVECS) return (float)(e % 251);
  if (format == VA_INPUT_NPY) return va_half_to_float(va_float_to_half(value_at(e))); /* stored as float16 */
  return value_at(e);
}

/* Rank 0 writes path: .fvecs (float32 rows, each after its int32 d), .bvecs (uint8 rows after their d)
 * or .npy (float16, a version 1.0 header as numpy writes it); a NaN at row nan_row (float formats). */
static void write_vector_file(const char *path, int format, int64_t n, int64_t d, int64_t nan_row) {
  if (va_proc.rank != 0) return;
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (format == VA_INPUT_NPY) {
    char dict[128];
    int len = snprintf(dict, sizeof dict, "{'descr': '<f2', 'fortran_order': False, 'shape': (%lld, %lld), }",
                       (long long)n, (long long)d);
    const int total = (10 + len + 1 + 63) / 64 * 64; /* magic, version, length, dict, padding, '\n' */
    const unsigned short hlen = (unsigned short)(total - 10);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fwrite(&hlen, 2, 1, f);
    fwrite(dict, 1, (size_t)len, f);
    for (int i = 10 + len; i < total - 1; i++) fputc(' ', f);
    fputc('\n', f);
  }
  const int32_t d32 = (int32_t)d;
  for (int64_t i = 0; i < n; i++) {
    if (format != VA_INPUT_NPY) fwrite(&d32, 4, 1, f);
    for (int64_t t = 0; t < d; t++) {
      float v = vector_value(format, i * d + t);
      if (i == nan_row && t == d / 2 && format != VA_INPUT_BVECS) v = NAN;
      if (format == VA_INPUT_FVECS) fwrite(&v, 4, 1, f);
      else if (format == VA_INPUT_BVECS) fputc((int)v, f);
      else {
        const uint16_t h = va_float_to_half(v);
        fwrite(&h, 2, 1, f);
      }
    }
  }
  if (fclose(f) != 0) {
    perror(path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/* A vector file read whole-shard (5-row chunks) and through 1-, 7- and 64-row buffers on 3 threads: the
 * values written, the first NaN row, the same checksum both ways and, summed over ranks, the dataset's. */
static void vector_case(const char *path, int format, int64_t n, int64_t d, int64_t nan_row) {
  write_vector_file(path, format, n, d, nan_row);
  VA_MPI(MPI_Barrier(MPI_COMM_WORLD));
  const char *what = va_input_format_name(format);
  va_input_t in;
  va_input_open(path, &in);
  CHECK(in.format == format && in.n == n && in.d == d, "%s: opened as format %d, %lld x %lld", what, in.format,
        (long long)in.n, (long long)in.d);
  int64_t row0, count;
  va_shard_range(in.n, va_proc.rank, va_proc.nranks, &row0, &count);
  float *whole = malloc((size_t)((count ? count : 1) * d) * sizeof(float)),
        *got = malloc((size_t)((count ? count : 1) * d) * sizeof(float));
  va_read_result_t res_whole, res_into;
  va_input_read(&in, row0, count, whole, (size_t)(5 * d * in.elem_size), VA_IO_COLLECTIVE, 3, &res_whole);
  const int64_t want_bad = nan_row >= row0 && nan_row < row0 + count ? nan_row : -1;
  const int64_t upto = want_bad >= 0 ? want_bad - row0 : count;
  int64_t wrong = 0;
  for (int64_t e = 0; e < upto * d; e++) {
    const float want = vector_value(format, row0 * d + e);
    wrong += memcmp(&whole[e], &want, sizeof want) != 0;
  }
  CHECK(wrong == 0 && res_whole.bad_row == want_bad, "%s: %lld values are not those written (first bad row %lld)", what,
        (long long)wrong, (long long)res_whole.bad_row);
  if (nan_row < 0) {
    uint64_t total = res_whole.checksum, want = 0;
    VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
    float *row = malloc((size_t)d * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
      for (int64_t t = 0; t < d; t++) row[t] = vector_value(format, i * d + t);
      want += va_rows_checksum(row, (size_t)d * sizeof(float), i, 1, 1);
    }
    free(row);
    CHECK(total == want, "%s: the checksum summed over %d ranks is not the dataset's", what, va_proc.nranks);
  }
  const int64_t sink_rows[] = {1, 7, 64};
  for (int b = 0; b < 3; b++) {
    sink_state_t st = {malloc((size_t)(64 * d) * sizeof(float)), got, d, 0, 0, 0};
    va_row_sink_t sink = {sink_rows[b], sink_buffer, sink_filled, &st};
    va_input_read_into(&in, row0, count, VA_IO_COLLECTIVE, 3, &res_into, &sink);
    CHECK(st.errors == 0 && st.next_row == count, "%s, buffers of %lld rows: %lld of %lld rows delivered in order",
          what, (long long)sink_rows[b], (long long)st.next_row, (long long)count);
    CHECK(memcmp(whole, got, (size_t)(upto * d) * sizeof(float)) == 0 && res_into.bad_row == res_whole.bad_row &&
              (nan_row >= 0 || res_into.checksum == res_whole.checksum),
          "%s, buffers of %lld rows: other floats, bad row or checksum than the whole-shard read", what,
          (long long)sink_rows[b]);
    free(st.buf);
  }
  free(whole);
  free(got);
  VA_MPI(MPI_Barrier(MPI_COMM_WORLD));
  if (va_proc.rank == 0) remove(path);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  va_proc_init();
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char path[VA_PATH_MAX];
  snprintf(path, sizeof path, "%s/va_test_read_%d.h5", dir, (int)getpid());
  VA_MPI(MPI_Bcast(path, (int)sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD));
  const int64_t n = 1003, d = 37;
  for (int half = 0; half < 2; half++)
    for (int with_nan = 0; with_nan < 2; with_nan++) {
      const int64_t nan_row = with_nan ? 611 : -1;
      write_file(path, n, d, half, nan_row, LAYOUT_PLAIN);
      VA_MPI(MPI_Barrier(MPI_COMM_WORLD));
      const int ios[] = {VA_IO_INDEPENDENT, VA_IO_COLLECTIVE};
      const int64_t sink_rows[] = {1, 7, 64};
      for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++) read_case(path, n, d, half, nan_row, ios[a], sink_rows[b]);
      VA_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
  /* raw reads: a little-endian host reads little-endian float32 raw */
  const uint32_t one = 1;
  const int little = *(const uint8_t *)&one == 1;
  layout_case(path, n, d, LAYOUT_PLAIN, little, -1, "contiguous float32");
  layout_case(path, 480000, d, LAYOUT_PLAIN, little, -1, "contiguous float32, 71 MB (pieces on several threads)");
  layout_case(path, 480000, d, LAYOUT_PLAIN, little, 400001, "the same with a NaN row and an Inf row");
  layout_case(path, n, d, LAYOUT_CHUNKED, 0, -1, "chunked float32");
  layout_case(path, n, d, LAYOUT_BIG_ENDIAN, !little, -1, "big-endian float32");
  layout_case(path, n, d, LAYOUT_USERBLOCK, -1, -1, "float32 after a 512-byte user block");
  sparse_case(path, n, d);
  if (va_proc.rank == 0) remove(path);
  static const struct {
    int format;
    const char *ext;
  } vector_formats[] = {{VA_INPUT_FVECS, "fvecs"}, {VA_INPUT_BVECS, "bvecs"}, {VA_INPUT_NPY, "npy"}};
  for (int v = 0; v < 3; v++)
    for (int with_nan = 0; with_nan < 2; with_nan++) {
      if (with_nan && vector_formats[v].format == VA_INPUT_BVECS) continue; /* integers are finite */
      char vpath[VA_PATH_MAX + 16];
      snprintf(vpath, sizeof vpath, "%.*s.%s", (int)strlen(path) - 3, path, vector_formats[v].ext);
      vector_case(vpath, vector_formats[v].format, n, d, with_nan ? 611 : -1);
    }
  int total = 0;
  VA_MPI(MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (va_proc.rank == 0)
    printf("%s: %d failure(s) over %d rank(s) (float32 and float16, with and without a NaN row, independent and %s "
           "reads; .fvecs, .bvecs and .npy files)\n",
           total ? "FAILED" : "PASSED", total, va_proc.nranks,
           va_io_collective(VA_IO_COLLECTIVE) ? "collective" : "(serial HDF5) independent");
  MPI_Finalize();
  return total ? 1 : 0;
}
