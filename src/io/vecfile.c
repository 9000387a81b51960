/* vecfile.c: TEXMEX (.fvecs, .bvecs, .ivecs) and NumPy .npy files as raw rows: format by name or by
 * signature, header and size validation, and row reads with pread (see vecfile.h). */
#define _GNU_SOURCE
#include "io/vecfile.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h" /* VA_INPUT_* */
#include "util/util.h"   /* VA_EXIT_INPUT */

const char *va_input_format_name(int format) {
  static const char *const names[] = {"auto", "hdf5", "fvecs", "bvecs", "ivecs", "npy"};
  return format >= 0 && format <= VA_INPUT_NPY ? names[format] : "unknown";
}

int va_vecfile_is_vector_format(int format) { return format >= VA_INPUT_FVECS && format <= VA_INPUT_NPY; }

int va_vecfile_format_of(const char *path) {
  static const struct {
    const char *ext;
    int format;
  } exts[] = {{".h5", VA_INPUT_HDF5},     {".hdf5", VA_INPUT_HDF5},   {".he5", VA_INPUT_HDF5},
              {".hdf", VA_INPUT_HDF5},    {".fvecs", VA_INPUT_FVECS}, {".bvecs", VA_INPUT_BVECS},
              {".ivecs", VA_INPUT_IVECS}, {".npy", VA_INPUT_NPY}};
  const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
  if (!dot || (slash && dot < slash)) return VA_INPUT_AUTO;
  for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
    if (!strcasecmp(dot, exts[i].ext)) return exts[i].format;
  return VA_INPUT_AUTO;
}

static const char NPY_MAGIC[6] = {(char)0x93, 'N', 'U', 'M', 'P', 'Y'};

