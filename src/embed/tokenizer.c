/* tokenizer.c: BERT uncased tokenization (see tokenizer.h for the pipeline it reproduces).
 * Text is decoded to code points once, normalised one code point at a time through the generated table
 * (normalisation in the reference is per code point too, apart from NFD's reordering of combining
 * marks, which the table's generator discusses), split into words as it goes, and each finished word
 * goes through WordPiece against an open-addressing hash of the vocabulary. */
#include "tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unicode_tables.h"

/* A hash slot is 8 bytes, so that the table (twice the vocabulary) stays in a core's cache; a key's
 * bytes are read only when its check matches. */
typedef struct {
  uint32_t check; /* the key's hash >> 32: keys in one probe chain are told apart without reading their bytes */
  int32_t id;     /* -1: empty */
} vocab_slot_t;
typedef struct {
  uint32_t off, len; /* bytes in t->blob */
} vocab_entry_t;

struct va_tokenizer {
  char *blob;           /* the vocabulary's strings, back to back */
  vocab_slot_t *slots;  /* hash table, nslots a power of two */
  vocab_entry_t *entry; /* by id */
  uint32_t nslots;
  int32_t nvocab;
  int max_piece_chars; /* longest vocabulary entry in code points, '##' excluded: bounds the search */
  va_tok_special_t sp;
  /* scratch, grown on demand */
  uint32_t *cps;
  size_t cps_cap;
  char *key;          /* the current word's UTF-8 */
  uint16_t *char_off; /* byte offset of each code point of the current word in key */
};

/* FNV-1a (short keys, good enough spread for 30k entries), one byte at a time, so that WordPiece hashes all
 * prefixes of a piece in one pass (flush_word); hash_finish mixes the high bits into the slot index. */
#define FNV_OFFSET 1469598103934665603ull
static inline uint64_t hash_step(uint64_t h, unsigned char c) { return (h ^ c) * 1099511628211ull; }
static inline uint64_t hash_finish(uint64_t h) { return h ^ (h >> 29); }
static uint64_t hash_bytes(const char *s, size_t len) {
  uint64_t h = FNV_OFFSET;
  for (size_t i = 0; i < len; i++) h = hash_step(h, (unsigned char)s[i]);
  return hash_finish(h);
}

/* token's id, or -1; h = hash_bytes(token, len) */
static int32_t lookup_hashed(const va_tokenizer_t *t, const char *token, size_t len, uint64_t h) {
  const uint32_t mask = t->nslots - 1, check = (uint32_t)(h >> 32);
  for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
    const vocab_slot_t s = t->slots[i];
    if (s.id < 0) return -1;
    if (s.check == check) {
      const vocab_entry_t e = t->entry[s.id];
      if (e.len == len && !memcmp(t->blob + e.off, token, len)) return s.id;
    }
  }
}

int32_t va_tok_lookup(const va_tokenizer_t *t, const char *token, size_t len) {
  return lookup_hashed(t, token, len, hash_bytes(token, len));
}

