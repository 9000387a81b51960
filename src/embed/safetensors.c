/* safetensors.c: see safetensors.h. */
#define _DEFAULT_SOURCE
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
  if (exp == 0) {
    if (man == 0) bits = sign;
    else { /* subnormal: normalise */ exp = 127 - 15 + 1;
      while (!(man & 0x400)) {
        man <<= 1;
        exp--;
      }
      bits = sign | (exp << 23) | ((man & 0x3FF) << 13);
    }
  } else if (exp == 31) bits = sign | 0x7F800000u | (man << 13);
  else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

void va_st_close(va_st_file_t *f) {
  if (f->map && f->map != MAP_FAILED) munmap(f->map, f->size);
  for (int i = 0; i < f->n; i++) free(f->t[i].name);
  free(f->t);
  memset(f, 0, sizeof *f);
}

int va_st_open(const char *path, va_st_file_t *f, char *err, size_t errlen) {
  memset(f, 0, sizeof *f);
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 16) {
    snprintf(err, errlen, "'%s' is not a safetensors file (%lld bytes)", path, (long long)st.st_size);
    close(fd);
    return -1;
  }
  f->size = (size_t)st.st_size;
  f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (f->map == MAP_FAILED) {
    f->map = NULL;
    snprintf(err, errlen, "cannot map '%s': %s", path, strerror(errno));
    return -1;
  }
  const unsigned char *b = f->map;
  uint64_t hlen = 0;
  for (int k = 7; k >= 0; k--) hlen = (hlen << 8) | b[k];
  if (hlen > f->size - 8) {
    snprintf(err, errlen, "'%s': header length %llu exceeds the file (%zu bytes): truncated or not safetensors", path,
             (unsigned long long)hlen, f->size);
    va_st_close(f);
    return -1;
  }
  char jerr[256];
  va_json_t *h = va_json_parse((const char *)b + 8, (size_t)hlen, jerr, sizeof jerr, NULL);
  if (!h || h->type != VA_JSON_OBJ) {
    snprintf(err, errlen, "'%s': corrupt safetensors header (%s)", path, h ? "not an object" : jerr);
    va_json_free(h);
    va_st_close(f);
    return -1;
  }
  const unsigned char *data = b + 8 + hlen;
  size_t dsize = f->size - 8 - (size_t)hlen;
  f->t = calloc(h->n ? h->n : 1, sizeof *f->t);
  int rc = 0;
  for (size_t k = 0; k < h->n && !rc; k++) {
    const va_json_t *e = &h->kids[k];
    if (!strcmp(e->key, "__metadata__")) continue;
    const va_json_t *dt = va_json_get(e, "dtype"), *sh = va_json_get(e, "shape"), *of = va_json_get(e, "data_offsets");
    if (!dt || dt->type != VA_JSON_STR || !sh || sh->type != VA_JSON_ARR || sh->n > 8 || !of ||
        of->type != VA_JSON_ARR || of->n != 2 || of->kids[0].type != VA_JSON_NUM || of->kids[1].type != VA_JSON_NUM) {
      snprintf(err, errlen, "'%s': corrupt header entry for tensor '%s'", path, e->key);
      rc = -1;
      break;
    }
    va_st_tensor_t *t = &f->t[f->n];
    t->name = strdup(e->key);
    f->n++;
    t->dtype = !strcmp(dt->str, "F32")    ? VA_ST_F32
               : !strcmp(dt->str, "F16")  ? VA_ST_F16
               : !strcmp(dt->str, "BF16") ? VA_ST_BF16
               : !strcmp(dt->str, "I64")  ? VA_ST_I64
                                          : VA_ST_OTHER;
    int esize = t->dtype == VA_ST_F32 ? 4 : t->dtype == VA_ST_I64 ? 8 : 2;
    t->ndim = (int)sh->n;
    t->count = 1;
    for (int d = 0; d < t->ndim; d++) {
      double v = sh->kids[d].num;
      if (sh->kids[d].type != VA_JSON_NUM || v < 0 || v > 1e12 || (double)t->count * v > 1e15) {
        snprintf(err, errlen, "'%s': bad shape of '%s'", path, e->key);
        rc = -1;
        break;
      }
      t->shape[d] = (int64_t)v;
      t->count *= t->shape[d];
    }
    double o0 = of->kids[0].num, o1 = of->kids[1].num;
    if (!rc && !(o0 >= 0 && o1 >= o0 && o1 <= (double)dsize)) {
      snprintf(err, errlen, "'%s': tensor '%s' lies outside the file (offsets %.0f..%.0f, %zu data bytes): truncated?",
               path, e->key, o0, o1, dsize);
      rc = -1;
    }
    if (!rc && t->dtype != VA_ST_OTHER && (int64_t)(o1 - o0) != t->count * esize) {
      snprintf(err, errlen, "'%s': tensor '%s' has %.0f bytes for %lld %s elements", path, e->key, o1 - o0,
               (long long)t->count, dt->str);
      rc = -1;
    }
    if (!rc) t->data = data + (size_t)o0;
  }
  va_json_free(h);
  if (rc) {
    va_st_close(f);
    return -1;
  }
  return 0;
}

const va_st_tensor_t *va_st_find(const va_st_file_t *f, const char *name) {
  for (int i = 0; i < f->n; i++)
    if (!strcmp(f->t[i].name, name)) return &f->t[i];
  return NULL;
}

int va_st_read_f32(const va_st_file_t *f, const char *name, int ndim, const int64_t *dims, float *out, char *err,
                   size_t errlen) {
  const va_st_tensor_t *t = va_st_find(f, name);
  if (!t) {
    snprintf(err, errlen, "tensor '%s' is missing", name);
    return -1;
  }
  int ok = t->ndim == ndim;
  for (int d = 0; ok && d < ndim; d++) ok = t->shape[d] == dims[d];
  if (!ok) {
    char got[128] = "", want[128] = "";
    for (int d = 0; d < t->ndim; d++)
      snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? "x" : "", (long long)t->shape[d]);
    for (int d = 0; d < ndim; d++)
      snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? "x" : "", (long long)dims[d]);
    snprintf(err, errlen, "tensor '%s' has shape %s, expected %s", name, got, want);
    return -1;
  }
  const unsigned char *p = t->data;
  switch (t->dtype) {
  case VA_ST_F32: memcpy(out, p, (size_t)t->count * 4); break; /* little-endian host assumed (x86_64, aarch64) */
  case VA_ST_F16:
    for (int64_t i = 0; i < t->count; i++) out[i] = half_to_float((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    break;
  case VA_ST_BF16:
    for (int64_t i = 0; i < t->count; i++) {
      uint32_t bits = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
      memcpy(&out[i], &bits, 4);
    }
    break;
  default: snprintf(err, errlen, "tensor '%s' is not F32, F16 or BF16", name); return -1;
  }
  return 0;
}