int va_vecfile_sniff(const char *path) {
  static const char hdf5_sig[8] = {(char)0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  int fd = open(path, O_RDONLY);
  if (fd < 0) return VA_INPUT_AUTO;
  struct stat st;
  int format = VA_INPUT_AUTO;
  char head[8];
  if (fstat(fd, &st) == 0 && pread(fd, head, 8, 0) == 8) {
    if (!memcmp(head, NPY_MAGIC, 6)) format = VA_INPUT_NPY;
    /* HDF5's superblock sits at 0 or, after a user block, at 512, 1024, 2048, ... */
    for (int64_t off = 0; format == VA_INPUT_AUTO && off + 8 <= (int64_t)st.st_size; off = off ? 2 * off : 512)
      if (pread(fd, head, 8, (off_t)off) == 8 && !memcmp(head, hdf5_sig, 8)) format = VA_INPUT_HDF5;
  }
  close(fd);
  return format;
}

/* --- TEXMEX ------------------------------------------------------------------------------------------- */

/* Row r's own d (little-endian int32, as this host holds it: see host_is_little_endian). */
static int read_row_d(int fd, int64_t off, int32_t *d) {
  ssize_t r;
  do r = pread(fd, d, 4, (off_t)off);
  while (r < 0 && errno == EINTR);
  if (r == 4) return 0;
  if (r >= 0) errno = 0; /* the file ends there */
  return -1;
}

static int host_is_little_endian(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

static int probe_texmex(const char *file, int fd, int64_t size, int format, va_vecfile_t *vf, char *err,
                        size_t errlen) {
  const char *ext = va_input_format_name(format);
  vf->kind = format == VA_INPUT_FVECS ? 'f' : format == VA_INPUT_BVECS ? 'u' : 'i';
  vf->elem = format == VA_INPUT_BVECS ? 1 : 4;
  vf->offset = 0;
  vf->lead = 4;
  if (size == 0) {
    snprintf(err, errlen, "input file '%s' is empty: a .%s file holds at least one vector", file, ext);
    return VA_EXIT_INPUT;
  }
  int32_t d0;
  if (read_row_d(fd, 0, &d0) != 0) {
    snprintf(err, errlen, "input file '%s' is truncated: %lld bytes, shorter than the first row's dimension (4 bytes)",
             file, (long long)size);
    return VA_EXIT_INPUT;
  }
  if (d0 <= 0) {
    snprintf(err, errlen,
             "input file '%s' starts with dimension %d; every row of a .%s file starts with its dimension, a positive "
             "little-endian int32 (damaged, or not a .%s file?)",
             file, (int)d0, ext, ext);
    return VA_EXIT_INPUT;
  }
  vf->d = d0;
  vf->stride = 4 + vf->d * vf->elem;
  if (size < vf->stride) {
    snprintf(err, errlen,
             "input file '%s' is shorter (%lld bytes) than one row of the dimension it starts with, %lld (4 + %lld x "
             "%d bytes): truncated, or not a .%s file?",
             file, (long long)size, (long long)vf->d, (long long)vf->d, vf->elem, ext);
    return VA_EXIT_INPUT;
  }
  if (size % vf->stride != 0) {
    snprintf(err, errlen,
             "input file '%s' is truncated or damaged: %lld bytes is not a whole number of rows of dimension %lld "
             "(4 + %lld x %d = %lld bytes each; %lld bytes are left over after %lld rows)",
             file, (long long)size, (long long)vf->d, (long long)vf->d, vf->elem, (long long)vf->stride,
             (long long)(size % vf->stride), (long long)(size / vf->stride));
    return VA_EXIT_INPUT;
  }
  vf->n = size / vf->stride;
  int32_t dl;
  if (read_row_d(fd, (vf->n - 1) * vf->stride, &dl) != 0) {
    snprintf(err, errlen, "input file '%s': reading its last row failed: %s", file,
             errno ? strerror(errno) : "the file ends before it");
    return VA_EXIT_INPUT;
  }
  if (dl != d0) {
    snprintf(err, errlen,
             "input file '%s': row %lld has dimension %d, row 0 has %d; every row of a .%s file must have the same "
             "(damaged file?)",
             file, (long long)(vf->n - 1), (int)dl, (int)d0, ext);
    return VA_EXIT_INPUT;
  }
  return 0;
}

/* --- .npy --------------------------------------------------------------------------------------------- */

/* The value after 'key': in the header's dict (a Python literal), or NULL when the key is absent. */
static const char *npy_value(const char *hdr, const char *key) {
  char q1[64], q2[64];
  snprintf(q1, sizeof q1, "'%s'", key);
  snprintf(q2, sizeof q2, "\"%s\"", key);
  const char *p = strstr(hdr, q1);
  if (!p) p = strstr(hdr, q2);
  if (!p) return NULL;
  p += strlen(q1);
  while (isspace((unsigned char)*p)) p++;
  if (*p != ':') return NULL;
  p++;
  while (isspace((unsigned char)*p)) p++;
  return p;
}

/* The header's shape tuple: its first 8 sizes into dims; the number of dimensions (numpy writes up to 64,
 * each counted so that the message names them), or -1 when malformed. */
static int npy_shape(const char *v, int64_t *dims, char *text, size_t textlen) {
  if (!v || *v != '(') return -1;
  const char *end = strchr(v, ')');
  if (!end) return -1;
  snprintf(text, textlen, "%.*s", (int)(end - v + 1), v);
  int nd = 0;
  for (const char *p = v + 1; p < end;) {
    while (p < end && (isspace((unsigned char)*p) || *p == ',')) p++;
    if (p >= end) break;
    char *q;
    errno = 0;
    long long x = strtoll(p, &q, 10);
    if (q == p || errno || x < 0) return -1;
    /* numpy writes Python ints; a 'L' suffix comes from Python 2 */
    if (*q == 'L') q++;
    if (nd < 8) dims[nd] = x;
    nd++;
    p = q;
  }
  return nd;
}

static int probe_npy(const char *file, int fd, int64_t size, va_vecfile_t *vf, char *err, size_t errlen) {
  unsigned char pre[12];
  ssize_t got = pread(fd, pre, sizeof pre, 0);
  if (got < 0) {
    snprintf(err, errlen, "input file '%s': reading its header failed: %s", file, strerror(errno));
    return VA_EXIT_INPUT;
  }
  if (got < 10 || memcmp(pre, NPY_MAGIC, 6) != 0) {
    snprintf(err, errlen,
             "input file '%s' is not a NumPy .npy file (it does not start with \\x93NUMPY); write it with "
             "numpy.save, or name it by its format",
             file);
    return VA_EXIT_INPUT;
  }
  const int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3 || minor != 0) {
    snprintf(err, errlen, "input file '%s' is .npy format version %d.%d; vecanneal reads versions 1.0, 2.0 and 3.0",
             file, major, minor);
    return VA_EXIT_INPUT;
  }
  int64_t hlen, hoff;
  if (major == 1) {
    hlen = pre[8] | (int64_t)pre[9] << 8;
    hoff = 10;
  } else {
    if (got < 12) {
      snprintf(err, errlen, "input file '%s' is truncated: its .npy header ends after %lld bytes", file,
               (long long)got);
      return VA_EXIT_INPUT;
    }
    hlen = pre[8] | (int64_t)pre[9] << 8 | (int64_t)pre[10] << 16 | (int64_t)pre[11] << 24;
    hoff = 12;
  }
  /* numpy refuses headers over 10000 bytes by default; a larger one is no array header. */
  if (hlen > (1 << 20) || hoff + hlen > size) {
    snprintf(err, errlen,
             "input file '%s' is truncated or damaged: its .npy header of %lld bytes does not fit the file", file,
             (long long)hlen);
    return VA_EXIT_INPUT;
  }
  char *hdr = malloc((size_t)hlen + 1);
  if (!hdr) {
    snprintf(err, errlen, "input file '%s': no memory for its .npy header", file);
    return VA_EXIT_INPUT;
  }
  int rc = 0;
  errno = 0;
  if (pread(fd, hdr, (size_t)hlen, (off_t)hoff) != (ssize_t)hlen) {
    snprintf(err, errlen, "input file '%s': reading its .npy header failed: %s", file,
             errno ? strerror(errno) : "the file ends before it");
    free(hdr);
    return VA_EXIT_INPUT;
  }
  hdr[hlen] = 0;
  for (char *p = hdr; *p; p++)
    if (*p == '\n') *p = ' ';
  const char *dv = npy_value(hdr, "descr"), *fv = npy_value(hdr, "fortran_order"), *sv = npy_value(hdr, "shape");
  char descr[64] = "", shape_text[256] = "";
  int64_t dims[8];
  const int nd = npy_shape(sv, dims, shape_text, sizeof shape_text);
  if (dv && (*dv == '\'' || *dv == '"')) {
    const char *end = strchr(dv + 1, *dv);
    if (end) snprintf(descr, sizeof descr, "%.*s", (int)(end - dv - 1), dv + 1);
  }
  if (!fv || nd < 0 || (!descr[0] && !(dv && *dv == '['))) {
    snprintf(err, errlen,
             "input file '%s': its .npy header is damaged (no 'descr', 'fortran_order' and 'shape' found in '%.200s')",
             file, hdr);
    rc = VA_EXIT_INPUT;
    goto done;
  }
  if (!strncmp(fv, "True", 4)) {
    snprintf(err, errlen,
             "input file '%s' holds a Fortran-order (column-major) array; vecanneal reads C-order rows: save "
             "np.ascontiguousarray(x) instead",
             file);
    rc = VA_EXIT_INPUT;
    goto done;
  }
  if (strncmp(fv, "False", 5)) {
    snprintf(err, errlen, "input file '%s': its .npy header is damaged (fortran_order is neither True nor False)",
             file);
    rc = VA_EXIT_INPUT;
    goto done;
  }
  /* Little-endian ('<') or, for one byte, any order ('|', as numpy writes it). */
  static const struct {
    const char *code;
    char kind;
    int elem;
  } types[] = {{"f4", 'f', 4}, {"f2", 'f', 2}, {"f8", 'f', 8}, {"u1", 'u', 1}, {"i1", 'i', 1}};
  int t = -1;
  for (int i = 0; i < (int)(sizeof types / sizeof types[0]) && descr[0]; i++)
    if (!strcmp(descr + 1, types[i].code)) t = i;
  const int order_ok = t >= 0 && (descr[0] == '<' || (types[t].elem == 1 && (descr[0] == '|' || descr[0] == '>')));
  if (t >= 0 && descr[0] == '>' && types[t].elem > 1) {
    snprintf(err, errlen,
             "input file '%s' holds big-endian values ('%s'); vecanneal reads little-endian ones: save "
             "x.astype('<%s') instead",
             file, descr, types[t].code);
    rc = VA_EXIT_INPUT;
    goto done;
  }
  if (!order_ok) {
    snprintf(err, errlen,
             "input file '%s' holds dtype %s%s%s; vecanneal reads float32 '<f4', float16 '<f2', float64 '<f8', uint8 "
             "'|u1' and int8 '|i1': save np.ascontiguousarray(x, dtype=np.float32) instead",
             file, descr[0] ? "'" : "", descr[0] ? descr : "of several fields (a structured array)",
             descr[0] ? "'" : "");
    rc = VA_EXIT_INPUT;
    goto done;
  }
  if (nd != 2) {
    snprintf(err, errlen,
             "input file '%s' holds an array of shape %s (%d dimension(s)); vecanneal reads a 2-D array (rows x "
             "dims): save x.reshape(len(x), -1) or the rows you mean",
             file, shape_text, nd);
    rc = VA_EXIT_INPUT;
    goto done;
  }
  vf->n = dims[0];
  vf->d = dims[1];
  vf->kind = types[t].kind;
  vf->elem = types[t].elem;
  vf->offset = hoff + hlen;
  vf->lead = 0;
  if (vf->n < 1 || vf->d < 1) {
    snprintf(err, errlen, "input file '%s' is empty (%lld x %lld)", file, (long long)vf->n, (long long)vf->d);
    rc = VA_EXIT_INPUT;
    goto done;
  }
  /* In double first: a damaged shape may not fit int64; one that fits the file does. */
  const double need = (double)vf->n * (double)vf->d * vf->elem, have = (double)(size - vf->offset);
  if (need <= have) vf->stride = vf->d * vf->elem;
  if (need > have) {
    snprintf(err, errlen,
             "input file '%s' is truncated: its header says %lld x %lld '%s' (%.0f bytes after the %lld-byte header), "
             "the file holds %.0f",
             file, (long long)vf->n, (long long)vf->d, descr, need, (long long)vf->offset, have);
    rc = VA_EXIT_INPUT;
  } else if (need < have) {
    snprintf(err, errlen,
             "input file '%s' has %.0f bytes after the %lld x %lld '%s' array its header describes (several arrays "
             "in one file? write one with numpy.save)",
             file, have - need, (long long)vf->n, (long long)vf->d, descr);
    rc = VA_EXIT_INPUT;
  }
done:
  free(hdr);
  return rc;
}

int va_vecfile_probe(const char *file, int format, va_vecfile_t *vf, char *err, size_t errlen) {
  memset(vf, 0, sizeof *vf);
  vf->format = format;
  if (!host_is_little_endian()) {
    snprintf(err, errlen, "input file '%s': .%s files are read on little-endian hosts only; convert it to HDF5", file,
             va_input_format_name(format));
    return VA_EXIT_INPUT;
  }
  int fd = open(file, O_RDONLY);
  if (fd < 0) {
    snprintf(err, errlen, "input file '%s': %s", file, strerror(errno));
    return VA_EXIT_INPUT;
  }
  struct stat st;
  int rc;
  if (fstat(fd, &st) != 0) {
    snprintf(err, errlen, "input file '%s': %s", file, strerror(errno));
    rc = VA_EXIT_INPUT;
  } else if (format == VA_INPUT_NPY) rc = probe_npy(file, fd, (int64_t)st.st_size, vf, err, errlen);
  else rc = probe_texmex(file, fd, (int64_t)st.st_size, format, vf, err, errlen);
  close(fd);
  return rc;
}

int va_pread_threads(int fd, void *buf, size_t bytes, int64_t off, int threads) {
  int64_t pieces = (int64_t)(bytes >> 20);
  if (pieces > threads) pieces = threads;
  if (pieces < 1) pieces = 1;
  const size_t per = (bytes + (size_t)pieces - 1) / (size_t)pieces;
  int bad = 0, why = 0;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads((int)pieces) schedule(static) reduction(| : bad) reduction(max : why)
#endif
  for (int64_t p = 0; p < pieces; p++) {
    size_t lo = (size_t)p * per, hi = lo + per < bytes ? lo + per : bytes;
    while (lo < hi) {
      ssize_t r = pread(fd, (char *)buf + lo, hi - lo, (off_t)(off + (int64_t)lo));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        if (r < 0 && errno > why) why = errno; /* 0: the file ended */
        bad = 1;
        break;
      }
      lo += (size_t)r;
    }
  }
  errno = why;
  return bad ? -1 : 0;
}