int va_utf8_put(uint32_t c, char *o) {
  if (c < 0x80) {
    o[0] = (char)c;
    return 1;
  }
  if (c < 0x800) {
    o[0] = (char)(0xC0 | (c >> 6));
    o[1] = (char)(0x80 | (c & 0x3F));
    return 2;
  }
  if (c < 0x10000) {
    o[0] = (char)(0xE0 | (c >> 12));
    o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[2] = (char)(0x80 | (c & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (c >> 18));
  o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
  o[3] = (char)(0x80 | (c & 0x3F));
  return 4;
}

size_t va_utf8_decode(const char *str, size_t len, uint32_t *out, int64_t *invalid) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0, n = 0;
  while (i < len) {
    unsigned b = s[i];
    if (b < 0x80) {
      out[n++] = b;
      i++;
      continue;
    }
    int need;
    unsigned lo = 0x80, hi = 0xBF;
    uint32_t c;
    if (b >= 0xC2 && b <= 0xDF) {
      need = 1;
      c = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      need = 2;
      c = b & 0x0F;
      if (b == 0xE0) lo = 0xA0;      /* no overlong forms */
      else if (b == 0xED) hi = 0x9F; /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
      need = 3;
      c = b & 0x07;
      if (b == 0xF0) lo = 0x90;
      else if (b == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
    } else {
      out[n++] = 0xFFFD;
      (*invalid)++;
      i++;
      continue;
    }
    size_t j = i + 1;
    int k = 0;
    for (; k < need && j < len; k++, j++) {
      unsigned cb = s[j];
      if (cb < lo || cb > hi) break;
      c = (c << 6) | (cb & 0x3F);
      lo = 0x80;
      hi = 0xBF; /* only the second byte has the narrowed range */
    }
    if (k == need) {
      out[n++] = c;
      i = j;
    } else {
      out[n++] = 0xFFFD;
      (*invalid)++;
      i = j;
    } /* the maximal valid prefix is one error */
  }
  return n;
}

void va_tok_free(va_tokenizer_t *t) {
  if (!t) return;
  free(t->blob);
  free(t->slots);
  free(t->entry);
  free(t->cps);
  free(t->key);
  free(t->char_off);
  free(t);
}

int32_t va_tok_vocab_size(const va_tokenizer_t *t) { return t->nvocab; }
const va_tok_special_t *va_tok_special(const va_tokenizer_t *t) { return &t->sp; }

static size_t utf8_chars(const char *s, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
  return n;
}

va_tokenizer_t *va_tok_load(const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "cannot open vocabulary '%s': %s", path, strerror(errno));
    return NULL;
  }
  va_tokenizer_t *t = calloc(1, sizeof *t);
  long size = -1;
  if (t && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
  if (!t || size < 0 || fseek(f, 0, SEEK_SET) != 0) {
    snprintf(err, errlen, "cannot read vocabulary '%s'", path);
    fclose(f);
    free(t);
    return NULL;
  }
  t->blob = malloc((size_t)size + 1);
  if (!t->blob || fread(t->blob, 1, (size_t)size, f) != (size_t)size) {
    snprintf(err, errlen, "cannot read vocabulary '%s'", path);
    fclose(f);
    va_tok_free(t);
    return NULL;
  }
  fclose(f);
  t->blob[size] = '\n';
  /* Count lines: a final line without '\n' still counts, a trailing '\n' adds none. */
  int32_t n = 0;
  for (long i = 0; i < size; i++) n += t->blob[i] == '\n';
  if (size > 0 && t->blob[size - 1] != '\n') n++;
  if (n < 5) {
    snprintf(err, errlen, "vocabulary '%s' has %d line(s): not a BERT vocab.txt", path, n);
    va_tok_free(t);
    return NULL;
  }
  t->nvocab = n;
  t->nslots = 1;
  while (t->nslots < 2u * (uint32_t)n) t->nslots <<= 1;
  t->slots = malloc(t->nslots * sizeof *t->slots);
  t->entry = malloc((size_t)n * sizeof *t->entry);
  if (!t->slots || !t->entry) {
    snprintf(err, errlen, "out of memory for the vocabulary");
    va_tok_free(t);
    return NULL;
  }
  for (uint32_t i = 0; i < t->nslots; i++) t->slots[i].id = -1;
  long p = 0;
  for (int32_t id = 0; id < n; id++) {
    long e = p;
    while (t->blob[e] != '\n') e++;
    long end = e;
    if (end > p && t->blob[end - 1] == '\r') end--; /* tolerate CRLF files */
    const uint32_t len = (uint32_t)(end - p), mask = t->nslots - 1;
    const uint64_t h = hash_bytes(t->blob + p, len);
    uint32_t i = (uint32_t)h & mask;
    /* A repeated line: the later id wins, as when the reference builds its map from the file. */
    while (t->slots[i].id >= 0 &&
           !(t->entry[t->slots[i].id].len == len && !memcmp(t->blob + t->entry[t->slots[i].id].off, t->blob + p, len)))
      i = (i + 1) & mask;
    t->slots[i] = (vocab_slot_t){(uint32_t)(h >> 32), id};
    t->entry[id] = (vocab_entry_t){(uint32_t)p, len};
    size_t chars = utf8_chars(t->blob + p, len);
    if (len >= 2 && !memcmp(t->blob + p, "##", 2)) chars -= 2;
    if ((int)chars > t->max_piece_chars) t->max_piece_chars = (int)chars;
    p = e + 1;
  }
  static const char *const names[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  int32_t *dst[5] = {&t->sp.pad, &t->sp.unk, &t->sp.cls, &t->sp.sep, &t->sp.mask};
  for (int k = 0; k < 5; k++) {
    *dst[k] = va_tok_lookup(t, names[k], strlen(names[k]));
    if (*dst[k] < 0) {
      snprintf(err, errlen, "vocabulary '%s' has no %s token", path, names[k]);
      va_tok_free(t);
      return NULL;
    }
  }
  t->key = malloc(4 * VA_TOK_MAX_WORD_CHARS + 1);
  t->char_off = malloc((VA_TOK_MAX_WORD_CHARS + 1) * sizeof *t->char_off);
  if (!t->key || !t->char_off) {
    snprintf(err, errlen, "out of memory for the tokenizer");
    va_tok_free(t);
    return NULL;
  }
  return t;
}

/* --- encoding ---------------------------------------------------------------------------------- */
typedef struct {
  va_tokenizer_t *t;
  int32_t *ids;
  int n, limit; /* ids written, most allowed before [SEP] */
  int truncated;
  uint32_t word[VA_TOK_MAX_WORD_CHARS + 1];
  int wlen; /* code points in word; > VA_TOK_MAX_WORD_CHARS means "too long" (not stored) */
} enc_t;

static void emit(enc_t *e, int32_t id) {
  if (e->n < e->limit) e->ids[e->n++] = id;
  else e->truncated = 1;
}

/* WordPiece on the finished word: greedy longest match from the left, continuations prefixed '##';
 * a word with any unmatched remainder, or over 100 code points, is a single [UNK]. */
static void flush_word(enc_t *e) {
  int n = e->wlen;
  if (n == 0) return;
  e->wlen = 0;
  va_tokenizer_t *t = e->t;
  if (n > VA_TOK_MAX_WORD_CHARS) {
    emit(e, t->sp.unk);
    return;
  }
  /* key = the word's UTF-8; a first piece is looked up in it, a continuation in a copy of the rest of the
   * word right after a "##" (pieces are at most 18 code points). The hashes of a start's candidate pieces,
   * longest first, are its prefixes' hashes, taken in one pass. */
  char *key = t->key, piece[2 + 4 * VA_TOK_MAX_WORD_CHARS];
  int nb = 0;
  for (int i = 0; i < n; i++) {
    t->char_off[i] = (uint16_t)nb;
    nb += va_utf8_put(e->word[i], key + nb);
  }
  t->char_off[n] = (uint16_t)nb;
  piece[0] = piece[1] = '#';
  int32_t pieces[VA_TOK_MAX_WORD_CHARS];
  uint64_t prefix_hash[VA_TOK_MAX_WORD_CHARS + 1]; /* [j]: of the start's piece of j code points */
  int np = 0, start = 0;
  while (start < n) {
    const int last = n < start + t->max_piece_chars ? n : start + t->max_piece_chars;
    const char *base = key + t->char_off[start];
    const size_t skip = start == 0 ? 0 : 2; /* the "##" */
    uint64_t h = FNV_OFFSET;
    if (skip) {
      memcpy(piece + 2, base, (size_t)(t->char_off[last] - t->char_off[start]));
      h = hash_step(hash_step(h, '#'), '#');
    }
    for (int j = start; j < last; j++) {
      for (int b = t->char_off[j]; b < t->char_off[j + 1]; b++) h = hash_step(h, (unsigned char)key[b]);
      prefix_hash[j + 1 - start] = hash_finish(h);
    }
    int end = last;
    int32_t id = -1;
    for (; end > start; end--) {
      const size_t len = skip + (size_t)(t->char_off[end] - t->char_off[start]);
      id = lookup_hashed(t, skip ? piece : base, len, prefix_hash[end - start]);
      if (id >= 0) break;
    }
    if (id < 0) {
      emit(e, t->sp.unk);
      return;
    }
    pieces[np++] = id;
    start = end;
  }
  for (int i = 0; i < np; i++) emit(e, pieces[i]);
}

static inline void push_char(enc_t *e, uint32_t c) {
  if (e->wlen < VA_TOK_MAX_WORD_CHARS) e->word[e->wlen] = c;
  if (e->wlen <= VA_TOK_MAX_WORD_CHARS) e->wlen++;
}

/* One normalised code point into the pre-tokenizer: punctuation is a word of its own. */
static inline void pre_char(enc_t *e, uint32_t d, int punct) {
  if (punct) {
    flush_word(e);
    push_char(e, d);
    flush_word(e);
  } else push_char(e, d);
}

static void encode_segment(enc_t *e, const uint32_t *cps, size_t n) {
  for (size_t i = 0; i < n && !e->truncated; i++) {
    uint32_t c = cps[i];
    const va_uni_rec_t *r = va_uni_lookup(c);
    unsigned fl = r->flags;
    if (fl & VA_UNI_DROP) continue;
    if (fl & VA_UNI_SPACE) {
      flush_word(e);
      continue;
    }
    if (fl & VA_UNI_HANGUL) { /* algorithmic NFD: L V [T] jamo, none of them punctuation */
      uint32_t s = c - 0xAC00;
      push_char(e, 0x1100 + s / 588);
      push_char(e, 0x1161 + (s % 588) / 28);
      if (s % 28) push_char(e, 0x11A7 + s % 28);
      continue;
    }
    if (fl & VA_UNI_CJK) flush_word(e);
    if (r->len == 1) {
      uint32_t d = (uint32_t)((int32_t)c + r->delta);
      pre_char(e, d, r->delta == 0 ? (int)(fl & VA_UNI_PUNCT) : (int)(va_uni_lookup(d)->flags & VA_UNI_PUNCT));
    } else {
      for (int k = 0; k < r->len; k++) {
        uint32_t d = va_uni_pool[r->off + k];
        pre_char(e, d, (int)(va_uni_lookup(d)->flags & VA_UNI_PUNCT));
      }
    }
    if (fl & VA_UNI_CJK) flush_word(e);
  }
  flush_word(e);
}

/* Special tokens written literally are matched on the raw text, before normalisation, exactly (case
 * and all), as the reference's added-vocabulary pass does. Returns the id and sets *mlen, or -1. */
static int32_t special_at(const va_tokenizer_t *t, const uint32_t *c, size_t left, size_t *mlen) {
  static const char *const names[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int k = 0; k < 5; k++) {
    size_t L = strlen(names[k]);
    if (L > left) continue;
    size_t j = 0;
    while (j < L && c[j] == (uint32_t)(unsigned char)names[k][j]) j++;
    if (j == L) {
      *mlen = L;
      const int32_t ids[5] = {t->sp.pad, t->sp.unk, t->sp.cls, t->sp.sep, t->sp.mask};
      return ids[k];
    }
  }
  return -1;
}

int va_tok_encode(va_tokenizer_t *t, const char *text, size_t len, int max_tokens, int32_t *ids, va_tok_info_t *info) {
  va_tok_info_t dummy;
  if (!info) info = &dummy;
  info->invalid_utf8 = 0;
  info->truncated = 0;
  if (max_tokens < 2) max_tokens = 2;
  if (!t->cps || len > t->cps_cap) {
    size_t cap = len < 256 ? 256 : len;
    uint32_t *p = realloc(t->cps, cap * sizeof *p);
    if (!p) return -1;
    t->cps = p;
    t->cps_cap = cap;
  }
  size_t n = va_utf8_decode(text, len, t->cps, &info->invalid_utf8);
  enc_t e;
  e.t = t;
  e.ids = ids;
  e.n = 0;
  e.limit = max_tokens - 1; /* room for [SEP] */
  e.truncated = 0;
  e.wlen = 0;
  emit(&e, t->sp.cls);
  size_t seg = 0;
  for (size_t i = 0; i < n && !e.truncated; i++) {
    if (t->cps[i] != '[') continue;
    size_t mlen;
    int32_t id = special_at(t, t->cps + i, n - i, &mlen);
    if (id < 0) continue;
    encode_segment(&e, t->cps + seg, i - seg);
    emit(&e, id);
    i += mlen - 1;
    seg = i + 1;
  }
  if (!e.truncated) encode_segment(&e, t->cps + seg, n - seg);
  ids[e.n++] = t->sp.sep;
  info->truncated = e.truncated;
  return e.n;
}
