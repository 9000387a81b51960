/* vecfile.h: the vector files that are not HDF5, read as raw rows at known offsets: the TEXMEX layout
 * (.fvecs, .bvecs, .ivecs: every row an int32 d, then d components) and NumPy's .npy (a header, then a
 * C-order array). h5io.c puts them behind va_input_t (probe, sharded reads) with HDF5; this module
 * knows their layouts and nothing of MPI. Every value is little-endian. */
#ifndef VECANNEAL_VECFILE_H
#define VECANNEAL_VECFILE_H
#include <stddef.h>
#include <stdint.h>

/* Where a file's rows lie and what they hold. Row r's record starts at offset + r * stride; its d
 * components (elem bytes each, of kind 'f' IEEE float, 'u' unsigned or 'i' signed integer) start lead
 * bytes into it (TEXMEX: 4, the row's own d; .npy: 0, stride = d * elem). */
typedef struct {
  int format; /* VA_INPUT_FVECS, VA_INPUT_BVECS, VA_INPUT_IVECS or VA_INPUT_NPY (core/config.h) */
  int64_t n, d;
  char kind;
  int elem;
  int64_t offset, stride, lead;
} va_vecfile_t;

/* The format a file name says by its extension (case-insensitive): VA_INPUT_HDF5 for .h5, .hdf5, .he5
 * and .hdf, a vector format for .fvecs, .bvecs, .ivecs and .npy, VA_INPUT_AUTO for anything else. */
int va_vecfile_format_of(const char *path);
/* The format the first bytes of a file show (the HDF5 signature at 0, 512, 1024, ..., the .npy magic),
 * VA_INPUT_AUTO when neither or unreadable. TEXMEX files have no signature. */
int va_vecfile_sniff(const char *path);
/* The name of an input_format value ("hdf5", "fvecs", ...). */
const char *va_input_format_name(int format);
/* Whether format is one of this module's (TEXMEX or .npy). */
int va_vecfile_is_vector_format(int format);

/* Local: validates file as format (size, header, shape, element type, first and last rows' d) and fills
 * vf; 0, or VA_EXIT_INPUT with err naming the file, what was found and the fix. */
int va_vecfile_probe(const char *file, int format, va_vecfile_t *vf, char *err, size_t errlen);
/* Local: rows [row0, row0 + nrows) of fd (the file named file) into dense (nrows x d components, packed),
 * read with va_pread_threads into raw (room for nrows * stride bytes; may be dense itself, and must be
 * when stride is d * elem). TEXMEX rows are checked to carry the file's d. 0, or VA_EXIT_INPUT with err
 * naming the file and the first row that failed. */
int va_vecfile_read(const va_vecfile_t *vf, int fd, const char *file, int64_t row0, int64_t nrows, void *raw,
                    void *dense, int threads, char *err, size_t errlen);
/* bytes from fd at off into buf, in pieces of at least 1 MiB on up to `threads` threads; 0, or -1 with
 * errno set when a read fails, or with errno 0 when the file ends before bytes are read. */
int va_pread_threads(int fd, void *buf, size_t bytes, int64_t off, int threads);
#endif
