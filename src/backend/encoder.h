/* encoder.h: the sentence encoder a rank runs for `vecanneal embed`, the CPU one (embed/bert_cpu.h) or,
 * in a CUDA build, the GPU one (embed/bert_cuda.h), behind one interface so that the embedding job holds
 * no hardware choice of its own. Batches go in with submit and come back, oldest first, with collect; at
 * most two are outstanding, which lets the GPU encoder overlap the host's packing and unpacking with the
 * device's work (the CPU encoder encodes at submit). Either encoder gives every line the same vector
 * whatever batch it lands in, so rows do not depend on the rank count. */
#ifndef VECANNEAL_BACKEND_ENCODER_H
#define VECANNEAL_BACKEND_ENCODER_H
#include <stddef.h>
#include <stdint.h>

#include "embed/bert_cpu.h" /* va_bert_t */

typedef struct va_encoder va_encoder_t;

/* Whether this build has the GPU encoder at all. */
int va_encoder_gpu_built(void);
/* Local: this rank's device for the GPU encoder under --backend `backend` ("auto", "cuda" or "cpu"):
 * node-local rank modulo the visible devices, or -1 (backend "cpu", a build without CUDA, no device).
 * Chosen on a thread of its own, which also creates the device's context, so that the CUDA driver's
 * start overlaps the caller's reading of the vocabulary and weights: va_encoder_pick_device starts it;
 * va_encoder_stage, called meanwhile once the model is read, converts its weights for the GPU encoder
 * in `precision` on the calling thread (nothing once the choice has found no device); va_encoder_picked
 * waits for the choice and returns the device. A pick ends in va_encoder_start, which takes it, or in
 * va_encoder_pick_free (NULL is fine). */
typedef struct va_device_pick va_device_pick_t;
va_device_pick_t *va_encoder_pick_device(const char *backend);
void va_encoder_stage(va_device_pick_t *pick, const va_bert_t *model, const char *precision);
int va_encoder_picked(va_device_pick_t *pick);
void va_encoder_pick_free(va_device_pick_t *pick);

/* Starts an encoder for batches of at most max_seqs sequences and frees `pick` (NULL is fine). device < 0:
 * the CPU encoder with `threads` threads, ready at once. device >= 0: the GPU encoder in `precision`
 * ("fp32", "fp16", "bf16"; the pick's staged weights must be in it), set up (weights, unless the pick
 * staged them; their upload, a warm-up batch) on a thread of its own so that the caller reads and
 * tokenizes meanwhile. job_tokens: an estimate of the whole job's tokens (all ranks; the same on every
 * rank, so that rows do not depend on the rank count): up to VA_ENCODER_SHORT_JOB_TOKENS the GPU encoder
 * multiplies its dense layers with its own kernel instead of cuBLASLt, whose first use would cost more
 * than such a job's products gain from it (docs/performance.md). model must outlive the encoder. */
#define VA_ENCODER_SHORT_JOB_TOKENS ((int64_t)1 << 21)
va_encoder_t *va_encoder_start(va_device_pick_t *pick, const va_bert_t *model, int device, const char *precision,
                               int max_seqs, int threads, int64_t job_tokens);
/* Waits for the set-up and sizes the scratch for batches of up to max_batch_tokens tokens. 0, or 1
 * with the reason in err (the GPU encoder cannot run this model on this device). */
int va_encoder_ready(va_encoder_t *e, int64_t max_batch_tokens, char *err, size_t elen);
/* After ready: grows the scratch to batches of up to max_batch_tokens tokens (nothing when it holds them
 * already; the GPU encoder waits for the batches in flight first). Out of memory is fatal (exit 5). */
void va_encoder_reserve(va_encoder_t *e, int64_t max_batch_tokens);
/* GPU encoder only, after ready: from now on the vectors stay in device memory, in an n x hidden array,
 * returned (the caller frees it with va_encoder_free_device_rows); where each batch's sequences go is
 * given by va_encoder_place before the batch is submitted. NULL, the vectors still coming back to the
 * host, for the CPU encoder or when the array would take more than half the device's free memory. */
float *va_encoder_output_to_device(va_encoder_t *e, int64_t n);
/* With device output: sequence b of the batch submitted with `first` goes to row order[first - from + b],
 * for the batches whose positions lie in [from, from + count) (nothing without device output). */
void va_encoder_place(va_encoder_t *e, const int64_t *order, int64_t from, int64_t count);
/* Queues one batch (ids packed, lens[i] >= 1 each, as va_bert_encode); first: its position in the
 * device output's order. At most two batches outstanding. Out of memory is fatal (exit 5). */
void va_encoder_submit(va_encoder_t *e, const int32_t *ids, const int *lens, int nseq, int64_t first);
/* The oldest outstanding batch: its nseq x hidden unit vectors into out (nothing with device output;
 * out may be NULL then), its `first` into *first. Returns its nseq, 0 when none is outstanding. */
int va_encoder_collect(va_encoder_t *e, float *out, int64_t *first);
/* Joins the set-up thread if it runs and frees everything but device output. NULL is fine. */
void va_encoder_free(va_encoder_t *e);

/* What ran, for logs and metrics. */
typedef struct {
  const char *backend;       /* "cpu" or "cuda" */
  const char *precision;     /* "fp32", "fp16", "bf16" */
  char device[256];          /* "NVIDIA H200 (device 0), fp16"; empty on the CPU */
  const char *dense;         /* GPU: what multiplies the dense layers, "cublaslt" or "mma"; "" on the CPU */
  double forward_seconds;    /* device time of the forward passes (CUDA events); 0 on the CPU */
  double setup_seconds;      /* GPU: device context, cuBLASLt, weight upload, warm-up batch */
  double setup_wait_seconds; /* GPU: how long ready waited for that, plus sizing the scratch */
} va_encoder_info_t;
void va_encoder_describe(const va_encoder_t *e, va_encoder_info_t *info);

/* Rows left in device memory by a GPU encoder on `device`: to host memory (from any thread of the
 * process), and freed. */
void va_encoder_copy_device_rows(int device, float *host, const float *rows, size_t bytes);
void va_encoder_free_device_rows(float *rows);

/* One rank's block of embedded rows, as the embedding job hands them to compress --embed. */
typedef struct {
  float *emb; /* n_local x d, unit rows, input order; the caller frees; NULL when on the device */
  int64_t n, row0, n_local;
  int d;
  float *demb; /* the same rows in GPU memory of `device` instead (a GPU encoder and nothing to
                * write): the caller adopts them (va_rows_adopt_embedded) or takes them to the
                * host (va_embedded_to_host), and frees them with va_encoder_free_device_rows */
  int device;
} va_embedded_t;

/* The rows to host memory (emb) if they are on the device; frees the device copy. */
void va_embedded_to_host(va_embedded_t *e);
#endif
