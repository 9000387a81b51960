/* search.c (backend): the search engines of backend/search.h: the CPU engine (the list scan and the
 * exact scan on the kernels of cpu/search.h), the GPU engine (cuda/search.h, CUDA builds only) and the
 * collective choice between them for `search --backend`. */
#include "backend/search.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/pq_search.h" /* va_pq_scan_lists */
#include "util/util.h"
#ifdef VECANNEAL_CUDA
#include "backend/cuda.h" /* va_cuda_pick_device, va_cuda_memory */
#include "cuda/pq_search.h"
#include "cuda/search.h"
#endif

const char *const va_search_precisions[] = {"fp32", "tf32", "fp16", "bf16", NULL};

/* The list scan of cpu/search.h: each query's heap is one thread's, and the heap keeps the k smallest
 * entries under a total order whatever the order it sees them in, so the answer does not depend on the
 * thread count or the grouping. */
static void cpu_scan_lists(const va_search_engine_t *e, const va_search_lists_t *L, const float *Q, int64_t nq,
                           const int64_t *probes, int64_t nprobe, int cosine, int64_t k, va_neighbor_t *out) {
  va_topk_t *heaps = va_malloc((size_t)(nq > 0 ? nq : 1) * sizeof *heaps, "search heaps");
  for (int64_t q = 0; q < nq; q++) va_topk_init(&heaps[q], out + q * k, k);
  va_search_scan_lists(Q, nq, L->d, L->nlists, L->rows, L->offset, L->ids, probes, nprobe, cosine, e->threads, heaps);
  for (int64_t q = 0; q < nq; q++) va_topk_sorted(&heaps[q], out + q * k);
  free(heaps);
}

static void cpu_scan_all(const va_search_engine_t *e, const va_search_lists_t *L, const float *Q, int64_t nq,
                         int cosine, int64_t k, va_neighbor_t *out) {
  va_topk_t *heaps = va_malloc((size_t)(nq > 0 ? nq : 1) * sizeof *heaps, "exact search heaps");
  for (int64_t q = 0; q < nq; q++) va_topk_init(&heaps[q], out + q * k, k);
  va_search_scan(Q, nq, L->d, L->rows, L->nrows, L->ids, 0, cosine, e->threads, heaps);
  for (int64_t q = 0; q < nq; q++) va_topk_sorted(&heaps[q], out + q * k);
  free(heaps);
}

static void cpu_scan_codes(const va_search_engine_t *e, const va_search_lists_t *L, const float *Qf, int64_t nq,
                           const int64_t *probes, int64_t nprobe, int cosine, int64_t k, va_neighbor_t *out) {
  va_topk_t *heaps = va_malloc((size_t)(nq > 0 ? nq : 1) * sizeof *heaps, "code search heaps");
  for (int64_t q = 0; q < nq; q++) va_topk_init(&heaps[q], out + q * k, k);
  va_pq_scan_lists(Qf, nq, L->d, L->frame, L->pq_m, L->pq_ksub, L->pq_T, L->pq_terms, L->codes, L->offset, L->ids,
                   probes, nprobe, cosine, e->threads, heaps);
  for (int64_t q = 0; q < nq; q++) va_topk_sorted(&heaps[q], out + q * k);
  free(heaps);
}

static void cpu_probe(const va_search_engine_t *e, const va_search_lists_t *L, const float *Q, int64_t nq, int cosine,
                      int64_t nprobe, int64_t *probes) {
  va_search_probe(Q, nq, L->d, L->anchors, L->nanchors, cosine, nprobe, e->threads, probes);
}

/* The CPU engine scans the lists where they are: nothing to take or to free. */
static void cpu_prepare(va_search_engine_t *e, const va_search_lists_t *L) {
  (void)e;
  (void)L;
}

static void cpu_destroy(va_search_engine_t *e) { (void)e; }

va_search_engine_t va_search_engine_cpu(int threads) {
  return (va_search_engine_t){.name = "cpu",
                              .precision = "fp32",
                              .threads = threads > 0 ? threads : 1,
                              .ctx = NULL,
                              .prepare = cpu_prepare,
                              .probe = cpu_probe,
                              .scan_lists = cpu_scan_lists,
                              .scan_codes = cpu_scan_codes,
                              .scan_all = cpu_scan_all,
                              .destroy = cpu_destroy};
}

#ifdef VECANNEAL_CUDA
_Static_assert(VA_SEARCH_GPU_MAX_K == VA_CUDA_SEARCH_MAX_K, "backend/search.h names the device scan's k limit");

typedef struct {
  int device;
  va_cuda_precision_t precision;
  va_cuda_search_t *gpu; /* the lists on the device, from prepare (lists of codes: the anchors alone) */
  va_cuda_pq_t *pq;      /* lists of codes whose tables fit a block: the codes on the device; else NULL */
} cuda_engine_t;

