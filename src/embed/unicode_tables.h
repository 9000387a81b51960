/* unicode_tables.h: the generated per-code-point tables of the BERT tokenizer (unicode_tables.c, made
 * by scripts/gen-unicode-tables.py from the reference tokenizer's own behaviour). */
#ifndef VECANNEAL_EMBED_UNICODE_TABLES_H
#define VECANNEAL_EMBED_UNICODE_TABLES_H
#include <stdint.h>

enum { VA_UNI_DROP = 1, VA_UNI_SPACE = 2, VA_UNI_CJK = 4, VA_UNI_PUNCT = 8, VA_UNI_HANGUL = 16 };
enum { VA_UNI_BLOCK_SHIFT = 7, VA_UNI_MAXMAP = 8 };

/* len 1: maps to c + delta; len >= 2: va_uni_pool[off .. off + len); len 0: no output. */
typedef struct {
  uint8_t flags, len;
  uint16_t off;
  int32_t delta;
} va_uni_rec_t;

extern const va_uni_rec_t va_uni_records[];
extern const uint32_t va_uni_pool[];
extern const uint16_t va_uni_stage1[];
extern const uint16_t va_uni_stage2[];

static inline const va_uni_rec_t *va_uni_lookup(uint32_t c) {
  return &va_uni_records[va_uni_stage2[((uint32_t)va_uni_stage1[c >> VA_UNI_BLOCK_SHIFT] << VA_UNI_BLOCK_SHIFT) |
                                       (c & ((1u << VA_UNI_BLOCK_SHIFT) - 1))]];
}
#endif
