/* encoder.c: the CPU and GPU sentence encoders behind backend/encoder.h. The CPU encoder encodes at
 * submit into one of two result slots, so that collect hands batches back in the GPU encoder's order;
 * its threads each encode a share of a batch's sequences (similar token counts), every one with its own
 * scratch and a single-threaded sgemm (the caller sets BLAS to one thread), so that attention, which runs
 * per sequence, is spread over the threads too;
 * the GPU encoder is set up on a thread of its own (it calls neither MPI nor the tokenizer; a CUDA
 * failure there ends the job as anywhere else) and keeps two batches in flight. Its weights are converted
 * on the caller's thread while the device choice's thread starts the device. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h> /* atomic_int: the device choice's outcome, read while its thread runs */
#include <stdlib.h>
#include <string.h>

#include "backend/encoder.h"
#include "backend/visible.h" /* va_visible_narrow */
#include "util/util.h"       /* va_now, va_malloc, VA_FATAL */
#ifdef VECANNEAL_CUDA
#include "backend/cuda.h"    /* va_cuda_pick_device, va_cuda_start_device, va_cuda_load_blas */
#include "cuda/kernels.h"    /* va_cuda_free_device, va_cuda_copy_to_host */
#include "embed/bert_cuda.h" /* va_bert_cuda_* */
#endif

struct va_encoder {
  const va_bert_t *model;
  va_encoder_info_t info;
  /* CPU: two result slots of max_seqs x hidden, used in turn; head is the oldest outstanding */
  int max_seqs, head, pending, nseq[2];
  int64_t first[2];
  float *slot[2];
  int threads;
  va_bert_work_t *work; /* one a thread */
  /* GPU */
  int device, gpu_precision, gpu_dense;
#ifdef VECANNEAL_CUDA
  va_bert_cuda_t *gpu;            /* NULL with setup_err when the model or device does not suit the GPU encoder */
  va_bert_cuda_weights_t *staged; /* the pick's staged weights (NULL: the set-up stages them), freed after it */
#endif
  char setup_err[512];
  pthread_t thread;
  int running;
};

int va_encoder_gpu_built(void) {
#ifdef VECANNEAL_CUDA
  return 1;
#else
  return 0;
#endif
}

struct va_device_pick {
  const char *backend;
  int device;
  atomic_int none; /* 1 once the choice found no device (the weights are then not staged) */
  pthread_t thread, blas_thread;
  int running, blas_running;
#ifdef VECANNEAL_CUDA
  va_bert_cuda_weights_t *staged; /* in the precision va_encoder_start is given (va_bert_cuda_create checks) */
#endif
};

#ifdef VECANNEAL_CUDA
static void *load_blas_main(void *arg) {
  (void)arg;
  va_cuda_load_blas();
  return NULL;
}
#endif

static void *pick_main(void *arg) {
  va_device_pick_t *p = arg;
  p->device = -1;
#ifdef VECANNEAL_CUDA
  if (strcmp(p->backend, "cpu")) p->device = va_cuda_pick_device(-1);
  atomic_store(&p->none, p->device < 0);
  if (p->device >= 0) {
    /* cuBLAS and cuBLASLt, which the set-up needs first, load beside the device's start (a tenth of a
     * second each; docs/performance.md); without a thread the set-up loads them itself. */
    p->blas_running = pthread_create(&p->blas_thread, NULL, load_blas_main, NULL) == 0;
    (void)va_cuda_start_device(p->device); /* a failure shows at the set-up's first call */
  }
#endif
  return NULL;
}

va_device_pick_t *va_encoder_pick_device(const char *backend) {
  va_device_pick_t *p = va_malloc(sizeof *p, "the device choice");
  memset(p, 0, sizeof *p);
  p->backend = backend;
  atomic_init(&p->none, 0);
  /* a thread only where there is a device to look for (no thread to be had: choose here); the visible
   * devices are narrowed first, on this thread, since the thread's choice would set the environment while
   * this one reads it */
  if (va_encoder_gpu_built() && strcmp(backend, "cpu")) {
    (void)va_visible_narrow(-1);
    p->running = pthread_create(&p->thread, NULL, pick_main, p) == 0;
  }
  if (!p->running) pick_main(p);
  return p;
}

void va_encoder_stage(va_device_pick_t *p, const va_bert_t *model, const char *precision) {
#ifdef VECANNEAL_CUDA
  const int prec = va_bert_cuda_precision(precision);
  if (p->staged || prec < 0 || atomic_load(&p->none)) return; /* an unknown precision: the set-up says so */
  p->staged = va_bert_cuda_stage(model, prec);
#else
  (void)p, (void)model, (void)precision;
#endif
}

