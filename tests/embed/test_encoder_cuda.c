/* test_encoder_cuda.c: the CUDA encoder (src/embed/bert_cuda.cu) against sentence-transformers' fp32
 * embeddings of the 200 fixture lines (embed_ref.txt / .f32) and against the CPU encoder (bert_cpu.c)
 * on the same weights, in every precision, fp16 and bf16 each with the dense layers by cuBLASLt and by the
 * encoder's own kernel. First the dense kernel alone against a plain loop in double on the same rounded
 * inputs, every element within rel |ref| + 1e-5 sum |x w| (rel 2^-10 fp16, 2^-7 bf16: one rounding of
 * the output; the sum term covers fp32 accumulation, 1.2 times it after the GELU), for each epilogue and
 * row counts that do and do not fill the kernel's 128-row tiles. Tolerances, per line (cosine):
 *   vs the reference:   >= 0.9999 fp32, >= 0.999 fp16/bf16
 *   vs the CPU encoder: >= 0.999999 fp32 (same arithmetic, other summation order), >= 0.999 fp16/bf16
 *   own dense kernel vs cuBLASLt, same precision: >= 0.9999
 *   batch independence, a line alone vs in a mixed batch of 32: >= 0.999999 fp32, >= 0.9999 fp16/bf16
 *   (only the GEMM algorithm, chosen per row count, differs)
 *   unit norms: |norm - 1| <= 1e-5
 * and exactly (bit for bit): the same batch twice, and two batches in flight (submit, submit, collect,
 * collect) vs one at a time. Lines longer than 256 tokens re-tokenized at 512 (attention over up to 512 keys) are
 * checked against the CPU encoder only (the reference stops at 256). The weights file is model-fp16.safetensors by
 * default (what travels to GPU machines): the CPU encoder runs on the same weights, so the fp32 comparison with it is
 * exact arithmetic; with these weights the CPU encoder itself reaches 0.9999993 against the fp32 reference
 * (docs/embed.md). Without a CUDA device: prints "SKIP: no CUDA device" and exits 77. `--probe` only does that check.
 * usage: test_encoder_cuda MODEL_DIR DATA_DIR [WEIGHTS_FILE] | test_encoder_cuda --probe */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "embed/bert_cpu.h"
#include "embed/bert_cuda.h"
#include "embed/tokenizer.h"
#include "fixture.h"
#include "cpu/assign.h"
#include "cuda/kernels.h"
#include "util/util.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
  int n;
  int32_t *ids;
  int *lens;
  int64_t *offs; /* n + 1 */
} seqs_t;

static void cpu_encode(const va_bert_t *m, const seqs_t *s, float *out, va_bert_work_t *w) {
  for (int i = 0; i < s->n; i += 32) {
    int nb = s->n - i < 32 ? s->n - i : 32;
    if (va_bert_encode(m, s->ids + s->offs[i], s->lens + i, nb, out + (int64_t)i * m->hidden, w)) {
      fprintf(stderr, "FAIL: CPU encode out of memory\n");
      exit(1);
    }
  }
}

/* Lines [first, first + count) in batches of `batch`; returns the summed forward milliseconds. */
static double gpu_encode(va_bert_cuda_t *g, const seqs_t *s, int first, int count, int batch, float *out, int d) {
  double ms = 0;
  for (int i = first; i < first + count; i += batch) {
    int nb = first + count - i < batch ? first + count - i : batch;
    ms += va_bert_cuda_encode(g, s->ids + s->offs[i], s->lens + i, nb, out + (int64_t)(i - first) * d);
  }
  return ms;
}

typedef struct {
  double min_ref, min_cpu, min_alone, max_norm;
  int worst_ref, worst_cpu;
} stats_t;

#include "../check.h" /* failures, CHECK */

/* v rounded to fp16 (normal range: the test's values stay above 2^-14) or bf16, to nearest even. */
static float round_to(float v, int precision) {
  uint32_t u;
  memcpy(&u, &v, 4);
  const int drop = precision == VA_BERT_FP16 ? 13 : 16;
  u += ((1u << (drop - 1)) - 1) + ((u >> drop) & 1);
  u &= ~((1u << drop) - 1);
  memcpy(&v, &u, 4);
  return v;
}

