/* bert_cpu.c: BERT forward pass on the CPU, as Hugging Face's BertModel computes it in eval mode
 * (dropout off): embeddings (word + absolute position + token type 0) and LayerNorm, then per layer
 *   qkv = x Wqkv^T + b;  per sequence and head: softmax(q k^T / sqrt(d_head)) v;  a = LN(x + ctx Wo^T + bo)
 *   x = LN(a + GELU(a W1^T + b1) W2^T + b2),  GELU(z) = z/2 (1 + erf(z / sqrt 2)),
 * then mean pooling and L2 normalisation (sentence-transformers' Pooling + Normalize modules).
 * Weights are [out, in] (PyTorch Linear), so each dense layer is sgemm(NoTrans, Trans). */
#include "bert_cpu.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "safetensors.h"

/* --- loading ------------------------------------------------------------------------------------ */
static int read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "cannot open '%s'", path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  char *b = malloc(cap);
  size_t r;
  while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) {
      char *nb = realloc(b, cap * 2);
      if (!nb) {
        free(b);
        b = NULL;
        break;
      }
      b = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (!b) {
    snprintf(err, errlen, "out of memory reading '%s'", path);
    return -1;
  }
  *buf = b;
  *len = n;
  return 0;
}

/* Carves n floats off the weight arena. */
static float *take(float **a, size_t n) {
  float *p = *a;
  *a += n;
  return p;
}

static int config_int(const va_json_t *c, const char *key, int *out, char *err, size_t errlen) {
  const va_json_t *v = va_json_get(c, key);
  if (!v || v->type != VA_JSON_NUM || v->num < 1 || v->num > 1e7 || v->num != (int)v->num) {
    snprintf(err, errlen, "config.json: '%s' missing or not a positive integer", key);
    return -1;
  }
  *out = (int)v->num;
  return 0;
}

