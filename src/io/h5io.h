/* h5io.h: input validation and row-sharded reads (HDF5, and the vector files of vecfile.h behind the
 * same va_input_t), and row-sharded HDF5 writes.
 * Each rank reads or writes only its own contiguous row block (a hyperslab). With parallel HDF5 and
 * io = collective, files are opened through MPI-IO and every transfer is collective (every rank calls
 * H5Dread/H5Dwrite the same number of times, with an empty selection when it has nothing left).
 * Without it (serial HDF5, or io = independent), reads open the file independently on every rank, and
 * rank 0 alone makes an output file and its objects (serial HDF5 allows one writer at a time); then every
 * rank at once writes its rows with pwrite into the datasets' storage, allocated when they were made. */
#ifndef VECANNEAL_H5IO_H
#define VECANNEAL_H5IO_H
#include <hdf5.h>
#include <stdint.h>

#include "core/config.h"
#include "io/vecfile.h" /* va_vecfile_t */

/* VA_DT_I32 comes only from .ivecs files (HDF5 integer datasets wider than a byte are refused). */
typedef enum { VA_DT_F32, VA_DT_F64, VA_DT_F16, VA_DT_U8, VA_DT_I8, VA_DT_I32 } va_dtype_t;

typedef struct {
  char file[VA_PATH_MAX], dataset[256]; /* dataset: empty for a vector file */
  int format;                           /* VA_INPUT_HDF5 (or VA_INPUT_AUTO: HDF5) or a vecfile.h format */
  va_vecfile_t vec;                     /* a vector file's layout */
  int64_t n, d;
  va_dtype_t dtype;
  int elem_size;
  int metric_hint; /* VA_METRIC_COSINE when the dataset or file says 'angular'/'cosine', else VA_METRIC_AUTO */
  int sparse;      /* chunked storage not all allocated (unwritten chunks read as the fill value): independent reads */
  uint64_t checksum; /* of the rows as read (the corpus' bytes for embedded rows); 0 until read */
} va_input_t;

/* What a read found besides the rows: the first global row holding NaN/Inf (-1: none) and the rows'
 * checksum (checksum.h, of the float32 values; summed over ranks by the caller: the same for any
 * rank count). */
typedef struct {
  int64_t bad_row;
  uint64_t checksum;
} va_read_result_t;

const char *va_dtype_name(va_dtype_t t);
/* Splits "FILE:DATASET" (the last ':' separates; DATASET defaults to /train). */
int va_split_spec(const char *spec, char *file, size_t flen, char *dset, size_t dlen);
/* The input's format and file: spec is FILE:DATASET for HDF5 (DATASET defaults to /train), FILE for a
 * vector file (vecfile.h); format is the input_format key (VA_INPUT_AUTO: by the file's extension,
 * and for other names HDF5 when the file has its signature). 0, or an exit code with err set: usage
 * (2) for a DATASET part given to a vector file, bad input (3) for a file of no format read here. */
int va_input_resolve(const char *spec, int format, va_input_t *in, char *err, size_t errlen);
/* The file an input spec names (for identity checks before the input is opened; spec itself when it
 * cannot be resolved). */
void va_input_file(const char *spec, int format, char *file, size_t len);
/* "FILE:DATASET" for HDF5, "FILE" for a vector file: how messages name the input. */
const char *va_input_label(const va_input_t *in, char *buf, size_t len);
/* Local (any one process): the validation below without MPI; returns 0 or an exit code with err set.
 * va_input_probe takes the format from the spec (input_format = auto). */
int va_input_probe(const char *spec, va_input_t *in, char *err, size_t errlen);
int va_input_probe_as(const char *spec, int format, va_input_t *in, char *err, size_t errlen);
/* Collective: rank 0 validates the input (HDF5: file, dataset, rank 2, supported type, n >= 1, d >= 1,
 * storage present and within the file; vector files: vecfile.h) and broadcasts the result; on failure
 * every rank exits with the code (VA_EXIT_INPUT, or VA_EXIT_USAGE for the spec) after rank 0 prints one
 * message. va_input_open takes the format from the spec. */
