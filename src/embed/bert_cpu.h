/* bert_cpu.h: the BERT encoder of all-MiniLM-L6-v2 on the CPU (OpenBLAS sgemm), with the
 * sentence-transformers head: mean pooling over the sequence's tokens and L2 normalisation.
 * The model's shape (hidden size, layers, heads, FFN width, LayerNorm eps) comes from config.json and
 * is checked against the safetensors weights; F32, F16 and BF16 weights are accepted (held as F32).
 * Batches are packed: the sequences of a batch lie back to back with no padding, so every dense layer
 * is one sgemm over all the batch's tokens and attention runs per sequence over exactly its own
 * tokens -- the same result as padding plus an attention mask, without the padded work. */
#ifndef VECANNEAL_EMBED_BERT_CPU_H
#define VECANNEAL_EMBED_BERT_CPU_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
  float *wqkv, *bqkv; /* query, key, value stacked: [3H, H], [3H] */
  float *wo, *bo;     /* attention output [H, H], [H] */
  float *ln1_g, *ln1_b;
  float *w1, *b1; /* intermediate [F, H], [F] */
  float *w2, *b2; /* output [H, F], [H] */
  float *ln2_g, *ln2_b;
} va_bert_layer_t;

typedef struct {
  int vocab, hidden, layers, heads, ffn, max_pos;
  float ln_eps;
  float *word, *pos, *type0; /* [vocab, H], [max_pos, H], [H] (token type 0) */
  float *emb_ln_g, *emb_ln_b;
  va_bert_layer_t *layer;
  float *arena;
  size_t arena_floats;
  char weights_dtype[8]; /* as stored in the file: F32, F16, BF16 */
} va_bert_t;

/* Scratch of one encoder call, grown on demand; zero-initialise, free with va_bert_work_free. */
typedef struct {
  float *x, *qkv, *ctx, *tmp, *ff, *scores;
  size_t cap_tokens, cap_scores;
  int threads; /* element-wise loops (OpenMP when built with it); sgemm threads are OpenBLAS's own */
} va_bert_work_t;

/* Loads DIR/config.json and the weights file (a path). 0, or -1 with a message in err. */
int va_bert_load(const char *config_path, const char *weights_path, va_bert_t *m, char *err, size_t errlen);
void va_bert_free(va_bert_t *m);
void va_bert_work_free(va_bert_work_t *w);

/* Encodes nseq token sequences, ids packed back to back (lens[i] ids each, 1 <= lens[i] <= max_pos,
 * ids < vocab: the caller checks), into out[nseq x hidden]: mean of the last hidden states over each
 * sequence's tokens, L2-normalised. Returns 0, or -1 when scratch memory cannot be had. */
int va_bert_encode(const va_bert_t *m, const int32_t *ids, const int *lens, int nseq, float *out, va_bert_work_t *w);
#endif