int va_bert_load(const char *config_path, const char *weights_path, va_bert_t *m, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  char *cbuf, jerr[256];
  size_t clen;
  if (read_file(config_path, &cbuf, &clen, err, errlen)) return -1;
  va_json_t *c = va_json_parse(cbuf, clen, jerr, sizeof jerr, NULL);
  free(cbuf);
  if (!c || c->type != VA_JSON_OBJ) {
    snprintf(err, errlen, "'%s' is not valid JSON (%s)", config_path, c ? "not an object" : jerr);
    va_json_free(c);
    return -1;
  }
  int rc = config_int(c, "hidden_size", &m->hidden, err, errlen) ||
           config_int(c, "num_hidden_layers", &m->layers, err, errlen) ||
           config_int(c, "num_attention_heads", &m->heads, err, errlen) ||
           config_int(c, "intermediate_size", &m->ffn, err, errlen) ||
           config_int(c, "vocab_size", &m->vocab, err, errlen) ||
           config_int(c, "max_position_embeddings", &m->max_pos, err, errlen);
  const va_json_t *eps = va_json_get(c, "layer_norm_eps"), *act = va_json_get(c, "hidden_act"),
                  *pet = va_json_get(c, "position_embedding_type"), *mt = va_json_get(c, "model_type");
  m->ln_eps = eps && eps->type == VA_JSON_NUM ? (float)eps->num : 1e-12f;
  if (!rc && (!act || act->type != VA_JSON_STR || strcmp(act->str, "gelu"))) {
    snprintf(err, errlen, "config.json: hidden_act must be \"gelu\" (erf GELU), got %s",
             act && act->type == VA_JSON_STR ? act->str : "nothing");
    rc = -1;
  }
  if (!rc && pet && pet->type == VA_JSON_STR && strcmp(pet->str, "absolute")) {
    snprintf(err, errlen, "config.json: only absolute position embeddings are supported");
    rc = -1;
  }
  if (!rc && mt && mt->type == VA_JSON_STR && strcmp(mt->str, "bert")) {
    snprintf(err, errlen, "config.json: model_type '%s' is not bert", mt->str);
    rc = -1;
  }
  if (!rc && m->hidden > 1024) {
    snprintf(err, errlen, "config.json: hidden_size %d is over 1024 (not supported)", m->hidden);
    rc = -1;
  }
  if (!rc && m->hidden % m->heads) {
    snprintf(err, errlen, "config.json: hidden_size %d is not a multiple of num_attention_heads %d", m->hidden,
             m->heads);
    rc = -1;
  }
  va_json_free(c);
  if (rc) return -1;

  va_st_file_t st;
  char serr[512];
  if (va_st_open(weights_path, &st, serr, sizeof serr)) {
    snprintf(err, errlen, "%s", serr);
    return -1;
  }
  const int64_t H = m->hidden, F = m->ffn, V = m->vocab, P = m->max_pos;
  size_t per_layer = (size_t)(3 * H * H + 3 * H + H * H + H + 2 * H + F * H + F + H * F + H + 2 * H);
  m->arena_floats = (size_t)(V * H + P * H + H + 2 * H) + (size_t)m->layers * per_layer;
  m->arena = malloc(m->arena_floats * sizeof(float));
  m->layer = calloc((size_t)m->layers, sizeof *m->layer);
  if (!m->arena || !m->layer) {
    snprintf(err, errlen, "out of memory for the model weights (%zu MB)", m->arena_floats * 4 >> 20);
    va_st_close(&st);
    va_bert_free(m);
    return -1;
  }
  float *a = m->arena;
#define TAKE(ptr, n) ((ptr) = take(&a, (size_t)(n)))
#define READ(name, ...)                                                                                                \
  do {                                                                                                                 \
    int64_t dims_[] = {__VA_ARGS__};                                                                                   \
    if (!rc && va_st_read_f32(&st, name, (int)(sizeof dims_ / sizeof dims_[0]), dims_, dst_, serr, sizeof serr)) {     \
      snprintf(err, errlen, "'%s': %s", weights_path, serr);                                                           \
      rc = -1;                                                                                                         \
    }                                                                                                                  \
  } while (0)
  float *dst_;
  /* The checkpoint may or may not carry the "bert." prefix (BertModel vs. a task head's base). */
  const char *pre = va_st_find(&st, "embeddings.word_embeddings.weight") ? "" : "bert.";
  char nm[256];
#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
  const va_st_tensor_t *we = va_st_find(&st, NAME("%sembeddings.word_embeddings.weight", pre));
  if (we)
    snprintf(m->weights_dtype, sizeof m->weights_dtype, "%s",
             we->dtype == VA_ST_F32    ? "F32"
             : we->dtype == VA_ST_F16  ? "F16"
             : we->dtype == VA_ST_BF16 ? "BF16"
                                       : "?");
  dst_ = TAKE(m->word, V * H);
  READ(NAME("%sembeddings.word_embeddings.weight", pre), V, H);
  dst_ = TAKE(m->pos, P * H);
  READ(NAME("%sembeddings.position_embeddings.weight", pre), P, H);
  float *types = NULL;
  const va_st_tensor_t *tt = va_st_find(&st, NAME("%sembeddings.token_type_embeddings.weight", pre));
  int64_t ntypes = tt && tt->ndim == 2 ? tt->shape[0] : 1;
  types = malloc((size_t)(ntypes * H) * sizeof(float));
  dst_ = types;
  READ(NAME("%sembeddings.token_type_embeddings.weight", pre), ntypes, H);
  TAKE(m->type0, H);
  if (!rc) memcpy(m->type0, types, (size_t)H * sizeof(float));
  free(types);
  dst_ = TAKE(m->emb_ln_g, H);
  READ(NAME("%sembeddings.LayerNorm.weight", pre), H);
  dst_ = TAKE(m->emb_ln_b, H);
  READ(NAME("%sembeddings.LayerNorm.bias", pre), H);
  for (int l = 0; l < m->layers && !rc; l++) {
    va_bert_layer_t *L = &m->layer[l];
    TAKE(L->wqkv, 3 * H * H);
    TAKE(L->bqkv, 3 * H);
    static const char *const qkv[3] = {"query", "key", "value"};
    for (int k = 0; k < 3; k++) {
      dst_ = L->wqkv + k * H * H;
      READ(NAME("%sencoder.layer.%d.attention.self.%s.weight", pre, l, qkv[k]), H, H);
      dst_ = L->bqkv + k * H;
      READ(NAME("%sencoder.layer.%d.attention.self.%s.bias", pre, l, qkv[k]), H);
    }
    dst_ = TAKE(L->wo, H * H);
    READ(NAME("%sencoder.layer.%d.attention.output.dense.weight", pre, l), H, H);
    dst_ = TAKE(L->bo, H);
    READ(NAME("%sencoder.layer.%d.attention.output.dense.bias", pre, l), H);
    dst_ = TAKE(L->ln1_g, H);
    READ(NAME("%sencoder.layer.%d.attention.output.LayerNorm.weight", pre, l), H);
    dst_ = TAKE(L->ln1_b, H);
    READ(NAME("%sencoder.layer.%d.attention.output.LayerNorm.bias", pre, l), H);
    dst_ = TAKE(L->w1, F * H);
    READ(NAME("%sencoder.layer.%d.intermediate.dense.weight", pre, l), F, H);
    dst_ = TAKE(L->b1, F);
    READ(NAME("%sencoder.layer.%d.intermediate.dense.bias", pre, l), F);
    dst_ = TAKE(L->w2, H * F);
    READ(NAME("%sencoder.layer.%d.output.dense.weight", pre, l), H, F);
    dst_ = TAKE(L->b2, H);
    READ(NAME("%sencoder.layer.%d.output.dense.bias", pre, l), H);
    dst_ = TAKE(L->ln2_g, H);
    READ(NAME("%sencoder.layer.%d.output.LayerNorm.weight", pre, l), H);
    dst_ = TAKE(L->ln2_b, H);
    READ(NAME("%sencoder.layer.%d.output.LayerNorm.bias", pre, l), H);
  }
#undef TAKE
#undef READ
#undef NAME
  if (!rc) {
    /* more layers in the file than config.json says would be silently ignored: refuse instead */
    char extra[128];
    snprintf(extra, sizeof extra, "%sencoder.layer.%d.attention.self.query.weight", pre, m->layers);
    if (va_st_find(&st, extra)) {
      snprintf(err, errlen, "'%s' has more layers than config.json's num_hidden_layers (%d)", weights_path, m->layers);
      rc = -1;
    }
  }
  va_st_close(&st);
  if (!rc) {
    for (size_t i = 0; i < m->arena_floats && !rc; i++)
      if (!isfinite(m->arena[i])) {
        snprintf(err, errlen, "'%s': a weight is NaN or infinite (corrupt file?)", weights_path);
        rc = -1;
      }
  }
  if (rc) {
    va_bert_free(m);
    return -1;
  }
  return 0;
}