/* The name's precision (va_search_precisions, in the order of va_cuda_precision_t). */
static va_cuda_precision_t cuda_precision(const char *name) {
  for (int i = 0; va_search_precisions[i]; i++)
    if (!strcmp(name, va_search_precisions[i])) return (va_cuda_precision_t)i;
  VA_FATAL("search: precision '%s' is none of fp32, tf32, fp16, bf16", name);
}

static void cuda_prepare(va_search_engine_t *e, const va_search_lists_t *L) {
  cuda_engine_t *c = e->ctx;
  va_cuda_search_destroy(c->gpu);
  va_cuda_pq_destroy(c->pq);
  c->pq = NULL;
  /* the l2 probe's anchor terms, by the CPU's recipe (one pass over the anchors on the host) */
  float *norms = va_malloc((size_t)(L->nanchors + 1) * sizeof *norms, "anchor norms");
  for (int64_t j = 0; j < L->nanchors; j++) norms[j] = va_search_probe_norm(L->anchors + j * L->d, L->d);
  if (L->codes) { /* the device holds the codes; its row engine, no lists, only probes */
    static const int64_t no_lists[1] = {0};
    c->gpu = va_cuda_search_create(c->device, 0, 0, L->d, no_lists, NULL, NULL, L->nanchors, L->anchors, norms,
                                   VA_CUDA_FP32);
    if (va_cuda_pq_fits(c->device, L->d, L->pq_m, L->pq_ksub, L->pq_terms == NULL))
      c->pq = va_cuda_pq_create(c->device, L->nlists, L->nrows, L->d, L->pq_m, L->pq_ksub, L->offset, L->codes, L->ids,
                                L->pq_T, L->frame, L->pq_terms);
    else
      va_log0("note: the lookup tables of %lld subspaces x %lld centroids do not fit a GPU block's shared memory: "
              "the scan on codes runs on the CPU (the probe on the GPU)\n",
              (long long)L->pq_m, (long long)L->pq_ksub);
  } else
    c->gpu = va_cuda_search_create(c->device, L->nlists, L->nrows, L->d, L->offset, L->rows, L->ids, L->nanchors,
                                   L->anchors, norms, c->precision);
  free(norms);
}

static cuda_engine_t *prepared(const va_search_engine_t *e) {
  cuda_engine_t *c = e->ctx;
  if (!c->gpu) VA_FATAL("the GPU search engine scanned before prepare gave it the lists");
  return c;
}

/* nprobe above the device scan's limit: the CPU probe, the same anchors. */
static void cuda_probe(const va_search_engine_t *e, const va_search_lists_t *L, const float *Q, int64_t nq, int cosine,
                       int64_t nprobe, int64_t *probes) {
  if (nprobe > VA_CUDA_SEARCH_MAX_K) {
    cpu_probe(e, L, Q, nq, cosine, nprobe, probes);
    return;
  }
  va_neighbor_t *best = va_malloc((size_t)(nq * nprobe + 1) * sizeof *best, "probed anchors");
  va_cuda_search_probe(prepared(e)->gpu, Q, nq, cosine, nprobe, best);
  for (int64_t i = 0; i < nq * nprobe; i++) probes[i] = best[i].id;
  free(best);
}

/* k above the device scan's limit: the CPU kernels, the same entries. */
static void cuda_scan_lists(const va_search_engine_t *e, const va_search_lists_t *L, const float *Q, int64_t nq,
                            const int64_t *probes, int64_t nprobe, int cosine, int64_t k, va_neighbor_t *out) {
  if (k > VA_CUDA_SEARCH_MAX_K) cpu_scan_lists(e, L, Q, nq, probes, nprobe, cosine, k, out);
  else va_cuda_search_scan(prepared(e)->gpu, Q, nq, probes, nprobe, cosine, k, out);
}

/* Above the k limit, or with tables larger than a block's shared memory: the CPU kernels, the same entries. */
static void cuda_scan_codes(const va_search_engine_t *e, const va_search_lists_t *L, const float *Qf, int64_t nq,
                            const int64_t *probes, int64_t nprobe, int cosine, int64_t k, va_neighbor_t *out) {
  const cuda_engine_t *c = prepared(e);
  if (k > VA_CUDA_SEARCH_MAX_K || !c->pq) cpu_scan_codes(e, L, Qf, nq, probes, nprobe, cosine, k, out);
  else va_cuda_pq_scan(c->pq, Qf, nq, probes, nprobe, k, out);
}