int va_encoder_picked(va_device_pick_t *p) {
  if (p->running && pthread_join(p->thread, NULL) != 0) VA_FATAL("cannot join the device choice's thread");
  if (p->blas_running && pthread_join(p->blas_thread, NULL) != 0) VA_FATAL("cannot join the BLAS loading thread");
  p->running = p->blas_running = 0;
  return p->device;
}

void va_encoder_pick_free(va_device_pick_t *p) {
  if (!p) return;
  (void)va_encoder_picked(p);
#ifdef VECANNEAL_CUDA
  va_bert_cuda_weights_free(p->staged);
#endif
  free(p);
}

#ifdef VECANNEAL_CUDA
static void *gpu_setup_main(void *arg) {
  va_encoder_t *e = arg;
  double t = va_now();
  e->gpu = va_bert_cuda_create(e->model, e->staged, e->device, e->gpu_precision, e->gpu_dense, e->max_seqs, 1,
                               e->setup_err, sizeof e->setup_err);
  va_bert_cuda_weights_free(e->staged);
  e->staged = NULL;
  if (e->gpu) va_bert_cuda_warm_up(e->gpu);
  e->info.setup_seconds = va_now() - t;
  return NULL;
}
#endif

static void join_setup(va_encoder_t *e) {
  if (e->running && pthread_join(e->thread, NULL) != 0) VA_FATAL("cannot join the GPU encoder's set-up thread");
  e->running = 0;
}

va_encoder_t *va_encoder_start(va_device_pick_t *pick, const va_bert_t *model, int device, const char *precision,
                               int max_seqs, int threads, int64_t job_tokens) {
  va_encoder_t *e = va_malloc(sizeof *e, "the encoder");
  memset(e, 0, sizeof *e);
  e->model = model;
  e->max_seqs = max_seqs;
  e->device = device;
  e->info.backend = "cpu";
  e->info.precision = "fp32";
  e->info.dense = "";
#ifdef VECANNEAL_CUDA
  if (device >= 0) {
    e->info.backend = "cuda";
    e->gpu_precision = va_bert_cuda_precision(precision);
    e->info.precision = va_bert_cuda_precision_name(e->gpu_precision);
    e->gpu_dense = job_tokens <= VA_ENCODER_SHORT_JOB_TOKENS ? VA_BERT_DENSE_MMA : VA_BERT_DENSE_CUBLASLT;
    if (pick) {
      e->staged = pick->staged;
      pick->staged = NULL;
    }
    va_encoder_pick_free(pick);
    e->running = pthread_create(&e->thread, NULL, gpu_setup_main, e) == 0;
    if (!e->running) gpu_setup_main(e); /* no thread to be had: set up here, before the read */
    return e;
  }
#endif
  va_encoder_pick_free(pick);
  (void)precision, (void)job_tokens;
  e->device = -1;
  e->threads = threads > 0 ? threads : 1;
  e->work = va_malloc((size_t)e->threads * sizeof *e->work, "the encoder's scratch");
  memset(e->work, 0, (size_t)e->threads * sizeof *e->work);
  for (int i = 0; i < e->threads; i++) e->work[i].threads = 1;
  for (int s = 0; s < 2; s++)
    e->slot[s] = va_malloc((size_t)max_seqs * (size_t)model->hidden * sizeof(float), "the encoder's results");
  return e;
}

int va_encoder_ready(va_encoder_t *e, int64_t max_batch_tokens, char *err, size_t elen) {
#ifdef VECANNEAL_CUDA
  if (e->device >= 0) {
    double t = va_now();
    join_setup(e);
    if (!e->gpu) {
      snprintf(err, elen, "embed: the GPU encoder cannot run this model: %s", e->setup_err);
      return 1;
    }
    va_bert_cuda_reserve(e->gpu, max_batch_tokens);
    e->info.setup_wait_seconds = va_now() - t;
    va_bert_cuda_describe(e->gpu, e->info.device, sizeof e->info.device);
    e->info.dense = va_bert_cuda_dense_name(va_bert_cuda_dense(e->gpu));
    return 0;
  }
#endif
  (void)max_batch_tokens, (void)err, (void)elen;
  return 0;
}

void va_encoder_reserve(va_encoder_t *e, int64_t max_batch_tokens) {
#ifdef VECANNEAL_CUDA
  if (e->gpu) va_bert_cuda_reserve(e->gpu, max_batch_tokens);
#endif
  (void)e, (void)max_batch_tokens;
}

float *va_encoder_output_to_device(va_encoder_t *e, int64_t n) {
#ifdef VECANNEAL_CUDA
  if (e->gpu) return va_bert_cuda_output_to_device(e->gpu, n);
#endif
  (void)e, (void)n;
  return NULL;
}