void va_bert_free(va_bert_t *m) {
  free(m->arena);
  free(m->layer);
  m->arena = NULL;
  m->layer = NULL;
}

void va_bert_work_free(va_bert_work_t *w) {
  free(w->x);
  free(w->qkv);
  free(w->ctx);
  free(w->tmp);
  free(w->ff);
  free(w->scores);
  memset(w, 0, sizeof *w);
}

static int grow(float **p, size_t n) {
  float *q = realloc(*p, n * sizeof(float));
  if (!q) return -1;
  *p = q;
  return 0;
}

/* --- forward ------------------------------------------------------------------------------------ */
/* x[t] = LN(x[t] + add[t]) row by row (add may be NULL); two-pass mean and variance. */
static void add_layernorm(float *x, const float *add, int64_t T, int H, const float *g, const float *b, float eps,
                          int threads) {
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
  for (int64_t t = 0; t < T; t++) {
    float *r = x + t * H;
    if (add)
      for (int j = 0; j < H; j++) r[j] += add[t * H + j];
    float mean = 0.f, var = 0.f;
    for (int j = 0; j < H; j++) mean += r[j];
    mean /= (float)H;
    for (int j = 0; j < H; j++) {
      float d = r[j] - mean;
      var += d * d;
    }
    float inv = 1.0f / sqrtf(var / (float)H + eps);
    for (int j = 0; j < H; j++) r[j] = (r[j] - mean) * inv * g[j] + b[j];
  }
}

/* y[T, N] = x[T, K] W[N, K]^T + bias */
static void dense(const float *x, int64_t T, int K, const float *W, const float *bias, int N, float *y, int threads) {
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
  for (int64_t t = 0; t < T; t++) memcpy(y + t * N, bias, (size_t)N * sizeof(float));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, N, K, 1.0f, x, K, W, K, 1.0f, y, N);
}

/* exp(x) for x <= 0 (softmax, erf), written so that gcc vectorises the loops that call it (glibc's
 * expf/erff are scalar calls): 2^n by exponent bits, e^r on |r| <= ln2/2 by a degree-6 Taylor
 * polynomial (relative error < 2e-7). Arguments below -87 flush to 0. */
static inline float exp_neg(float x) {
  x = x < -87.0f ? -87.0f : x;
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest, SSE2-friendly */
  float r = x - n * 0.693359375f - n * -2.12194440e-4f;             /* Cody-Waite ln 2 split */
  float p =
      1.0f +
      r * (1.0f + r * (0.5f + r * (1.66666667e-1f + r * (4.16666667e-2f + r * (8.33333333e-3f + r * 1.38888889e-3f)))));
  int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, 4);
  return p * scale;
}

/* GELU with erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), the approximation PyTorch's own
 * vectorised CPU erf uses: erf|z| = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^{-z^2}, t = 1/(1 + p|z|). */
static void gelu(float *x, size_t n, int threads) {
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
  for (size_t i = 0; i < n; i++) {
    float v = x[i], z = v * 0.70710678118654752f, az = z < 0 ? -z : z;
    float t = 1.0f / (1.0f + 0.3275911f * az);
    float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float e = 1.0f - poly * exp_neg(-az * az);
    x[i] = 0.5f * v * (1.0f + (z < 0 ? -e : e));
  }
}