void va_input_open(const char *spec, va_input_t *in);
void va_input_open_as(const char *spec, int format, va_input_t *in);
/* Bytes of the staging buffer a read of rows rows in chunks of chunk_bytes holds besides the float32
 * rows (types other than float32, and the TEXMEX layout's per-row d between rows). */
double va_input_staging_bytes(const va_input_t *in, double chunk_bytes, int64_t rows);
/* This rank's contiguous row block of n rows. */
void va_shard_range(int64_t n, int rank, int nranks, int64_t *start, int64_t *count);
/* Collective: reads rows [start, start + count) as float32 into out (count x d), converting on load
 * through a staging buffer of at most chunk_bytes. Read failures (e.g. a truncated file) exit with
 * VA_EXIT_INPUT on every rank: agreed after independent reads, through va_abort_job inside a
 * collective one (its peers may wait in it). A stop request (stop.h) ends the read early and the job
 * at the stop point after it. Independent reads of raw rows (va_input_raw_offset) use pread on up to
 * `threads` threads; so do vector files, always independent (io_mode is for HDF5), and a TEXMEX row
 * whose d differs from the file's is bad input naming the file and the row. */
void va_input_read(const va_input_t *in, int64_t start, int64_t count, float *out, size_t chunk_bytes, int io_mode,
                   int threads, va_read_result_t *res);
/* The same read into buffers the caller hands out (the shard is never whole on the host): chunks of
 * `rows` rows, in row order, each read into buffer(ctx, local_row0) (room for its rows x d float32,
 * free to overwrite) and announced with filled(ctx, local_row0, nrows) before the next buffer is asked
 * for. */
typedef struct {
  int64_t rows;
  float *(*buffer)(void *ctx, int64_t local_row0);
  void (*filled)(void *ctx, int64_t local_row0, int64_t nrows);
  void *ctx;
} va_row_sink_t;
void va_input_read_into(const va_input_t *in, int64_t start, int64_t count, int io_mode, int threads,
                        va_read_result_t *res, const va_row_sink_t *sink);
/* Local: the file offset of the dataset's rows when an independent read takes them with pread (a
 * contiguous dataset, no external storage, its file type the memory type, the default driver; checked
 * on the first and last rows against H5Dread), else -1 (H5Dread). A .npy file: the end of its header;
 * a TEXMEX file: -1 (its rows are not one block). Vector files are always read with pread. */
int64_t va_input_raw_offset(const va_input_t *in);
/* Whether a transfer in io_mode is collective here (parallel HDF5 built in and asked for). */
int va_io_collective(int io_mode);

/* --- writing ------------------------------------------------------------------------------------ */
/* 'setup' creates datasets (va_h5_create_dataset) and attributes and writes the data every rank holds
 * identically (rank 0's copy is written); 'rows' writes this rank's own rows with va_h5_write_rows and
 * the block writers below, nothing else (without MPI-IO its file handle is read-only). Collective call. */
typedef void (*va_h5_setup_fn)(hid_t file, void *ctx);
typedef void (*va_h5_rows_fn)(hid_t file, void *ctx);
/* Collective: whether the file system holding path has room for about `bytes` more; 0, or an agreed
 * VA_EXIT_OUTPUT ("No space left on device": what is needed and what is free) printed by rank 0.
 * what names the file's role. */
int va_space_check(const char *what, const char *path, double bytes);
/* Writes path's temporary file (files.h: va_temp_name(path, ".partial"), claimed or not) and renames
 * it to path only when it is complete and reads back: creates the file, runs setup and rows as
 * described, closes, then, when the transfers went through MPI-IO, every rank reads back what it wrote
 * and compares checksums (an MPI-IO layer may drop a write without reporting it; HDF5's POSIX driver
 * reports every failed write itself). what names the file's role in messages; bytes is the
 * expected size, checked against the free space first. Returns 0, or VA_EXIT_OUTPUT agreed on every
 * rank (message printed once) when the file cannot be created, lacks room or does not read back. A
 * failure inside a write ends the job with VA_EXIT_OUTPUT and the system's reason (va_h5_scope).
 * Either way the temporary file is removed. */
