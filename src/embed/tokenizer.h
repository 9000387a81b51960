/* tokenizer.h: the uncased BERT WordPiece tokenizer of all-MiniLM-L6-v2, in C.
 * Reproduces Hugging Face's fast tokenizer (the one sentence-transformers runs) id for id: special
 * tokens written literally in the text ("[MASK]") are kept whole, then BertNormalizer (drop control
 * characters, NUL and U+FFFD; whitespace to ' '; spaces around CJK ideographs; NFD + drop combining
 * marks; lower-case), BertPreTokenizer (split on whitespace, isolate punctuation) and WordPiece (greedy
 * longest match, '##' continuations, words over 100 code points -> [UNK]), then [CLS] ... [SEP] and
 * truncation. The Unicode data comes from the generated unicode_tables.c.
 * A tokenizer object is read-only after loading except for its scratch buffers: use one per thread. */
#ifndef VECANNEAL_EMBED_TOKENIZER_H
#define VECANNEAL_EMBED_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>

typedef struct va_tokenizer va_tokenizer_t;

enum { VA_TOK_MAX_WORD_CHARS = 100 };

typedef struct {
  int32_t pad, unk, cls, sep, mask; /* special ids, looked up in the vocabulary */
} va_tok_special_t;

/* Per-call results. */
typedef struct {
  int64_t invalid_utf8; /* ill-formed UTF-8 sequences replaced by U+FFFD (which the normalizer drops) */
  int truncated;        /* the text had more than max_tokens - 2 word pieces; the rest was cut */
} va_tok_info_t;

/* Loads a BERT vocab.txt (one token per line, id = line number). NULL on failure, with a message in err. */
va_tokenizer_t *va_tok_load(const char *vocab_path, char *err, size_t errlen);
void va_tok_free(va_tokenizer_t *t);
int32_t va_tok_vocab_size(const va_tokenizer_t *t);
const va_tok_special_t *va_tok_special(const va_tokenizer_t *t);
/* Id of a token string, or -1. */
int32_t va_tok_lookup(const va_tokenizer_t *t, const char *token, size_t len);

/* Tokenizes len bytes of UTF-8 text into ids = [CLS] pieces... [SEP], at most max_tokens (>= 2) of them.
 * Returns the number of ids written. info may be NULL. */
int va_tok_encode(va_tokenizer_t *t, const char *text, size_t len, int max_tokens, int32_t *ids, va_tok_info_t *info);

/* Decodes UTF-8 strictly (Unicode's "maximal subpart" rule, as Python's errors='replace'): each
 * ill-formed sequence becomes one U+FFFD. Writes at most len code points to out; returns their count
 * and adds the number of replacements to *invalid. */
size_t va_utf8_decode(const char *s, size_t len, uint32_t *out, int64_t *invalid);
/* Appends the UTF-8 encoding of code point c to out (4 bytes of room needed); returns its length. */
int va_utf8_put(uint32_t c, char *out);
#endif