/* Deterministic values of magnitude [lo, 16 lo), either sign, already rounded to the precision. */
static void fill(float *v, size_t n, float lo, uint64_t *state, int precision) {
  for (size_t i = 0; i < n; i++) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = (double)(*state >> 11) / 9007199254740992.0;
    const float x = (float)(lo * (1 + 15 * u)) * ((*state >> 7) & 1 ? -1.f : 1.f);
    v[i] = round_to(x, precision);
  }
}

/* The dense kernel alone: returns the worst error as a multiple of its tolerance (<= 1 passes). */
static double dense_case(int precision, int ep, int64_t m, int n, int k, uint64_t seed) {
  float *x = malloc((size_t)(m * k) * sizeof(float)), *w = malloc((size_t)n * k * sizeof(float));
  float *b = malloc((size_t)n * sizeof(float)), *d = malloc((size_t)(m * n) * sizeof(float));
  float *d0 = malloc((size_t)(m * n) * sizeof(float));
  uint64_t st = seed;
  fill(x, (size_t)(m * k), 0.0625f, &st, precision);
  fill(w, (size_t)n * k, 0.0625f / sqrtf((float)k), &st, precision);
  fill(b, (size_t)n, 0.0625f, &st, precision);
  fill(d0, (size_t)(m * n), 0.0625f, &st, precision);
  memcpy(d, d0, (size_t)(m * n) * sizeof(float));
  if (va_bert_cuda_dense_run(0, precision, ep, x, w, b, d, m, n, k)) {
    fprintf(stderr, "the dense kernel refused %lld x %d x %d\n", (long long)m, n, k);
    return INFINITY;
  }
  const double rel = precision == VA_BERT_FP16 ? 1.0 / 1024 : 1.0 / 128;
  double worst = 0;
  for (int64_t i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = b[j], mag = 0;
      for (int q = 0; q < k; q++) {
        const double p = (double)x[i * k + q] * w[(int64_t)j * k + q];
        s += p;
        mag += fabs(p);
      }
      if (ep == 2) s += d0[i * n + j];
      double tol_abs = 1e-5 * mag;
      if (ep == 1) {
        s = 0.5 * s * (1 + tanh(0.7978845608028654 * (s + 0.044715 * s * s * s)));
        tol_abs *= 1.2;
      }
      const double got = d[i * n + j], e = fabs(got - s) / (rel * fabs(s) + tol_abs);
      if (!(e <= worst)) worst = e; /* NaN counts as worst */
    }
  free(x);
  free(w);
  free(b);
  free(d);
  free(d0);
  return worst;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  va_proc_init();
  if (va_cuda_device_count() <= 0) {
    printf("SKIP: no CUDA device\n");
    MPI_Finalize();
    return 77;
  }
  if (argc == 2 && !strcmp(argv[1], "--probe")) {
    MPI_Finalize();
    return 0;
  }
  if (argc < 3) {
    fprintf(stderr, "usage: test_encoder_cuda MODEL_DIR DATA_DIR [WEIGHTS_FILE]\n");
    return 2;
  }
  const char *dir = argv[1], *wfile = argc > 3 ? argv[3] : "model-fp16.safetensors";
  fx_need_model(dir, "vocab.txt");
  fx_need_model(dir, "config.json");
  fx_need_model(dir, wfile);
  char path[4096], cpath[4096], err[1024];
  snprintf(path, sizeof path, "%s/vocab.txt", dir);
  va_tokenizer_t *tok = va_tok_load(path, err, sizeof err);
  if (!tok) {
    fprintf(stderr, "FAIL: %s\n", err);
    return 1;
  }
  snprintf(cpath, sizeof cpath, "%s/config.json", dir);
  snprintf(path, sizeof path, "%s/%s", dir, wfile);
  va_bert_t m;
  if (va_bert_load(cpath, path, &m, err, sizeof err)) {
    fprintf(stderr, "FAIL: %s\n", err);
    return 1;
  }
  const int d = m.hidden;

  /* the dense kernel alone: epilogue (bias, GELU, residual), rows, outputs, inputs */
  const int dense_cases[][4] = {
      {0, 256, 384, 384}, {0, 200, 1152, 384}, {1, 200, 1536, 384}, {2, 130, 384, 1536}, {2, 1, 128, 64}};
  for (int p = VA_BERT_FP16; p <= VA_BERT_BF16; p++)
    for (size_t c = 0; c < sizeof dense_cases / sizeof dense_cases[0]; c++) {
      const int *dc = dense_cases[c];
      const double e = dense_case(p, dc[0], dc[1], dc[2], dc[3], 0x5eed + 17 * c);
      printf("dense kernel %s, epilogue %d, %d x %d x %d: worst error %.3f of its tolerance\n",
             va_bert_cuda_precision_name(p), dc[0], dc[1], dc[2], dc[3], e);
      CHECK(e <= 1, "dense kernel %s, epilogue %d, %d x %d x %d: error %.3f times the tolerance",
            va_bert_cuda_precision_name(p), dc[0], dc[1], dc[2], dc[3], e);
    }

  size_t tlen;
  snprintf(path, sizeof path, "%s/embed_ref.txt", argv[2]);
  char *text = fx_read(path, &tlen);
  char **line;
  size_t *len;
  const int n = (int)fx_lines(text, tlen, &line, &len);
  snprintf(path, sizeof path, "%s/embed_ref.f32", argv[2]);
  float *ref = fx_reference(path, (uint32_t)n, (uint32_t)d);

  /* the fixture lines at 256 tokens, and those that are longer at 512 */
  seqs_t s = {n, malloc((size_t)n * 256 * sizeof(int32_t)), malloc((size_t)n * sizeof(int)),
              malloc((size_t)(n + 1) * sizeof(int64_t))};
  seqs_t lg = {0, malloc((size_t)n * 512 * sizeof(int32_t)), malloc((size_t)n * sizeof(int)),
               malloc((size_t)(n + 1) * sizeof(int64_t))};
  int64_t tokens = 0, ltokens = 0;
  for (int i = 0; i < n; i++) {
    s.offs[i] = tokens;
    va_tok_info_t info;
    s.lens[i] = va_tok_encode(tok, line[i], len[i], 256, s.ids + tokens, &info);
    tokens += s.lens[i];
    if (info.truncated) {
      lg.offs[lg.n] = ltokens;
      lg.lens[lg.n] = va_tok_encode(tok, line[i], len[i], 512, lg.ids + ltokens, NULL);
      ltokens += lg.lens[lg.n++];
    }
  }
  s.offs[n] = tokens;
  lg.offs[lg.n] = ltokens;
  int maxlong = 0;
  for (int i = 0; i < lg.n; i++) maxlong = lg.lens[i] > maxlong ? lg.lens[i] : maxlong;

  /* CPU encoder on the same weights */
  va_bert_work_t w = {0};
  w.threads = va_cpu_count();
  va_blas_threads(w.threads);
  float *cpu = malloc((size_t)n * d * sizeof(float)), *cpu_long = malloc((size_t)(lg.n ? lg.n : 1) * d * sizeof(float));
  double t0 = now();
  cpu_encode(&m, &s, cpu, &w);
  cpu_encode(&m, &lg, cpu_long, &w);
  double cpu_secs = now() - t0, cpu_ref = 2;
  for (int i = 0; i < n; i++) {
    double c = fx_cosine(cpu + (int64_t)i * d, ref + (int64_t)i * d, d);
    cpu_ref = c < cpu_ref ? c : cpu_ref;
  }
  printf("%d lines (%lld tokens) + %d lines re-tokenized at 512 (up to %d tokens); weights %s (%s); CPU encoder (%d "
         "threads, %.2f s): min cosine %.9f to the reference\n",
         n, (long long)tokens, lg.n, maxlong, wfile, m.weights_dtype, w.threads, cpu_secs, cpu_ref);

  float *out = malloc((size_t)n * d * sizeof(float)), *alone = malloc((size_t)n * d * sizeof(float)),
        *again = malloc((size_t)64 * d * sizeof(float));
  float *out_long = malloc((size_t)(lg.n ? lg.n : 1) * d * sizeof(float));
  float *lt_out = malloc((size_t)n * d * sizeof(float)); /* the last cuBLASLt run's rows */
  const struct {
    int precision, dense;
    double ref, cpu, alone;
  } runs[] = {{VA_BERT_FP32, VA_BERT_DENSE_CUBLASLT, 0.9999, 0.999999, 0.999999},
              {VA_BERT_FP16, VA_BERT_DENSE_CUBLASLT, 0.999, 0.999, 0.9999},
              {VA_BERT_FP16, VA_BERT_DENSE_MMA, 0.999, 0.999, 0.9999},
              {VA_BERT_BF16, VA_BERT_DENSE_CUBLASLT, 0.999, 0.999, 0.9999},
              {VA_BERT_BF16, VA_BERT_DENSE_MMA, 0.999, 0.999, 0.9999}};
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
    char pn[64];
    snprintf(pn, sizeof pn, "%s, dense layers by %s", va_bert_cuda_precision_name(runs[r].precision),
             runs[r].dense == VA_BERT_DENSE_MMA ? "the own kernel" : "cuBLASLt");
    va_bert_cuda_t *g =
        va_bert_cuda_create(&m, NULL, 0, runs[r].precision, runs[r].dense, 64, 64 * 512, err, sizeof err);
    if (!g) {
      CHECK(0, "%s: %s", pn, err);
      continue;
    }
    CHECK(va_bert_cuda_dense(g) == runs[r].dense, "%s: the encoder took the other dense layers", pn);
    char desc[256];
    va_bert_cuda_describe(g, desc, sizeof desc);
    gpu_encode(g, &s, 0, n, 32, out, d);                                /* warm-up (algorithm choice, module load) */
    for (size_t e = 0; e < (size_t)n * d; e++) out[e] = alone[e] = NAN; /* every row must be written */
    for (size_t e = 0; e < (size_t)lg.n * d; e++) out_long[e] = NAN;
    double ms = gpu_encode(g, &s, 0, n, 32, out, d);
    const int n_alone = n < 40 ? n : 40;
    gpu_encode(g, &s, 0, n_alone, 1, alone, d);
    gpu_encode(g, &lg, 0, lg.n, 8, out_long, d);
    stats_t st = {2, 2, 2, 0, -1, -1};
    for (int i = 0; i < n; i++) {
      const float *o = out + (int64_t)i * d;
      double c = fx_cosine(o, ref + (int64_t)i * d, d), cc = fx_cosine(o, cpu + (int64_t)i * d, d);
      if (!(c >= st.min_ref)) {
        st.min_ref = c;
        st.worst_ref = i;
      }
      if (!(cc >= st.min_cpu)) {
        st.min_cpu = cc;
        st.worst_cpu = i;
      }
      if (!(c >= runs[r].ref))
        fprintf(stderr, "LOW %s line %d (%d tokens): cosine %.7f to the reference\n", pn, i + 1, s.lens[i], c);
      if (i < n_alone) {
        double ca = fx_cosine(o, alone + (int64_t)i * d, d);
        if (!(ca >= st.min_alone)) st.min_alone = ca;
      }
      double nr = 0;
      for (int j = 0; j < d; j++) nr += (double)o[j] * o[j];
      if (!(fabs(sqrt(nr) - 1) <= st.max_norm)) st.max_norm = fabs(sqrt(nr) - 1);
    }
    double min_long = 2;
    for (int i = 0; i < lg.n; i++) {
      double c = fx_cosine(out_long + (int64_t)i * d, cpu_long + (int64_t)i * d, d);
      if (!(c >= min_long)) min_long = c;
    }
    /* exactness: the first batch again, and two batches in flight */
    gpu_encode(g, &s, 0, 32, 32, again, d);
    int same = !memcmp(again, out, (size_t)32 * d * sizeof(float));
    for (size_t e = 0; e < (size_t)64 * d; e++) again[e] = NAN;
    va_bert_cuda_submit(g, s.ids + s.offs[0], s.lens, 32, 0);
    va_bert_cuda_submit(g, s.ids + s.offs[32], s.lens + 32, 32, 0);
    va_bert_cuda_collect(g, again);
    va_bert_cuda_collect(g, again + (int64_t)32 * d);
    int inflight = !memcmp(again, out, (size_t)64 * d * sizeof(float));
    /* a context made for tiny batches from weights staged before it, warmed up, then grown (as vecanneal
     * embed stages the weights while the device starts and sets the context up while it tokenizes): the
     * same bits */
    va_bert_cuda_weights_t *staged = va_bert_cuda_stage(&m, runs[r].precision);
    va_bert_cuda_t *small =
        va_bert_cuda_create(&m, staged, 0, runs[r].precision, runs[r].dense, 64, 64, err, sizeof err);
    va_bert_cuda_weights_free(staged);
    int grown = 0;
    if (small) {
      va_bert_cuda_warm_up(small);
      va_bert_cuda_reserve(small, 64 * 512);
      for (size_t e = 0; e < (size_t)32 * d; e++) again[e] = NAN;
      gpu_encode(small, &s, 0, 32, 32, again, d);
      grown = !memcmp(again, out, (size_t)32 * d * sizeof(float));
      va_bert_cuda_free(small);
    }
    printf("%s: %s\n  vs reference min cosine %.9f (1 - cos = %.2e, line %d); vs CPU min %.9f (1 - cos = %.2e, line "
           "%d); %d lines at 512: min %.9f vs CPU\n"
           "  alone vs batch of 32 min %.9f; max |norm - 1| %.1e; repeat identical %s; two in flight identical %s; "
           "staged, grown context identical %s;"
           " forward %.1f lines/s (batch 32)\n",
           pn, desc, st.min_ref, 1 - st.min_ref, st.worst_ref + 1, st.min_cpu, 1 - st.min_cpu, st.worst_cpu + 1, lg.n,
           min_long, st.min_alone, st.max_norm, same ? "yes" : "NO", inflight ? "yes" : "NO", grown ? "yes" : "NO",
           n / (ms * 1e-3));
    CHECK(st.min_ref >= runs[r].ref, "%s: min cosine to the reference %.7f < %g", pn, st.min_ref, runs[r].ref);
    CHECK(st.min_cpu >= runs[r].cpu, "%s: min cosine to the CPU encoder %.9f < %g", pn, st.min_cpu, runs[r].cpu);
    CHECK(min_long >= runs[r].cpu, "%s: min cosine to the CPU encoder at 512 tokens %.9f < %g", pn, min_long,
          runs[r].cpu);
    CHECK(st.min_alone >= runs[r].alone, "%s: a line alone vs in a batch: min cosine %.9f < %g", pn, st.min_alone,
          runs[r].alone);
    CHECK(st.max_norm <= 1e-5, "%s: |norm - 1| up to %.2e", pn, st.max_norm);
    CHECK(same, "%s: the same batch twice gave different bits", pn);
    CHECK(inflight, "%s: two batches in flight differ from one at a time", pn);
    CHECK(grown, "%s: a context from staged weights, warmed up and grown, gave different bits", pn);
    if (runs[r].dense == VA_BERT_DENSE_MMA) { /* against the cuBLASLt run of the same precision just before */
      double min_lt = 2;
      for (int i = 0; i < n; i++) {
        const double c = fx_cosine(out + (int64_t)i * d, lt_out + (int64_t)i * d, d);
        if (!(c >= min_lt)) min_lt = c;
      }
      printf("  own dense kernel vs cuBLASLt: min cosine %.9f (1 - cos = %.2e)\n", min_lt, 1 - min_lt);
      CHECK(min_lt >= 0.9999, "%s: min cosine to the cuBLASLt run %.9f < 0.9999", pn, min_lt);
    } else {
      memcpy(lt_out, out, (size_t)n * d * sizeof(float));
    }
    va_bert_cuda_free(g);
  }
  va_bert_work_free(&w);
  va_bert_free(&m);
  va_tok_free(tok);
  free(s.ids);
  free(s.lens);
  free(s.offs);
  free(lg.ids);
  free(lg.lens);
  free(lg.offs);
  free(cpu);
  free(cpu_long);
  free(out);
  free(alone);
  free(again);
  free(out_long);
  free(lt_out);
  free(text);
  free(ref);
  free(line);
  free(len);
  MPI_Finalize();
  if (failures) {
    fprintf(stderr, "FAIL (%d checks)\n", failures);
    return 1;
  }
  printf("PASS\n");
  return 0;
}