static void cuda_scan_all(const va_search_engine_t *e, const va_search_lists_t *L, const float *Q, int64_t nq,
                          int cosine, int64_t k, va_neighbor_t *out) {
  if (k > VA_CUDA_SEARCH_MAX_K) cpu_scan_all(e, L, Q, nq, cosine, k, out);
  else va_cuda_search_scan(prepared(e)->gpu, Q, nq, NULL, 0, cosine, k, out);
}

static void cuda_destroy(va_search_engine_t *e) {
  cuda_engine_t *c = e->ctx;
  if (!c) return;
  va_cuda_search_destroy(c->gpu);
  va_cuda_pq_destroy(c->pq);
  free(c);
  e->ctx = NULL;
}

va_search_engine_t va_search_engine_cuda(int device, int threads, const char *precision) {
  cuda_engine_t *c = va_malloc(sizeof *c, "GPU search engine");
  c->device = device;
  c->precision = cuda_precision(precision);
  c->gpu = NULL;
  c->pq = NULL;
  return (va_search_engine_t){.name = "cuda",
                              .precision = va_search_precisions[c->precision],
                              .threads = threads > 0 ? threads : 1,
                              .ctx = c,
                              .prepare = cuda_prepare,
                              .probe = cuda_probe,
                              .scan_lists = cuda_scan_lists,
                              .scan_codes = cuda_scan_codes,
                              .scan_all = cuda_scan_all,
                              .destroy = cuda_destroy};
}
#endif

/* The CPU engine, with a note when a tensor-core precision was asked for. */
static va_search_engine_t cpu_engine_for(const char *precision, int threads) {
  if (strcmp(precision, "fp32"))
    va_log0("note: --precision %s is the GPU engine's: the CPU search engine computes fp32\n", precision);
  return va_search_engine_cpu(threads);
}

va_search_engine_t va_search_engine_open(const char *backend, const char *precision, int threads, int64_t k,
                                         int64_t nlists, int64_t nrows, int64_t d, int64_t pq_m, int64_t batch) {
  const int must = !strcmp(backend, "cuda");
  if (!strcmp(backend, "cpu")) return cpu_engine_for(precision, threads);
#ifndef VECANNEAL_CUDA
  (void)k, (void)nlists, (void)nrows, (void)d, (void)pq_m, (void)batch;
  if (must)
    VA_AGREE_OR_EXIT(VA_EXIT_USAGE, "search: --backend cuda asked for, but this build has no CUDA backend (rebuild "
                                    "with -DVECANNEAL_CUDA=ON on a machine with the CUDA toolkit)");
  return cpu_engine_for(precision, threads);
#else
  char err[512];
  /* One GPU per rank is not needed (no NCCL here): ranks on one node share its devices round robin. */
  const int dev = va_cuda_pick_device(-1);
  int all_have = dev >= 0;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (!all_have) {
    snprintf(err, sizeof err, "search: --backend cuda asked for, but rank %d on %s sees no CUDA device", va_proc.rank,
             va_proc.host);
    if (must) VA_AGREE_OR_EXIT(dev < 0 ? VA_EXIT_USAGE : 0, err);
    va_log0("backend auto: not every rank sees a CUDA device: the CPU search engine\n");
    return cpu_engine_for(precision, threads);
  }
  if (k > VA_CUDA_SEARCH_MAX_K) {
    va_log0("note: k = %lld is above the GPU search engine's limit of %d: the CPU search engine\n", (long long)k,
            VA_CUDA_SEARCH_MAX_K);
    return cpu_engine_for(precision, threads);
  }
  size_t free_b = 0, total_b = 0;
  const double need = pq_m > 0
                          ? (double)va_cuda_search_bytes(0, 0, d, nlists, batch, VA_CUDA_FP32) +
                                (double)va_cuda_pq_bytes(nlists, nrows, d, pq_m, batch)
                          : (double)va_cuda_search_bytes(nlists, nrows, d, nlists, batch, cuda_precision(precision));
  const double avail = va_cuda_memory(dev, &free_b, &total_b) ? -1 : (double)free_b;
  int short_of = avail >= 0 && need > 0.95 * avail, any_short = short_of;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &any_short, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (any_short) {
    snprintf(err, sizeof err,
             "search: rank %d on %s needs %.2f GiB on GPU %d for its %lld rows but %.2f GiB are free; use more GPUs "
             "(ranks) or --backend cpu",
             va_proc.rank, va_proc.host, need / 1073741824.0, dev, (long long)nrows, avail / 1073741824.0);
    if (must) VA_AGREE_OR_EXIT(short_of ? VA_EXIT_RESOURCE : 0, err);
    va_log0("backend auto: a rank's lists do not fit its GPU's free memory: the CPU search engine\n");
    return cpu_engine_for(precision, threads);
  }
  return va_search_engine_cuda(dev, threads, precision);
#endif
}
