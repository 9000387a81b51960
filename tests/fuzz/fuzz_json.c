/* fuzz_json.c: libFuzzer harness of the JSON reader (src/embed/json.c), which parses every JSONL input
 * line of `vecanneal embed`, the model's config files and the safetensors header.
 * The input is one JSON text. Checked besides ASan/UBSan: a failure comes with a message; a parsed
 * tree is well-formed (objects' members have keys, strings are NUL-terminated at their length), and
 * printing it back as JSON and parsing that gives the same tree (a round trip through an independent
 * writer: escapes, \u surrogate pairs, nesting, numbers). */
#include "fuzz_common.h"

#include <math.h>

#include "embed/json.h"

typedef struct {
  char *b;
  size_t n, cap;
} sbuf_t;

static void put(sbuf_t *s, const char *p, size_t n) {
  if (s->n + n + 1 > s->cap) {
    s->cap = 2 * (s->n + n + 1);
    s->b = realloc(s->b, s->cap);
    FZ_CHECK(s->b != NULL, "out of memory");
  }
  memcpy(s->b + s->n, p, n);
  s->n += n;
  s->b[s->n] = 0;
}

static void put_str(sbuf_t *s, const char *p, size_t n) {
  put(s, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p[i];
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      put(s, esc, 2);
    } else if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      put(s, esc, 6);
    } else put(s, (const char *)&c, 1);
  }
  put(s, "\"", 1);
}

static void write_json(sbuf_t *s, const va_json_t *v) {
  char num[64];
  switch (v->type) {
  case VA_JSON_NULL: put(s, "null", 4); break;
  case VA_JSON_BOOL: put(s, v->boolean ? "true" : "false", v->boolean ? 4 : 5); break;
  case VA_JSON_NUM:
    /* Infinite values (1e999) have no JSON spelling; a huge finite literal parses back to inf. */
    if (isinf(v->num)) snprintf(num, sizeof num, "%s1e999", v->num < 0 ? "-" : "");
    else snprintf(num, sizeof num, "%.17g", v->num);
    put(s, num, strlen(num));
    break;
  case VA_JSON_STR: put_str(s, v->str, v->len); break;
  case VA_JSON_ARR:
  case VA_JSON_OBJ:
    put(s, v->type == VA_JSON_ARR ? "[" : "{", 1);
    for (size_t k = 0; k < v->n; k++) {
      if (k) put(s, ",", 1);
      if (v->type == VA_JSON_OBJ) {
        put_str(s, v->kids[k].key, strlen(v->kids[k].key));
        put(s, ":", 1);
      }
      write_json(s, &v->kids[k]);
    }
    put(s, v->type == VA_JSON_ARR ? "]" : "}", 1);
    break;
  }
}

static int same(const va_json_t *a, const va_json_t *b) {
  if (a->type != b->type || a->n != b->n) return 0;
  if ((a->key == NULL) != (b->key == NULL) || (a->key && strcmp(a->key, b->key))) return 0;
  switch (a->type) {
  case VA_JSON_BOOL: return a->boolean == b->boolean;
  case VA_JSON_NUM: return a->num == b->num || (isnan(a->num) && isnan(b->num));
  case VA_JSON_STR: return a->len == b->len && !memcmp(a->str, b->str, a->len);
  case VA_JSON_ARR:
  case VA_JSON_OBJ:
    for (size_t k = 0; k < a->n; k++)
      if (!same(&a->kids[k], &b->kids[k])) return 0;
    return 1;
  default: return 1;
  }
}

static void check_tree(const va_json_t *v, int obj_member) {
  FZ_CHECK(!obj_member || v->key, "object member without a key");
  if (v->type == VA_JSON_STR) FZ_CHECK(v->str && v->str[v->len] == 0, "string not terminated at its length");
  if (v->type == VA_JSON_ARR || v->type == VA_JSON_OBJ)
    for (size_t k = 0; k < v->n; k++) check_tree(&v->kids[k], v->type == VA_JSON_OBJ);
  else FZ_CHECK(v->n == 0, "scalar with %zu children", v->n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512] = "";
  int64_t lone = 0;
  va_json_t *v = va_json_parse((const char *)data, size, err, sizeof err, &lone);
  if (!v) {
    FZ_CHECK(err[0], "parse failed without a message");
    return 0;
  }
  FZ_CHECK(lone >= 0 && (size_t)lone <= size / 6, "%lld lone surrogates in %zu bytes", (long long)lone, size);
  check_tree(v, 0);
  if (v->type == VA_JSON_OBJ && v->n)
    FZ_CHECK(va_json_get(v, v->kids[0].key) == &v->kids[0], "va_json_get misses the first key");
  sbuf_t s = {0};
  write_json(&s, v);
  va_json_t *w = va_json_parse(s.b, s.n, err, sizeof err, NULL);
  FZ_CHECK(w != NULL, "printed tree does not parse again: %s", err);
  FZ_CHECK(same(v, w), "round trip changes the tree: %.200s", s.b);
  va_json_free(w);
  va_json_free(v);
  free(s.b);
  return 0;
}
