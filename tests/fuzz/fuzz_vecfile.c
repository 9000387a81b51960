/* fuzz_vecfile.c: libFuzzer harness of the vector-file header parsers (src/io/vecfile.c): the .npy header
 * (magic, version, header length, the dict's descr, fortran_order and shape) and the TEXMEX layout
 * (.fvecs, .bvecs, .ivecs: the first and last rows' int32 d against the file size).
 * The input bytes become one file, probed as each of the four formats (va_vecfile_probe), as the input
 * check does on rank 0; va_vecfile_sniff reads its first bytes. Contract checked besides ASan/UBSan:
 * a failure is VA_EXIT_INPUT with a message naming the file; a success describes n >= 1 rows of d >= 1
 * components of a supported element type whose records fill the file exactly (offset + n * stride is its
 * size), and every row then reads back (va_vecfile_read, in two blocks, into a separate buffer and in
 * place, with the same components), except that a TEXMEX row between the first and the last may carry
 * another d, which the read reports as VA_EXIT_INPUT with a message. */
#include "fuzz_common.h"

#include "core/config.h" /* VA_INPUT_* */
#include "io/vecfile.h"
#include "util/util.h" /* VA_EXIT_INPUT */

/* Reads rows [0, n) of vf in two blocks (split at n / 2) into dense; raw is dense when in_place. Returns
 * read's result; err holds its message. */
static int read_all(const va_vecfile_t *vf, int fd, const char *path, char *raw, char *dense, int in_place, char *err,
                    size_t errlen) {
  const int64_t half = vf->n / 2, row_bytes = vf->d * vf->elem;
  const int64_t blocks[2][2] = {{0, half}, {half, vf->n - half}};
  for (int b = 0; b < 2; b++) {
    char *out = dense + blocks[b][0] * row_bytes;
    int rc = va_vecfile_read(vf, fd, path, blocks[b][0], blocks[b][1], in_place ? out : raw, out, 1, err, errlen);
    if (rc) return rc;
  }
  return 0;
}

static void probe_as(const char *path, size_t size, int format) {
  va_vecfile_t vf;
  char err[8192] = "";
  int rc = va_vecfile_probe(path, format, &vf, err, sizeof err);
  const char *name = va_input_format_name(format);
  if (rc) {
    FZ_CHECK(rc == VA_EXIT_INPUT, "%s: rc %d (%s)", name, rc, err);
    FZ_CHECK(err[0], "%s: failure without a message", name);
    FZ_CHECK(strstr(err, path), "%s: message does not name the file: %s", name, err);
    return;
  }
  FZ_CHECK(vf.format == format, "%s: format %d", name, vf.format);
  FZ_CHECK(vf.n >= 1 && vf.d >= 1, "%s: accepted %lld x %lld", name, (long long)vf.n, (long long)vf.d);
  const int ok_type = (vf.kind == 'f' && (vf.elem == 2 || vf.elem == 4 || vf.elem == 8)) ||
                      ((vf.kind == 'u' || vf.kind == 'i') && (vf.elem == 1 || vf.elem == 4));
  FZ_CHECK(ok_type, "%s: element kind '%c' of %d bytes", name, vf.kind, vf.elem);
  if (format == VA_INPUT_NPY) {
    FZ_CHECK(vf.lead == 0 && vf.stride == vf.d * vf.elem && vf.offset >= 10, "%s: offset %lld stride %lld lead %lld",
             name, (long long)vf.offset, (long long)vf.stride, (long long)vf.lead);
    FZ_CHECK(va_vecfile_sniff(path) == VA_INPUT_NPY, "%s: accepted, but sniff says %d", name, va_vecfile_sniff(path));
  } else {
    const int elem = format == VA_INPUT_BVECS ? 1 : 4;
    const char kind = format == VA_INPUT_FVECS ? 'f' : format == VA_INPUT_BVECS ? 'u' : 'i';
    FZ_CHECK(vf.offset == 0 && vf.lead == 4 && vf.elem == elem && vf.kind == kind && vf.stride == 4 + vf.d * elem,
             "%s: offset %lld stride %lld lead %lld elem %d kind '%c'", name, (long long)vf.offset,
             (long long)vf.stride, (long long)vf.lead, vf.elem, vf.kind);
  }
  /* The records fill the file exactly (both parsers refuse a short or a long file). */
  FZ_CHECK(vf.offset + vf.n * vf.stride == (int64_t)size, "%s: %lld + %lld x %lld bytes, the file holds %zu", name,
           (long long)vf.offset, (long long)vf.n, (long long)vf.stride, size);
  const size_t raw_bytes = (size_t)(vf.n * vf.stride), dense_bytes = (size_t)(vf.n * vf.d * vf.elem);
  char *raw = malloc(raw_bytes), *dense = malloc(dense_bytes), *packed = malloc(raw_bytes);
  FZ_CHECK(raw && dense && packed, "%s: no memory for %zu bytes", name, raw_bytes);
  int fd = open(path, O_RDONLY);
  FZ_CHECK(fd >= 0, "%s: cannot open %s", name, path);
  rc = read_all(&vf, fd, path, raw, dense, 0, err, sizeof err);
  if (rc) {
    FZ_CHECK(format != VA_INPUT_NPY, "%s: rows of an accepted file do not read: %s", name, err);
    FZ_CHECK(rc == VA_EXIT_INPUT && err[0] && strstr(err, path), "%s: read rc %d (%s)", name, rc, err);
    FZ_CHECK(vf.n >= 3, "%s: %lld rows, all checked by the probe, yet the read fails: %s", name, (long long)vf.n, err);
  } else {
    /* The in-place read (the staging buffer is the destination) gives the same components. */
    err[0] = 0;
    rc = read_all(&vf, fd, path, NULL, packed, 1, err, sizeof err);
    FZ_CHECK(rc == 0, "%s: the in-place read fails where the other passed: %s", name, err);
    FZ_CHECK(!memcmp(dense, packed, dense_bytes), "%s: the in-place read gives other components", name);
  }
  close(fd);
  free(raw);
  free(dense);
  free(packed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fz_temp_path(".vec");
  fz_write(data, size);
  static const int formats[] = {VA_INPUT_NPY, VA_INPUT_FVECS, VA_INPUT_BVECS, VA_INPUT_IVECS};
  for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) probe_as(path, size, formats[i]);
  const int seen = va_vecfile_sniff(path);
  FZ_CHECK(seen == VA_INPUT_AUTO || seen == VA_INPUT_NPY || seen == VA_INPUT_HDF5, "sniff %d", seen);
  FZ_CHECK((seen == VA_INPUT_NPY) == (size >= 8 && !memcmp(data, "\x93NUMPY", 6)), "sniff %d on %zu bytes", seen, size);
  return 0;
}