int va_h5_write_file(const char *what, const char *path, double bytes, int io_mode, va_h5_setup_fn setup,
                     va_h5_rows_fn rows, void *ctx);
/* The same in two steps, for a caller that makes its rows while the file is open: va_h5_write_open
 * makes the file and runs setup (collective; 0, or VA_EXIT_OUTPUT agreed on every rank, the temporary
 * file removed); the caller then writes its rows into o->file as rows would, and va_h5_write_close
 * finishes and renames it (collective; as va_h5_write_file). Without MPI-IO (o->collective 0) the rows
 * are pwrites that need no MPI, so another thread of the caller's may make them, one thread at a time,
 * while the caller's own thread calls no HDF5. A rank whose file did not open for its rows has file -1,
 * writes none, and close reports why on every rank. */
typedef struct {
  hid_t file;     /* where the rows go (read-only without MPI-IO: rows are written by va_h5_write_rows), or -1 */
  int collective; /* the rows go through MPI-IO, every rank calling va_h5_write_rows equally often */
  char what[64], path[VA_PATH_MAX], tmp[VA_PATH_MAX + 64];
} va_h5_out_t;
int va_h5_write_open(va_h5_out_t *o, const char *what, const char *path, double bytes, int io_mode,
                     va_h5_setup_fn setup, void *ctx);
int va_h5_write_close(va_h5_out_t *o);
/* Inside setup: makes a dataset of an output file: contiguous, its storage allocated now and never
 * filled (every row gets written), so that rows can write into it without HDF5 (lcpl: H5P_DEFAULT or a
 * link creation list). Checked: a failure ends the job (VA_H5). */
hid_t va_h5_create_dataset(hid_t loc, const char *name, hid_t type, hid_t space, hid_t lcpl);
/* Inside setup: writes a whole dataset from rank 0's buffer (other ranks select nothing). */
void va_h5_write_whole(hid_t dset, hid_t memtype, const void *buf);
/* Inside rows: number of write rounds for local_rows in chunks of chunk_rows (max over ranks when
 * collective, so every rank calls va_h5_write_rows equally often). */
int64_t va_h5_row_rounds(int64_t local_rows, int64_t chunk_rows);
/* Inside rows: writes nrows x cols (cols = 1 for a 1-D dataset) at row0; nrows may be 0. */
void va_h5_write_rows(hid_t dset, hid_t memtype, int64_t row0, int64_t nrows, int64_t cols, const void *buf);
/* Inside rows: this rank's whole block of nrows rows (cols values, row_bytes bytes each) at row0, in
 * 16 MiB chunks (every rank calls H5Dwrite equally often when collective). */
void va_h5_write_block(hid_t dset, hid_t memtype, int64_t row0, int64_t nrows, int64_t cols, size_t row_bytes,
                       const void *buf);
/* The same for rows that are not in host memory: fetch(ctx, first, count, buf) puts this rank's rows
 * [first, first + count) (counted from 0 within its block) into buf before each chunk is written. */
typedef void (*va_h5_fetch_fn)(void *ctx, int64_t first, int64_t count, void *buf);
void va_h5_write_block_fetched(hid_t dset, hid_t memtype, int64_t row0, int64_t nrows, int64_t cols, size_t row_bytes,
                               va_h5_fetch_fn fetch, void *ctx);
/* A string attribute (fixed or variable length) into out; 0 when found. */
int va_h5_attr_read_str(hid_t obj, const char *name, char *out, size_t outlen);
/* Attribute helpers (scalar, on any object). */
void va_h5_attr_str(hid_t obj, const char *name, const char *value);
void va_h5_attr_i64(hid_t obj, const char *name, int64_t value);
void va_h5_attr_f64(hid_t obj, const char *name, double value);
/* IEEE binary16, little-endian: HDF5 1.10 has no predefined half type. Caller closes. */
hid_t va_h5_half_type(void);

/* binary16 <-> float32 (round to nearest even). */
float va_half_to_float(uint16_t h);
uint16_t va_float_to_half(float f);
#endif
