/* bert_cuda.h: the all-MiniLM-L6-v2 encoder of bert_cpu.h on a CUDA GPU (built only with
 * VECANNEAL_CUDA). The weights come from an already loaded va_bert_t (host fp32) and are held on the
 * device in fp16, bf16 or fp32; dense layers run through cuBLASLt or, in fp16/bf16, a kernel of the
 * encoder's own (tensor cores, fp32 accumulation either way), attention, LayerNorm, GELU and pooling in our kernels
 * (statistics in fp32). Batches are packed as on the CPU (sequences back to back, no padding), so a line's embedding
 * does not depend on its batch. Two batches may be in flight: submit queues one and returns, collect waits for the
 * oldest. */
#ifndef VECANNEAL_EMBED_BERT_CUDA_H
#define VECANNEAL_EMBED_BERT_CUDA_H
#include <stddef.h>
#include <stdint.h>

#include "bert_cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { VA_BERT_FP32 = 0, VA_BERT_FP16 = 1, VA_BERT_BF16 = 2 };

typedef struct va_bert_cuda va_bert_cuda_t;

/* The precision's name ("fp32", "fp16", "bf16"), or -1 / NULL for an unknown one. */
int va_bert_cuda_precision(const char *name);
const char *va_bert_cuda_precision_name(int precision);

/* m's weights in `precision`, laid out on the host as the device holds them: host work alone (no CUDA
 * call), so that it can run while the device starts (the conversion takes a few hundredths of a second,
 * docs/performance.md). Freed with va_bert_cuda_weights_free (NULL is fine). */
typedef struct va_bert_cuda_weights va_bert_cuda_weights_t;
va_bert_cuda_weights_t *va_bert_cuda_stage(const va_bert_t *m, int precision);
void va_bert_cuda_weights_free(va_bert_cuda_weights_t *w);

/* What multiplies the dense layers. CUBLASLT: the faster products on long runs, but the process's first use
 * of cuBLASLt costs about a tenth of a second (docs/performance.md). MMA: the encoder's own kernel
 * (mma.sync), loaded with its other kernels, for runs too short to repay that; fp16 and bf16, layer sizes
 * multiples of 128 (otherwise, and in fp32, CUBLASLT is used: va_bert_cuda_dense says which). */
enum { VA_BERT_DENSE_CUBLASLT = 0, VA_BERT_DENSE_MMA = 1 };

/* Uploads m's weights to `device` in `precision` (those staged in `staged`, which must be in that
 * precision; NULL: staged here), multiplies the dense layers as `dense` asks (VA_BERT_DENSE_*), and sizes the scratch
 * for batches of at most max_seqs sequences and max_batch_tokens tokens (each sequence at most m->max_pos tokens). NULL
 * with a message in err when the model's shape is not one the kernels handle (head size 32, hidden and FFN sizes
 * multiples of 64, hidden up to 1024) or the device cannot run them; CUDA failures are fatal (VA_CUDA). */
va_bert_cuda_t *va_bert_cuda_create(const va_bert_t *m, const va_bert_cuda_weights_t *staged, int device, int precision,
                                    int dense, int max_seqs, int64_t max_batch_tokens, char *err, size_t errlen);
/* VA_BERT_DENSE_* that the encoder uses, and its name for logs and metrics ("cublaslt", "mma"). */
int va_bert_cuda_dense(const va_bert_cuda_t *g);
const char *va_bert_cuda_dense_name(int dense);
/* The dense kernel (VA_BERT_DENSE_MMA) alone, for its test: d[m, n] = x[m, k] w[n, k]^T + bias[n], then
 * epilogue 0 (nothing), 1 (the tanh-form GELU) or 2 (plus d's own values: the residual) on `device` in
 * `precision` (fp16 or bf16): x, w, bias and d are rounded to it, multiplied on the device, and d comes
 * back as floats. 0, or 1 when the kernel does not take the shape or precision (n a multiple of 128, k
 * of 64). */
int va_bert_cuda_dense_run(int device, int precision, int epilogue, const float *x, const float *w, const float *bias,
                           float *d, int64_t m, int n, int k);
void va_bert_cuda_free(va_bert_cuda_t *g);
/* Grows the scratch to batches of max_batch_tokens tokens (nothing when it holds them already); waits
 * for the batches in flight. */
void va_bert_cuda_reserve(va_bert_cuda_t *g, int64_t max_batch_tokens);
/* Runs one two-token batch and drops its result, so that the kernels' code is loaded (CUDA loads it at
 * a kernel's first launch) and cuBLASLt, where it is used, has made its first choice, costs that the first real batch
 * pays otherwise (docs/performance.md). No batch in flight, and before va_bert_cuda_output_to_device. */
void va_bert_cuda_warm_up(va_bert_cuda_t *g);

/* From now on the vectors stay on the device: an array of n x hidden floats (returned; the caller owns
 * it and frees it with va_cuda_free_device, after va_bert_cuda_free if it likes), sequence b of a batch
 * submitted with `first` going to the row that va_bert_cuda_place gave position first + b. NULL, nothing
 * changed, when the array and its positions would take more than half the device's free memory. */
float *va_bert_cuda_output_to_device(va_bert_cuda_t *g, int64_t n);
/* Positions [from, from + count) of the device output go to rows order[0 .. count) (distinct, < n), for
 * the batches submitted after this call; queued on the encoder's stream, so order must stay as it is until
 * those batches have run (nothing without device output). */
void va_bert_cuda_place(va_bert_cuda_t *g, const int64_t *order, int64_t from, int64_t count);
/* Queues one batch (as va_bert_encode: ids packed, lens[i] >= 1 ids each, ids < vocab). The ids are
 * copied to pinned memory before it returns. At most two batches may be outstanding. first: the
 * batch's first position in the device output's order (ignored without device output). */
void va_bert_cuda_submit(va_bert_cuda_t *g, const int32_t *ids, const int *lens, int nseq, int64_t first);
/* Waits for the oldest outstanding batch and copies its nseq x hidden unit vectors to out (nothing with
 * device output; out may be NULL then). Returns the
 * device time of its forward pass in milliseconds (CUDA events after the ids' upload and before the
 * results' download). */
double va_bert_cuda_collect(va_bert_cuda_t *g, float *out);
/* submit + collect. */
double va_bert_cuda_encode(va_bert_cuda_t *g, const int32_t *ids, const int *lens, int nseq, float *out);

/* "NVIDIA H200 (device 0), fp16" */
void va_bert_cuda_describe(const va_bert_cuda_t *g, char *out, size_t len);

#ifdef __cplusplus
}
#endif
#endif
