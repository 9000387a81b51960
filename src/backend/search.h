/* search.h (backend): the seam of nearest-neighbour search. The search job (job/search.c) hands a
 * search engine this rank's inverted lists and the index's anchors; per batch of queries the engine
 * finds each query's nearest anchors (the lists it probes) and each query's top k over its members of
 * the probed lists (or over every row: exact). The CPU engine runs cpu/search.h; the GPU engine
 * (cuda/search.h) takes the same lists and anchors, uploaded once, and answers with the same entries bit
 * for bit (the same distance recipe, the order of cpu/search.h: distance, then global row id or anchor
 * id), so the job does not change with the hardware and never sees CUDA. */
#ifndef VECANNEAL_BACKEND_SEARCH_H
#define VECANNEAL_BACKEND_SEARCH_H
#include <stdint.h>

#include "cpu/search.h" /* va_neighbor_t */

/* One rank's inverted lists: the rows of its shard grouped by anchor. List j holds rows
 * [offset[j], offset[j + 1]) of rows (in list order, d floats each; cosine: unit length) with global
 * row ids ids[...], ascending within a list. anchors: the index's nanchors anchors in the same frame,
 * which the probe measures (nanchors = nlists).
 * Lists of codes (scan_codes) hold instead, or besides, each row's pq_m codes in list order (codes, nrows x
 * pq_m bytes), the codebooks transposed (pq_T, d x pq_ksub: va_pq_transpose), for l2 the anchors' terms
 * (pq_terms, nlists x pq_m x pq_ksub: va_pq_list_terms; NULL for cosine) and the anchors in the codes'
 * frame (frame, nlists x d: cpu/pq_search.h); rows may then be NULL. Lists of rows alone: codes NULL. */
typedef struct {
  int64_t nlists, nrows, d;
  const int64_t *offset;
  const float *rows;
  const int64_t *ids;
  int64_t nanchors;
  const float *anchors;
  const uint8_t *codes;
  int64_t pq_m, pq_ksub;
  const float *pq_T, *pq_terms, *frame;
} va_search_lists_t;

typedef struct va_search_engine {
  const char *name;      /* "cpu" or "cuda" */
  const char *precision; /* of the list scan's products: "fp32" (the CPU engine), or the GPU engine's */
  int threads;
  void *ctx; /* the engine's own state (the GPU engine's device and its lists there); NULL on the CPU */
  /* Once, before the first scan: the engine takes the lists it will scan (the GPU engine uploads them;
   * the CPU engine reads them in place). Every scan after it gets these lists, unchanged. */
  void (*prepare)(struct va_search_engine *e, const va_search_lists_t *lists);
  /* probes[q * nprobe ...] <- query q's nprobe nearest anchors, va_search_probe's answer (the same bits on
   * every engine). 1 <= nprobe <= nanchors. */
  void (*probe)(const struct va_search_engine *e, const va_search_lists_t *lists, const float *Q, int64_t nq,
                int cosine, int64_t nprobe, int64_t *probes);
  /* out[q * k ...] <- the k best of query q's members of lists probes[q * nprobe ...], sorted (fillers
   * when the lists hold fewer than k rows). Q: nq x d queries in the lists' frame. */
  void (*scan_lists)(const struct va_search_engine *e, const va_search_lists_t *lists, const float *Q, int64_t nq,
                     const int64_t *probes, int64_t nprobe, int cosine, int64_t k, va_neighbor_t *out);
  /* The same over the lists' codes: out[q * k ...] <- the k best of query q's members of the probed lists
   * by their distance through query q's lookup tables (va_pq_scan_lists's answer, the same bits on every
   * engine). Qf: the queries in the codes' frame (cpu/pq_search.h). */
  void (*scan_codes)(const struct va_search_engine *e, const va_search_lists_t *lists, const float *Qf, int64_t nq,
                     const int64_t *probes, int64_t nprobe, int cosine, int64_t k, va_neighbor_t *out);
  /* The same over every row of the lists (exact search). */
  void (*scan_all)(const struct va_search_engine *e, const va_search_lists_t *lists, const float *Q, int64_t nq,
                   int cosine, int64_t k, va_neighbor_t *out);
  /* Frees what prepare made (device buffers); the engine is not used after. */
  void (*destroy)(struct va_search_engine *e);
} va_search_engine_t;

/* The CPU engine on `threads` threads (prepare and destroy do nothing). */
va_search_engine_t va_search_engine_cpu(int threads);
/* The GPU engine on CUDA device `device` (cuda/search.h) with the list scan's products at `precision`
 * (one of va_search_precisions): at fp32 the same entries as the CPU engine, bit for bit; at tf32, fp16
 * or bf16 on the tensor cores (near neighbours may reorder; the probe stays the CPU's). The scan on codes
 * (cuda/pq_search.h) is bitwise the CPU's at every precision (its tables are float32). k (or nprobe)
 * above VA_SEARCH_GPU_MAX_K, or lookup tables larger than a block's shared memory, run the CPU kernels on
 * `threads` threads instead. Exists only in a build with the CUDA backend (VECANNEAL_CUDA). */
va_search_engine_t va_search_engine_cuda(int device, int threads, const char *precision);
/* The precisions `search --precision` takes, NULL-terminated: fp32 tf32 fp16 bf16. */
extern const char *const va_search_precisions[];
/* The largest k the GPU engine scans on the device (cuda/search.h: VA_CUDA_SEARCH_MAX_K). */
#define VA_SEARCH_GPU_MAX_K 256

/* Collective: the engine for `backend` ("auto", "cpu" or "cuda"), the same kind on every rank (never a
 * mix). auto: the GPU engine when this build has CUDA, every rank sees a device and every rank's lists
 * (nlists lists and anchors, nrows x d rows stored at `precision`, or with pq_m > 0 nrows x pq_m codes,
 * batches of `batch` queries) fit its free GPU memory, and k is at most VA_SEARCH_GPU_MAX_K; else the
 * CPU engine, with a note on rank 0
 * saying why (and, for a precision other than fp32, that the CPU computes fp32). cuda: the GPU engine,
 * or an agreed exit: 2 without a CUDA build or a device on some rank, 5 when the lists do not fit a
 * GPU; above the k limit the CPU engine with a note. `precision` must be one of va_search_precisions
 * (the caller checks). Call prepare with the lists, scan, then destroy. */
va_search_engine_t va_search_engine_open(const char *backend, const char *precision, int threads, int64_t k,
                                         int64_t nlists, int64_t nrows, int64_t d, int64_t pq_m, int64_t batch);
#endif
