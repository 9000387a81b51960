/* test_tokenizer.c: token-id parity of the C tokenizer with Hugging Face's fast BERT tokenizer on the
 * committed corpus (tests/data/embed_corpus.txt.gz, 15k+ lines of WordNet glosses, fortunes in nine
 * languages, adversarial lines and a code-point sweep) against the reference ids made by
 * tests/embed/make_fixture.py. Any differing line fails the test and is printed with both id lists.
 * Also checks the UTF-8 decoder on hand-made ill-formed sequences (the counts reported by embed).
 * usage: test_tokenizer MODEL_DIR DATA_DIR */
#include <stdint.h>
#include <time.h>

#include "embed/json.h"
#include "embed/tokenizer.h"
#include "fixture.h"

static int check_utf8(void) {
  static const struct {
    const char *s;
    size_t len;
    int64_t bad;
    size_t ncp;
  } cases[] = {
      {"abc", 3, 0, 3},
      {"\xc3\xa9", 2, 0, 1},
      {"\xff", 1, 1, 1},
      {"\xc0\x80", 2, 2, 2},     /* overlong: each byte is an error */
      {"\xed\xa0\x80", 3, 3, 3}, /* surrogate: E D is not followed by A0 */
      {"\xe2\x82", 2, 1, 1},     /* truncated: one error for the maximal prefix */
      {"\xe2\x82x", 3, 1, 2},
      {"\xf0\x9f\x98\x80", 4, 0, 1}, /* U+1F600 */
      {"\xf4\x90\x80\x80", 4, 4, 4}, /* above U+10FFFF */
      {"\x80\x80", 2, 2, 2},
  };
  int fails = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint32_t out[8];
    int64_t bad = 0;
    size_t n = va_utf8_decode(cases[i].s, cases[i].len, out, &bad);
    if (bad != cases[i].bad || n != cases[i].ncp) {
      fprintf(stderr, "FAIL: utf8 case %zu: %lld errors / %zu code points, expected %lld / %zu\n", i, (long long)bad, n,
              (long long)cases[i].bad, cases[i].ncp);
      fails++;
    }
  }
  return fails;
}

/* The JSON reader behind JSONL input: escapes, surrogate pairs, lone surrogates (counted), errors. */
static int check_json(void) {
  char err[256];
  int64_t lone = 0;
  const char *doc = "{\"id\": 3, \"meta\": {\"a\": [1, -2.5e3, null, true, \"x\"]}, "
                    "\"text\": \"\\ud83d\\ude00 caf\\u00e9\\n\\\"q\\\" \\ud800x\"}";
  va_json_t *j = va_json_parse(doc, strlen(doc), err, sizeof err, &lone);
  const va_json_t *t = va_json_get(j, "text");
  const char *want = "\xf0\x9f\x98\x80 caf\xc3\xa9\n\"q\" \xef\xbf\xbdx";
  int fails = 0;
  if (!t || t->type != VA_JSON_STR || t->len != strlen(want) || memcmp(t->str, want, t->len) || lone != 1) {
    fprintf(stderr, "FAIL: JSON string decoding\n");
    fails++;
  }
  va_json_free(j);
  static const char *const bad[] = {
      "{\"text\": \"x\"", "{\"text\" \"x\"}", "{\"text\": \"x\"} y", "", "{\"a\": tru}", "[1,]"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    va_json_t *b = va_json_parse(bad[i], strlen(bad[i]), err, sizeof err, NULL);
    if (b) {
      fprintf(stderr, "FAIL: JSON '%s' accepted\n", bad[i]);
      fails++;
      va_json_free(b);
    }
  }
  return fails;
}

/* Random bytes (biased towards UTF-8 lead bytes, '[' and special-token text) through the tokenizer
 * and the JSON reader: nothing may crash or write past the id buffer (run under ASan in development). */
