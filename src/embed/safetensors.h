/* safetensors.h: reading tensors from a .safetensors file (8-byte little-endian header length, a JSON
 * header {name: {dtype, shape, data_offsets}}, then the raw little-endian data). The file is mapped
 * read-only; every offset and size in the header is checked against the file before use, so a
 * truncated or corrupt file is an error message, never a crash. */
#ifndef VECANNEAL_EMBED_SAFETENSORS_H
#define VECANNEAL_EMBED_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

typedef enum { VA_ST_F32, VA_ST_F16, VA_ST_BF16, VA_ST_I64, VA_ST_OTHER } va_st_dtype_t;

typedef struct {
  char *name;
  va_st_dtype_t dtype;
  int ndim;
  int64_t shape[8];
  int64_t count; /* elements */
  const unsigned char *data;
} va_st_tensor_t;

typedef struct {
  void *map;
  size_t size;
  va_st_tensor_t *t;
  int n;
} va_st_file_t;

/* 0, or -1 with a message in err. */
int va_st_open(const char *path, va_st_file_t *f, char *err, size_t errlen);
void va_st_close(va_st_file_t *f);
const va_st_tensor_t *va_st_find(const va_st_file_t *f, const char *name);
/* Copies tensor `name` as float32 into out, converting F16/BF16; checks that its shape is exactly
 * dims[0..ndim). 0, or -1 with a message in err (missing tensor, wrong shape, unsupported dtype). */
int va_st_read_f32(const va_st_file_t *f, const char *name, int ndim, const int64_t *dims, float *out, char *err,
                   size_t errlen);
#endif
