/* json.c: recursive-descent JSON reader (RFC 8259 syntax; depth capped so that hostile input cannot
 * exhaust the stack). See json.h. */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h" /* va_utf8_put */

enum { MAX_DEPTH = 64 };

typedef struct {
  const char *s;
  size_t len, i;
  char *err;
  size_t errlen;
  int64_t lone;
  int failed;
} parser_t;

static void fail(parser_t *p, const char *what) {
  if (!p->failed) snprintf(p->err, p->errlen, "%s at byte %zu", what, p->i);
  p->failed = 1;
}

static void skip_ws(parser_t *p) {
  while (p->i < p->len && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static int hex4(parser_t *p, unsigned *out) {
  if (p->i + 4 > p->len) return 0;
  unsigned v = 0;
  for (int k = 0; k < 4; k++) {
    char c = p->s[p->i + k];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return 0;
  }
  p->i += 4;
  *out = v;
  return 1;
}

/* At the opening quote; decodes into a fresh buffer (never longer than the source). */
static char *parse_string(parser_t *p, size_t *outlen) {
  p->i++;
  size_t start = p->i;
  while (p->i < p->len && p->s[p->i] != '"') p->i += p->s[p->i] == '\\' ? 2 : 1;
  if (p->i >= p->len) {
    fail(p, "unterminated string");
    return NULL;
  }
  char *out = malloc(p->i - start + 1);
  if (!out) {
    fail(p, "out of memory");
    return NULL;
  }
  size_t end = p->i, n = 0;
  p->i = start;
  while (p->i < end) {
    char c = p->s[p->i++];
    if (c != '\\') {
      out[n++] = c;
      continue;
    }
    char e = p->s[p->i++];
    switch (e) {
    case '"': out[n++] = '"'; break;
    case '\\': out[n++] = '\\'; break;
    case '/': out[n++] = '/'; break;
    case 'b': out[n++] = '\b'; break;
    case 'f': out[n++] = '\f'; break;
    case 'n': out[n++] = '\n'; break;
    case 'r': out[n++] = '\r'; break;
    case 't': out[n++] = '\t'; break;
    case 'u': {
      unsigned u, lo;
      if (!hex4(p, &u)) {
        free(out);
        fail(p, "bad \\u escape");
        return NULL;
      }
      if (u >= 0xD800 && u < 0xDC00 && p->i + 6 <= end && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
        size_t save = p->i;
        p->i += 2;
        if (hex4(p, &lo) && lo >= 0xDC00 && lo < 0xE000) u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        else p->i = save;
      }
      if (u >= 0xD800 && u < 0xE000) {
        u = 0xFFFD;
        p->lone++;
      }
      /* 6 source bytes (or 12 for a pair) always cover the at most 4 bytes written */
      n += (size_t)va_utf8_put(u, out + n);
      break;
    }
    default:
      free(out);
      fail(p, "bad escape");
      return NULL;
    }
  }
  out[n] = 0;
  p->i = end + 1;
  *outlen = n;
  return out;
}

static int parse_value(parser_t *p, va_json_t *v, int depth);

static int parse_container(parser_t *p, va_json_t *v, int depth, char close) {
  size_t cap = 0;
  p->i++;
  skip_ws(p);
  if (p->i < p->len && p->s[p->i] == close) {
    p->i++;
    return 1;
  }
  for (;;) {
    if (v->n == cap) {
      cap = cap ? 2 * cap : 4;
      va_json_t *k = realloc(v->kids, cap * sizeof *k);
      if (!k) {
        fail(p, "out of memory");
        return 0;
      }
      v->kids = k;
    }
    va_json_t *kid = &v->kids[v->n];
    memset(kid, 0, sizeof *kid);
    v->n++;
    skip_ws(p);
    if (close == '}') {
      size_t kl;
      if (p->i >= p->len || p->s[p->i] != '"') {
        fail(p, "expected a key");
        return 0;
      }
      if (!(kid->key = parse_string(p, &kl))) return 0;
      skip_ws(p);
      if (p->i >= p->len || p->s[p->i] != ':') {
        fail(p, "expected ':'");
        return 0;
      }
      p->i++;
    }
    if (!parse_value(p, kid, depth + 1)) return 0;
    skip_ws(p);
    if (p->i < p->len && p->s[p->i] == ',') {
      p->i++;
      continue;
    }
    if (p->i < p->len && p->s[p->i] == close) {
      p->i++;
      return 1;
    }
    fail(p, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    return 0;
  }
}

static int parse_value(parser_t *p, va_json_t *v, int depth) {
  if (depth > MAX_DEPTH) {
    fail(p, "nested too deeply");
    return 0;
  }
  skip_ws(p);
  if (p->i >= p->len) {
    fail(p, "unexpected end");
    return 0;
  }
  char c = p->s[p->i];
  if (c == '{') {
    v->type = VA_JSON_OBJ;
    return parse_container(p, v, depth, '}');
  }
  if (c == '[') {
    v->type = VA_JSON_ARR;
    return parse_container(p, v, depth, ']');
  }
  if (c == '"') {
    v->type = VA_JSON_STR;
    return (v->str = parse_string(p, &v->len)) != NULL;
  }
  static const struct {
    const char *w;
    va_json_type_t t;
    int b;
  } words[] = {{"true", VA_JSON_BOOL, 1}, {"false", VA_JSON_BOOL, 0}, {"null", VA_JSON_NULL, 0}};
  for (int k = 0; k < 3; k++) {
    size_t L = strlen(words[k].w);
    if (p->i + L <= p->len && !memcmp(p->s + p->i, words[k].w, L)) {
      v->type = words[k].t;
      v->boolean = words[k].b;
      p->i += L;
      return 1;
    }
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    char buf[64];
    size_t k = 0;
    while (p->i + k < p->len && k < sizeof buf - 1 && strchr("+-0123456789.eE", p->s[p->i + k])) {
      buf[k] = p->s[p->i + k];
      k++;
    }
    buf[k] = 0;
    char *e;
    v->num = strtod(buf, &e);
    if (e == buf || *e) {
      fail(p, "bad number");
      return 0;
    }
    v->type = VA_JSON_NUM;
    p->i += k;
    return 1;
  }
  fail(p, "unexpected character");
  return 0;
}

static void free_kids(va_json_t *v) {
  for (size_t k = 0; k < v->n; k++) free_kids(&v->kids[k]);
  free(v->kids);
  free(v->str);
  free(v->key);
}

void va_json_free(va_json_t *v) {
  if (!v) return;
  free_kids(v);
  free(v);
}

va_json_t *va_json_parse(const char *s, size_t len, char *err, size_t errlen, int64_t *lone) {
  parser_t p = {s, len, 0, err, errlen, 0, 0};
  va_json_t *v = calloc(1, sizeof *v);
  if (!v) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (parse_value(&p, v, 0)) {
    skip_ws(&p);
    if (p.i != p.len) fail(&p, "trailing characters");
  }
  if (p.failed) {
    va_json_free(v);
    return NULL;
  }
  if (lone) *lone += p.lone;
  return v;
}

const va_json_t *va_json_get(const va_json_t *v, const char *key) {
  if (!v || v->type != VA_JSON_OBJ) return NULL;
  for (size_t k = 0; k < v->n; k++)
    if (v->kids[k].key && !strcmp(v->kids[k].key, key)) return &v->kids[k];
  return NULL;
}