static int check_random(va_tokenizer_t *tok) {
  static const char *const frags[] = {"[MASK]", "[CLS", "[SEP]", "\xe4\xb8\xad", "\xcc\x81", "\xf0\x9f\x98\x80",
                                      "##",     " ",    "\\u",   "\"",           "{",        "}"};
  uint64_t x = 88172645463325252ull;
  char buf[4096];
  int32_t ids[64];
  int fails = 0;
  for (int it = 0; it < 20000; it++) {
    size_t n = 0, len;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    len = x % sizeof buf;
    while (n < len) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      if (x % 4 == 0) {
        const char *f = frags[(x >> 8) % (sizeof frags / sizeof frags[0])];
        size_t fl = strlen(f);
        if (n + fl > len) break;
        memcpy(buf + n, f, fl);
        n += fl;
      } else if (x % 4 == 1) buf[n++] = (char)('a' + (x >> 8) % 26);
      else buf[n++] = (char)(x >> 16);
    }
    int max = 2 + (int)(x % 62);
    int k = va_tok_encode(tok, buf, n, max, ids, NULL);
    if (k < 2 || k > max || ids[0] != va_tok_special(tok)->cls || ids[k - 1] != va_tok_special(tok)->sep) {
      fprintf(stderr, "FAIL: random input %d gave %d ids (max %d)\n", it, k, max);
      fails++;
    }
    char err[128];
    va_json_free(va_json_parse(buf, n, err, sizeof err, NULL));
  }
  return fails;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_tokenizer MODEL_DIR DATA_DIR\n");
    return 2;
  }
  fx_need_model(argv[1], "vocab.txt");
  char path[4096], err[512];
  snprintf(path, sizeof path, "%s/vocab.txt", argv[1]);
  va_tokenizer_t *tok = va_tok_load(path, err, sizeof err);
  if (!tok) {
    fprintf(stderr, "FAIL: %s\n", err);
    return 1;
  }

  size_t clen, ilen;
  snprintf(path, sizeof path, "%s/embed_corpus.txt.gz", argv[2]);
  char *corpus = fx_read(path, &clen);
  snprintf(path, sizeof path, "%s/embed_corpus_ids.bin.gz", argv[2]);
  char *idsbuf = fx_read(path, &ilen);
  char **line;
  size_t *len;
  size_t n = fx_lines(corpus, clen, &line, &len);
  uint32_t nref;
  if (ilen < 12 || memcmp(idsbuf, "VATOKID1", 8)) {
    fprintf(stderr, "FAIL: bad ids fixture\n");
    return 1;
  }
  memcpy(&nref, idsbuf + 8, 4);
  if (nref != n) {
    fprintf(stderr, "FAIL: corpus has %zu lines, reference ids %u\n", n, nref);
    return 1;
  }

  int fails = check_utf8() + check_json() + check_random(tok);
  const unsigned char *p = (const unsigned char *)idsbuf + 12, *end = (const unsigned char *)idsbuf + ilen;
  int32_t ids[256];
  size_t bad_lines = 0, tokens = 0, truncated = 0, nonascii = 0;
  int64_t invalid = 0;
  double t0 = (double)clock() / CLOCKS_PER_SEC;
  for (size_t i = 0; i < n; i++) {
    if (p + 2 > end) {
      fprintf(stderr, "FAIL: reference ids end early\n");
      return 1;
    }
    unsigned m = p[0] | p[1] << 8;
    const unsigned char *ref = p + 2;
    p += 2 + 2 * m;
    va_tok_info_t info;
    int k = va_tok_encode(tok, line[i], len[i], 256, ids, &info);
    invalid += info.invalid_utf8;
    truncated += info.truncated != 0;
    tokens += (size_t)k;
    for (size_t b = 0; b < len[i]; b++)
      if ((unsigned char)line[i][b] >= 0x80) {
        nonascii++;
        break;
      }
    int same = k == (int)m;
    for (int j = 0; same && j < k; j++) same = ids[j] == (ref[2 * j] | ref[2 * j + 1] << 8);
    if (!same) {
      if (bad_lines < 10) {
        fprintf(stderr, "MISMATCH line %zu: '%.*s'\n  C   (%d):", i + 1, (int)(len[i] > 200 ? 200 : len[i]), line[i],
                k);
        for (int j = 0; j < k; j++) fprintf(stderr, " %d", ids[j]);
        fprintf(stderr, "\n  ref (%u):", m);
        for (unsigned j = 0; j < m; j++) fprintf(stderr, " %d", ref[2 * j] | ref[2 * j + 1] << 8);
        fprintf(stderr, "\n");
      }
      bad_lines++;
    }
  }
  double secs = (double)clock() / CLOCKS_PER_SEC - t0;
  printf("tokenizer parity: %zu of %zu lines identical (%zu non-ASCII, %zu truncated at 256, %lld ill-formed "
         "UTF-8 sequences), %zu tokens, %.0f lines/s\n",
         n - bad_lines, n, nonascii, truncated, (long long)invalid, tokens, secs > 0 ? (double)n / secs : 0.0);
  va_tok_free(tok);
  free(corpus);
  free(idsbuf);
  free(line);
  free(len);
  if (bad_lines || fails) {
    fprintf(stderr, "FAIL: %zu line(s) differ, %d UTF-8/JSON case(s) wrong\n", bad_lines, fails);
    return 1;
  }
  return 0;
}
