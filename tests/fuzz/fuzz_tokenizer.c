/* fuzz_tokenizer.c: libFuzzer harness of the BERT tokenizer's encoder (src/embed/tokenizer.c) and its
 * UTF-8 decoder, against a small committed vocabulary (tests/fuzz/tokenizer_vocab.txt: the special
 * tokens, ASCII, '##' continuations, Greek/Cyrillic/CJK/Hangul jamo pieces, long words) or the file
 * named by $VA_FUZZ_VOCAB (e.g. models/all-MiniLM-L6-v2/vocab.txt).
 * Input: byte 0 picks max_tokens (2..257), the rest is the text. Checked besides ASan/UBSan:
 * [CLS] ... [SEP] framing, 2 <= count <= max_tokens, every id inside the vocabulary, truncation only
 * when the output is full, the same ids from a fresh tokenizer, from a second encode with it and from
 * a tokenizer shared by every input (scratch buffers reused), and the decoder yields valid scalar values that re-encode
 * to the input when it reported no ill-formed sequence. */
#include "fuzz_common.h"

#include "embed/tokenizer.h"

#ifndef VA_FUZZ_DIR
#define VA_FUZZ_DIR "tests/fuzz"
#endif

static const char *vocab_path;
static va_tokenizer_t *shared; /* lives across inputs: its scratch buffers carry over, as in embed */

static va_tokenizer_t *load(void) {
  char err[1024];
  va_tokenizer_t *t = va_tok_load(vocab_path, err, sizeof err);
  if (!t) {
    fprintf(stderr, "fuzz_tokenizer: %s\n", err);
    abort();
  }
  return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  vocab_path = getenv("VA_FUZZ_VOCAB");
  if (!vocab_path || !*vocab_path) vocab_path = VA_FUZZ_DIR "/tokenizer_vocab.txt";
  shared = load();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int max_tokens = size ? 2 + data[0] : 128;
  const char *text = size ? (const char *)data + 1 : (const char *)data;
  size_t len = size ? size - 1 : 0;
  /* Exactly max_tokens ids: ASan catches any write past the caller's buffer. */
  int32_t *ids = malloc((size_t)max_tokens * sizeof *ids), *again = malloc((size_t)max_tokens * sizeof *ids);
  /* A fresh tokenizer per input (an input's result must not depend on what ran before), encoding
   * twice (the second time with its scratch in use), and the shared one once more. */
  va_tokenizer_t *tok = load();
  va_tok_info_t info;
  int n = va_tok_encode(tok, text, len, max_tokens, ids, &info);
  const va_tok_special_t *sp = va_tok_special(tok);
  int32_t nv = va_tok_vocab_size(tok);
  FZ_CHECK(n >= 2 && n <= max_tokens, "%d ids for max_tokens %d", n, max_tokens);
  FZ_CHECK(ids[0] == sp->cls && ids[n - 1] == sp->sep, "framing %d ... %d", ids[0], ids[n - 1]);
  for (int i = 0; i < n; i++) FZ_CHECK(ids[i] >= 0 && ids[i] < nv, "id %d at %d outside the vocabulary", ids[i], i);
  FZ_CHECK(!info.truncated || n == max_tokens, "truncated with %d of %d ids", n, max_tokens);
  FZ_CHECK(info.invalid_utf8 >= 0 && (size_t)info.invalid_utf8 <= len, "invalid_utf8 %lld",
           (long long)info.invalid_utf8);
  va_tok_info_t info2;
  int n2 = va_tok_encode(tok, text, len, max_tokens, again, &info2);
  FZ_CHECK(n2 == n && !memcmp(ids, again, (size_t)n * sizeof *ids) && info2.truncated == info.truncated &&
               info2.invalid_utf8 == info.invalid_utf8,
           "second encode differs");
  n2 = va_tok_encode(shared, text, len, max_tokens, again, &info2);
  FZ_CHECK(n2 == n && !memcmp(ids, again, (size_t)n * sizeof *ids), "encode with a used tokenizer differs");
  va_tok_free(tok);

  /* The decoder on its own. */
  uint32_t *cps = malloc((len ? len : 1) * sizeof *cps);
  int64_t bad = 0;
  size_t ncp = va_utf8_decode(text, len, cps, &bad);
  FZ_CHECK(ncp <= len && bad == info.invalid_utf8, "decoded %zu code points of %zu bytes, %lld errors", ncp, len,
           (long long)bad);
  for (size_t i = 0; i < ncp; i++)
    FZ_CHECK(cps[i] <= 0x10FFFF && (cps[i] < 0xD800 || cps[i] > 0xDFFF), "code point U+%X", (unsigned)cps[i]);
  if (bad == 0) {
    char *re = malloc(4 * ncp + 1);
    size_t rl = 0;
    for (size_t i = 0; i < ncp; i++) rl += (size_t)va_utf8_put(cps[i], re + rl);
    FZ_CHECK(rl == len && !memcmp(re, text, len), "valid UTF-8 does not round-trip (%zu -> %zu bytes)", len, rl);
    free(re);
  }
  free(cps);
  free(ids);
  free(again);
  return 0;
}
