/* embed_gpu_bench.c: the CUDA encoder alone (bench/embed_gpu.sh runs it). The corpus's lines are
 * tokenized (truncation 256), sorted longest first and cut into batches as `vecanneal embed` does, and
 * encoded with two batches in flight; after one warm-up pass, REPS passes are timed two ways:
 *   forward: the sum of the batches' forward times on the GPU (CUDA events around each forward pass,
 *            after the ids' upload and before the results' download) -- the encoder alone;
 *   pass:    the host clock around the whole pass (packing, uploads, forwards, downloads, unpacking).
 * Prints one JSON line per precision with the medians and sentences/s. A precision with "+mma" (fp16+mma,
 * bf16+mma) multiplies the dense layers with the encoder's own kernel instead of cuBLASLt.
 * usage: embed_gpu_bench MODEL_DIR WEIGHTS_FILE CORPUS.txt BATCH REPS PRECISIONS (e.g. fp16,bf16,fp16+mma) */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "embed/bert_cpu.h"
#include "embed/bert_cuda.h"
#include "embed/tokenizer.h"
#include "fixture.h"
#include "cuda/kernels.h"
#include "util/util.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const int *sort_lens;
static int by_len_desc(const void *x, const void *y) {
  int i = *(const int *)x, j = *(const int *)y;
  if (sort_lens[i] != sort_lens[j]) return sort_lens[i] > sort_lens[j] ? -1 : 1;
  return (i > j) - (i < j);
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* One pass over all batches (ids packed in sorted order), two in flight; returns the summed forward ms. */
static double pass(va_bert_cuda_t *g, const int32_t *ids, const int *lens, const int64_t *offs, int n, int batch,
                   float *out, int d) {
  double fwd = 0;
  int pend = -1;
  for (int s = 0; s < n || pend >= 0; s += batch) {
    if (s < n) va_bert_cuda_submit(g, ids + offs[s], lens + s, n - s < batch ? n - s : batch, 0);
    if (pend >= 0) fwd += va_bert_cuda_collect(g, out + (int64_t)pend * d);
    pend = s < n ? s : -1;
  }
  return fwd;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  va_proc_init();
  if (va_cuda_device_count() <= 0) {
    printf("SKIP: no CUDA device\n");
    MPI_Finalize();
    return 77;
  }
  if (argc < 7) {
    fprintf(stderr, "usage: embed_gpu_bench MODEL_DIR WEIGHTS_FILE CORPUS.txt BATCH REPS PRECISIONS\n");
    return 2;
  }
  const char *dir = argv[1];
  const int batch = atoi(argv[4]), reps = atoi(argv[5]);
  char path[4096], cpath[4096], err[1024];
  snprintf(path, sizeof path, "%s/vocab.txt", dir);
  va_tokenizer_t *tok = va_tok_load(path, err, sizeof err);
  snprintf(cpath, sizeof cpath, "%s/config.json", dir);
  snprintf(path, sizeof path, "%s/%s", dir, argv[2]);
  va_bert_t m;
  if (!tok || va_bert_load(cpath, path, &m, err, sizeof err)) {
    fprintf(stderr, "error: %s\n", err);
    return 1;
  }
  const int d = m.hidden;
  size_t tlen;
  char *text = fx_read(argv[3], &tlen);
  char **line;
  size_t *len;
  const int n = (int)fx_lines(text, tlen, &line, &len);
  int32_t *raw = malloc((size_t)n * 256 * sizeof *raw), *ids = malloc((size_t)n * 256 * sizeof *ids);
  int *rlens = malloc((size_t)n * sizeof(int)), *lens = malloc((size_t)n * sizeof(int)),
      *order = malloc((size_t)n * sizeof(int));
  int64_t *roffs = malloc((size_t)(n + 1) * sizeof(int64_t)), *offs = malloc((size_t)(n + 1) * sizeof(int64_t)),
          tokens = 0;
  for (int i = 0; i < n; i++) {
    roffs[i] = tokens;
    rlens[i] = va_tok_encode(tok, line[i], len[i], 256, raw + tokens, NULL);
    tokens += rlens[i];
    order[i] = i;
  }
  sort_lens = rlens;
  qsort(order, (size_t)n, sizeof *order, by_len_desc);
  int64_t t = 0, first_batch = 0;
  for (int k = 0; k < n; k++) {
    offs[k] = t;
    lens[k] = rlens[order[k]];
    memcpy(ids + t, raw + roffs[order[k]], (size_t)lens[k] * sizeof *ids);
    t += lens[k];
    if (k < batch) first_batch += lens[k];
  }
  offs[n] = t;
  float *out = malloc((size_t)n * d * sizeof(float));
  double *fw = malloc((size_t)reps * sizeof(double)), *wall = malloc((size_t)reps * sizeof(double));

  char *precs = strdup(argv[6]), *psave = NULL;
  for (char *pn = strtok_r(precs, ",", &psave); pn; pn = strtok_r(NULL, ",", &psave)) {
    char *plus = strchr(pn, '+');
    const int dense = plus && !strcmp(plus, "+mma") ? VA_BERT_DENSE_MMA : VA_BERT_DENSE_CUBLASLT;
    if (plus) *plus = 0;
    const int prec = va_bert_cuda_precision(pn);
    if (prec < 0) {
      fprintf(stderr, "error: unknown precision '%s'\n", pn);
      return 2;
    }
    va_bert_cuda_t *g = va_bert_cuda_create(&m, NULL, 0, prec, dense, batch, first_batch, err, sizeof err);
    if (!g) {
      fprintf(stderr, "error: %s\n", err);
      return 1;
    }
    char desc[256];
    va_bert_cuda_describe(g, desc, sizeof desc);
    pass(g, ids, lens, offs, n, batch, out, d); /* warm-up: module load, cuBLASLt algorithm choice */
    for (int r = 0; r < reps; r++) {
      double t0 = now();
      fw[r] = pass(g, ids, lens, offs, n, batch, out, d);
      wall[r] = 1e3 * (now() - t0);
    }
    qsort(fw, (size_t)reps, sizeof *fw, cmp_double);
    qsort(wall, (size_t)reps, sizeof *wall, cmp_double);
    const double fmed = fw[reps / 2], wmed = wall[reps / 2];
    printf(
        "{\"impl\": \"vecanneal\", \"device\": \"%s\", \"precision\": \"%s\", \"dense\": \"%s\", \"corpus\": \"%s\", "
        "\"lines\": %d, "
        "\"tokens\": %lld, "
        "\"batch\": %d, \"reps\": %d, \"forward_ms_median\": %.3f, \"forward_ms_min\": %.3f, \"pass_ms_median\": %.3f, "
        "\"forward_sentences_per_s\": %.1f, \"pass_sentences_per_s\": %.1f}\n",
        desc, pn, va_bert_cuda_dense_name(va_bert_cuda_dense(g)), argv[3], n, (long long)tokens, batch, reps, fmed,
        fw[0], wmed, n / (fmed * 1e-3), n / (wmed * 1e-3));
    fflush(stdout);
    va_bert_cuda_free(g);
  }
  free(precs);
  free(raw);
  free(ids);
  free(rlens);
  free(lens);
  free(order);
  free(roffs);
  free(offs);
  free(out);
  free(fw);
  free(wall);
  free(text);
  free(line);
  free(len);
  va_bert_free(&m);
  va_tok_free(tok);
  MPI_Finalize();
  return 0;
}