int va_vecfile_read(const va_vecfile_t *vf, int fd, const char *file, int64_t row0, int64_t nrows, void *raw,
                    void *dense, int threads, char *err, size_t errlen) {
  if (nrows <= 0) return 0;
  if (va_pread_threads(fd, raw, (size_t)(nrows * vf->stride), vf->offset + row0 * vf->stride, threads) != 0) {
    snprintf(err, errlen, "reading rows %lld..%lld of '%s' failed: %s", (long long)row0, (long long)(row0 + nrows - 1),
             file, errno ? strerror(errno) : "the file ends before them (truncated while the job ran?)");
    return VA_EXIT_INPUT;
  }
  if (!vf->lead) {
    if (raw != dense) memcpy(dense, raw, (size_t)(nrows * vf->stride));
    return 0;
  }
  /* Packs the components row by row, in place or not: row i lands at i * row_bytes, at or before its
   * record's start i * stride, so no record is overwritten before its d is checked and moved. */
  const size_t row_bytes = (size_t)(vf->d * vf->elem);
  for (int64_t i = 0; i < nrows; i++) {
    const char *rec = (const char *)raw + i * vf->stride;
    int32_t d;
    memcpy(&d, rec, 4);
    if (d != vf->d) {
      snprintf(err, errlen,
               "input file '%s': row %lld has dimension %d, row 0 has %lld; every row of a .%s file must have the "
               "same (damaged file?)",
               file, (long long)(row0 + i), (int)d, (long long)vf->d, va_input_format_name(vf->format));
      return VA_EXIT_INPUT;
    }
    memmove((char *)dense + (size_t)i * row_bytes, rec + vf->lead, row_bytes);
  }
  return 0;
}
