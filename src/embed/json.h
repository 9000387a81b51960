/* json.h: a small JSON reader (a tree of nodes) for the three places embed meets JSON: the safetensors
 * header, the model's config files, and JSONL input lines. Strings are decoded to UTF-8; \u escapes
 * that are lone surrogates become U+FFFD and are counted, so that embed can report them with the
 * ill-formed UTF-8 it replaces. Raw bytes inside strings are passed through unchanged (the tokenizer
 * validates them). */
#ifndef VECANNEAL_EMBED_JSON_H
#define VECANNEAL_EMBED_JSON_H
#include <stddef.h>
#include <stdint.h>

typedef enum { VA_JSON_NULL, VA_JSON_BOOL, VA_JSON_NUM, VA_JSON_STR, VA_JSON_ARR, VA_JSON_OBJ } va_json_type_t;

typedef struct va_json {
  va_json_type_t type;
  int boolean;
  double num;
  char *str; /* VA_JSON_STR: decoded, NUL-terminated (may hold NULs: use len) */
  size_t len;
  char *key;            /* member of an object: its key (decoded) */
  struct va_json *kids; /* array elements or object members */
  size_t n;
} va_json_t;

/* Parses exactly one JSON value spanning s[0..len) (surrounding whitespace allowed). Returns NULL with
 * a message (and byte offset) in err on a syntax error. *lone_surrogates (may be NULL) gets the count of
 * replaced \u escapes. */
va_json_t *va_json_parse(const char *s, size_t len, char *err, size_t errlen, int64_t *lone_surrogates);
void va_json_free(va_json_t *v);
/* Member of an object by key (first match), or NULL (also when v is not an object). */
const va_json_t *va_json_get(const va_json_t *v, const char *key);
#endif
