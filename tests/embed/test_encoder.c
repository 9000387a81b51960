/* test_encoder.c: the C tokenizer + CPU encoder against sentence-transformers' own fp32 embeddings of
 * 200 corpus lines (tests/data/embed_ref.txt / embed_ref.f32, made by tests/embed/make_fixture.py):
 * every line must reach cosine >= 0.9999. Also checks that a line's embedding does not depend on the
 * batch it is encoded in (alone vs. in a batch of 32 of mixed lengths), that outputs are unit vectors,
 * and reports the agreement of the fp16 weights (model-fp16.safetensors) when present.
 * usage: test_encoder MODEL_DIR DATA_DIR [threads] */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "embed/bert_cpu.h"
#include "cpu/assign.h"
#include "embed/tokenizer.h"
#include "fixture.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Encodes all lines in batches of `batch` (in order); returns seconds. */
static double encode_all(const va_bert_t *m, const int32_t *ids, const int *lens, const int64_t *offs, int n, int batch,
                         float *out, va_bert_work_t *w) {
  double t0 = now();
  for (int i = 0; i < n; i += batch) {
    int nb = n - i < batch ? n - i : batch;
    if (va_bert_encode(m, ids + offs[i], lens + i, nb, out + (int64_t)i * m->hidden, w)) {
      fprintf(stderr, "FAIL: encode out of memory\n");
      exit(1);
    }
  }
  return now() - t0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_encoder MODEL_DIR DATA_DIR [threads]\n");
    return 2;
  }
  const char *dir = argv[1];
  fx_need_model(dir, "vocab.txt");
  fx_need_model(dir, "config.json");
  fx_need_model(dir, "model.safetensors");
  char path[4096], cpath[4096], err[1024];
  snprintf(path, sizeof path, "%s/vocab.txt", dir);
  va_tokenizer_t *tok = va_tok_load(path, err, sizeof err);
  if (!tok) {
    fprintf(stderr, "FAIL: %s\n", err);
    return 1;
  }
  snprintf(cpath, sizeof cpath, "%s/config.json", dir);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  va_bert_t m;
  double t0 = now();
  if (va_bert_load(cpath, path, &m, err, sizeof err)) {
    fprintf(stderr, "FAIL: %s\n", err);
    return 1;
  }
  printf("loaded %s (%s, %d layers, hidden %d, %d heads, ffn %d) in %.2f s\n", path, m.weights_dtype, m.layers,
         m.hidden, m.heads, m.ffn, now() - t0);

  size_t tlen;
  snprintf(path, sizeof path, "%s/embed_ref.txt", argv[2]);
  char *text = fx_read(path, &tlen);
  char **line;
  size_t *len;
  int n = (int)fx_lines(text, tlen, &line, &len);
  snprintf(path, sizeof path, "%s/embed_ref.f32", argv[2]);
  float *ref = fx_reference(path, (uint32_t)n, (uint32_t)m.hidden);

  int32_t *ids = malloc((size_t)n * 256 * sizeof *ids);
  int *lens = malloc((size_t)n * sizeof *lens);
  int64_t *offs = malloc((size_t)(n + 1) * sizeof *offs);
  int64_t tokens = 0;
  for (int i = 0; i < n; i++) {
    offs[i] = tokens;
    lens[i] = va_tok_encode(tok, line[i], len[i], 256, ids + tokens, NULL);
    tokens += lens[i];
  }
  offs[n] = tokens;
  va_bert_work_t w = {0};
  w.threads = argc > 3 ? atoi(argv[3]) : 1;
  va_blas_threads(w.threads);
  float *out = malloc((size_t)n * m.hidden * sizeof(float)), *alone = malloc((size_t)n * m.hidden * sizeof(float));
  double secs = encode_all(&m, ids, lens, offs, n, 32, out, &w);
  /* batch independence: the first 40 lines one at a time (the same code path as any batch size) */
  const int n_alone = n < 40 ? n : 40;
  encode_all(&m, ids, lens, offs, n_alone, 1, alone, &w);

  double min_cos = 2, min_batch = 2, max_norm_err = 0;
  int worst = -1, below = 0;
  for (int i = 0; i < n; i++) {
    double c = fx_cosine(out + (int64_t)i * m.hidden, ref + (int64_t)i * m.hidden, m.hidden);
    if (c < min_cos) {
      min_cos = c;
      worst = i;
    }
    if (c < 0.9999) {
      below++;
      fprintf(stderr, "LOW line %d (%d tokens): cosine %.7f '%.*s'\n", i + 1, lens[i], c,
              (int)(len[i] > 100 ? 100 : len[i]), line[i]);
    }
    if (i < n_alone) {
      double cb = fx_cosine(out + (int64_t)i * m.hidden, alone + (int64_t)i * m.hidden, m.hidden);
      if (cb < min_batch) min_batch = cb;
    }
    double nr = 0;
    for (int j = 0; j < m.hidden; j++) nr += (double)out[(int64_t)i * m.hidden + j] * out[(int64_t)i * m.hidden + j];
    if (fabs(sqrt(nr) - 1) > max_norm_err) max_norm_err = fabs(sqrt(nr) - 1);
  }
  printf("encoder vs sentence-transformers: %d lines, %lld tokens, min cosine %.9f (1 - cos = %.2e, line %d, %d "
         "tokens), %d below 0.9999; "
         "batch-of-1 vs batch-of-32 min cosine %.9f (%d lines); max |norm - 1| %.2e; %.1f lines/s (%d thread(s), batch "
         "32)\n",
         n, (long long)tokens, min_cos, 1 - min_cos, worst + 1, worst >= 0 ? lens[worst] : 0, below, min_batch, n_alone,
         max_norm_err, n / secs, w.threads);
  int fail = below > 0 || min_batch < 0.99999 || max_norm_err > 1e-4;

  /* fp16 weights: informational bound (half precision loses ~3 decimal digits per weight). */
  snprintf(path, sizeof path, "%s/model-fp16.safetensors", dir);
  FILE *f16 = fopen(path, "rb");
  if (f16) {
    fclose(f16);
    va_bert_t mh;
    if (va_bert_load(cpath, path, &mh, err, sizeof err)) {
      fprintf(stderr, "FAIL: fp16 weights: %s\n", err);
      fail = 1;
    } else {
      const int n16 = n < 100 ? n : 100; /* a subset keeps the test short */
      encode_all(&mh, ids, lens, offs, n16, 32, alone, &w);
      double mc = 2;
      for (int i = 0; i < n16; i++) {
        double c = fx_cosine(alone + (int64_t)i * m.hidden, ref + (int64_t)i * m.hidden, m.hidden);
        if (c < mc) mc = c;
      }
      printf(
          "fp16 weights (held as fp32): min cosine %.9f (1 - cos = %.2e) vs sentence-transformers fp32 on %d lines\n",
          mc, 1 - mc, n16);
      if (mc < 0.999) {
        fprintf(stderr, "FAIL: fp16 weights min cosine %.7f < 0.999\n", mc);
        fail = 1;
      }
      va_bert_free(&mh);
    }
  }
  va_bert_work_free(&w);
  va_bert_free(&m);
  va_tok_free(tok);
  free(ids);
  free(lens);
  free(offs);
  free(out);
  free(alone);
  free(text);
  free(ref);
  free(line);
  free(len);
  if (fail) {
    fprintf(stderr, "FAIL\n");
    return 1;
  }
  return 0;
}