void va_encoder_place(va_encoder_t *e, const int64_t *order, int64_t from, int64_t count) {
#ifdef VECANNEAL_CUDA
  if (e->gpu) va_bert_cuda_place(e->gpu, order, from, count);
#endif
  (void)e, (void)order, (void)from, (void)count;
}

void va_encoder_submit(va_encoder_t *e, const int32_t *ids, const int *lens, int nseq, int64_t first) {
  if (e->pending == 2) VA_FATAL("encoder: a third batch submitted with two outstanding");
  int s = (e->head + e->pending) % 2;
  e->first[s] = first;
  e->nseq[s] = nseq;
  e->pending++;
#ifdef VECANNEAL_CUDA
  if (e->gpu) {
    va_bert_cuda_submit(e->gpu, ids, lens, nseq, first);
    return;
  }
#endif
  /* Sequences [cut[g], cut[g + 1]) to thread g: consecutive shares of about tokens / threads each. */
  int64_t tokens = 0;
  for (int i = 0; i < nseq; i++) tokens += lens[i];
  const int parts = nseq < e->threads ? (nseq > 0 ? nseq : 1) : e->threads;
  int cut[parts + 1];
  int64_t acc = 0;
  cut[0] = 0;
  cut[parts] = nseq;
  for (int g = 1, i = 0; g < parts; g++) { /* leave at least one sequence to each later share */
    while (i < nseq - (parts - g) && acc < tokens * g / parts) acc += lens[i++];
    cut[g] = i;
  }
  int failed = 0;
  const int32_t *start = ids;
  const int32_t *first_id[parts];
  for (int g = 0; g < parts; g++) {
    first_id[g] = start;
    for (int i = cut[g]; i < cut[g + 1]; i++) start += lens[i];
  }
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(parts) schedule(static, 1) reduction(| : failed)
#endif
  for (int g = 0; g < parts; g++)
    if (cut[g + 1] > cut[g])
      failed |= va_bert_encode(e->model, first_id[g], lens + cut[g], cut[g + 1] - cut[g],
                               e->slot[s] + (int64_t)cut[g] * e->model->hidden, &e->work[g]) != 0;
  if (failed) VA_FATAL("out of memory for an encoder batch of %lld tokens", (long long)tokens);
}

int va_encoder_collect(va_encoder_t *e, float *out, int64_t *first) {
  if (!e->pending) return 0;
  int s = e->head, nseq = e->nseq[s];
  *first = e->first[s];
  e->head = (e->head + 1) % 2;
  e->pending--;
#ifdef VECANNEAL_CUDA
  if (e->gpu) {
    e->info.forward_seconds += 1e-3 * va_bert_cuda_collect(e->gpu, out);
    return nseq;
  }
#endif
  if (out) memcpy(out, e->slot[s], (size_t)nseq * (size_t)e->model->hidden * sizeof(float));
  return nseq;
}

void va_encoder_describe(const va_encoder_t *e, va_encoder_info_t *info) { *info = e->info; }

void va_encoder_free(va_encoder_t *e) {
  if (!e) return;
  join_setup(e);
#ifdef VECANNEAL_CUDA
  va_bert_cuda_free(e->gpu);
#endif
  for (int i = 0; i < e->threads && e->work; i++) va_bert_work_free(&e->work[i]);
  free(e->work);
  free(e->slot[0]);
  free(e->slot[1]);
  free(e);
}

void va_encoder_copy_device_rows(int device, float *host, const float *rows, size_t bytes) {
#ifdef VECANNEAL_CUDA
  /* the calling thread's current device, or its first CUDA call would start a context on device 0 */
  if (va_cuda_start_device(device)) VA_FATAL("cannot make CUDA device %d current to copy its rows", device);
  va_cuda_copy_to_host(host, rows, bytes);
#else
  (void)device, (void)host, (void)rows, (void)bytes;
  VA_FATAL("device rows in a build without CUDA");
#endif
}

void va_encoder_free_device_rows(float *rows) {
#ifdef VECANNEAL_CUDA
  va_cuda_free_device(rows);
#else
  (void)rows;
#endif
}

void va_embedded_to_host(va_embedded_t *e) {
  if (!e->demb) return;
  size_t bytes = (size_t)(e->n_local > 0 ? e->n_local : 1) * (size_t)e->d * sizeof(float);
  e->emb = va_malloc(bytes, "embedded rows");
  va_encoder_copy_device_rows(e->device, e->emb, e->demb, (size_t)e->n_local * (size_t)e->d * sizeof(float));
  va_encoder_free_device_rows(e->demb);
  e->demb = NULL;
}