int va_bert_encode(const va_bert_t *m, const int32_t *ids, const int *lens, int nseq, float *out, va_bert_work_t *w) {
  const int H = m->hidden, F = m->ffn, nh = m->heads, dh = H / nh;
  int64_t T = 0;
  int maxlen = 0;
  for (int s = 0; s < nseq; s++) {
    T += lens[s];
    if (lens[s] > maxlen) maxlen = lens[s];
  }
  if (T == 0) return 0;
  int threads = w->threads > 0 ? w->threads : 1;
  if ((size_t)T > w->cap_tokens) {
    size_t c = (size_t)T;
    if (grow(&w->x, c * H) || grow(&w->qkv, c * 3 * H) || grow(&w->ctx, c * H) || grow(&w->tmp, c * H) ||
        grow(&w->ff, c * F))
      return -1;
    w->cap_tokens = c;
  }
  if ((size_t)maxlen * maxlen > w->cap_scores) {
    if (grow(&w->scores, (size_t)maxlen * maxlen)) return -1;
    w->cap_scores = (size_t)maxlen * maxlen;
  }
  float *x = w->x, *qkv = w->qkv, *ctx = w->ctx, *tmp = w->tmp, *ff = w->ff;

  /* embeddings */
  int64_t t = 0;
  for (int s = 0; s < nseq; s++)
    for (int p = 0; p < lens[s]; p++, t++) {
      const float *we = m->word + (int64_t)ids[t] * H, *pe = m->pos + (int64_t)p * H;
      for (int j = 0; j < H; j++) x[t * H + j] = we[j] + pe[j] + m->type0[j];
    }
  add_layernorm(x, NULL, T, H, m->emb_ln_g, m->emb_ln_b, m->ln_eps, threads);

  const float scale = 1.0f / sqrtf((float)dh);
  for (int l = 0; l < m->layers; l++) {
    const va_bert_layer_t *L = &m->layer[l];
    dense(x, T, H, L->wqkv, L->bqkv, 3 * H, qkv, threads);
    /* Attention over each sequence's own tokens: no padding, so no mask is needed. */
    int64_t off = 0;
    for (int s = 0; s < nseq; s++) {
      int n = lens[s];
      for (int h = 0; h < nh; h++) {
        const float *q = qkv + off * 3 * H + h * dh, *k = q + H, *v = q + 2 * H;
        float *S = w->scores;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dh, scale, q, 3 * H, k, 3 * H, 0.0f, S, n);
        for (int i = 0; i < n; i++) {
          float *r = S + (int64_t)i * n, mx = r[0], sum = 0.f;
          for (int j = 1; j < n; j++) mx = r[j] > mx ? r[j] : mx;
          for (int j = 0; j < n; j++) {
            r[j] = exp_neg(r[j] - mx);
            sum += r[j];
          }
          float inv = 1.0f / sum;
          for (int j = 0; j < n; j++) r[j] *= inv;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dh, n, 1.0f, S, n, v, 3 * H, 0.0f,
                    ctx + off * H + h * dh, H);
      }
      off += n;
    }
    dense(ctx, T, H, L->wo, L->bo, H, tmp, threads);
    add_layernorm(x, tmp, T, H, L->ln1_g, L->ln1_b, m->ln_eps, threads); /* x = LN(x + attn) */
    dense(x, T, H, L->w1, L->b1, F, ff, threads);
    gelu(ff, (size_t)T * F, threads);
    dense(ff, T, F, L->w2, L->b2, H, tmp, threads);
    add_layernorm(x, tmp, T, H, L->ln2_g, L->ln2_b, m->ln_eps, threads); /* x = LN(x + ffn) */
  }

  /* mean pooling over each sequence's tokens, then L2 normalisation (norm clamped at 1e-12) */
  t = 0;
  for (int s = 0; s < nseq; s++) {
    float *o = out + (int64_t)s * H;
    double a[1024]; /* hidden <= 1024 is checked at load */
    for (int j = 0; j < H; j++) a[j] = 0;
    for (int p = 0; p < lens[s]; p++, t++)
      for (int j = 0; j < H; j++) a[j] += x[t * H + j];
    double nrm = 0;
    for (int j = 0; j < H; j++) {
      a[j] /= lens[s];
      nrm += a[j] * a[j];
    }
    nrm = sqrt(nrm);
    if (nrm < 1e-12) nrm = 1e-12;
    for (int j = 0; j < H; j++) o[j] = (float)(a[j] / nrm);
  }
  return 0;
}
