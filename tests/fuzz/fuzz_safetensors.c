/* fuzz_safetensors.c: libFuzzer harness of the safetensors reader (src/embed/safetensors.c), which
 * promises that "a truncated or corrupt file is an error message, never a crash".
 * The input bytes become model.safetensors; va_st_open parses and checks it, then every tensor is read
 * as float32 with its own shape (when small). Checked besides ASan/UBSan: a failure comes with a
 * message; every tensor of an opened file lies inside the mapping (the mapping is not heap memory, so
 * ASan would not see a read past it), and its element count matches its shape. */
#include "fuzz_common.h"

#include "embed/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fz_temp_path(".safetensors");
  fz_write(data, size);
  char err[1024] = "";
  va_st_file_t f;
  if (va_st_open(path, &f, err, sizeof err) != 0) {
    FZ_CHECK(err[0], "open failed without a message");
    return 0;
  }
  const unsigned char *lo = f.map, *hi = lo + f.size;
  for (int i = 0; i < f.n; i++) {
    const va_st_tensor_t *t = &f.t[i];
    FZ_CHECK(t->ndim >= 0 && t->ndim <= 8, "ndim %d", t->ndim);
    int esize = t->dtype == VA_ST_F32 ? 4 : t->dtype == VA_ST_I64 ? 8 : 2;
    if (t->dtype == VA_ST_OTHER) continue;
    FZ_CHECK(t->data >= lo && t->data <= hi, "tensor '%s' starts outside the file", t->name);
    FZ_CHECK(t->count >= 0 && t->count <= (int64_t)(hi - t->data) / esize,
             "tensor '%s': %lld elements past the end of the file", t->name, (long long)t->count);
    if (t->count <= (1 << 20) && t->dtype != VA_ST_I64) {
      float *out = malloc((size_t)(t->count ? t->count : 1) * sizeof *out);
      int rc = va_st_read_f32(&f, t->name, t->ndim, t->shape, out, err, sizeof err);
      FZ_CHECK(rc == 0 || err[0], "read failed without a message");
      free(out);
    }
  }
  va_st_close(&f);
  return 0;
}
