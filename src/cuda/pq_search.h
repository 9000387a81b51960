/* pq_search.h (cuda): the GPU side of search on residual product-quantization codes behind a C API
 * (backend/search.c's GPU engine runs its scan_codes on it). One rank's codes in list order, their ids,
 * the list offsets, the codebooks transposed, the anchors in the codes' frame and (l2) the anchors' terms
 * are uploaded once; per batch every query's lookup table is built in shared memory from its float32
 * values and the codes of its probed lists are streamed through it into a fused top-k. Every table entry,
 * list base and distance is computed with exactly the recipe of cpu/pq_search.h (products rounded, then
 * added in increasing column; the base in double; a row's distance base + table[0, code_0] + ... in
 * increasing subspace) with the round-to-nearest intrinsics (no contraction, no flush to zero), and the
 * top-k keeps the k first entries under the search order (cuda/topk.cuh): the answer is the CPU
 * engine's, entry for entry. Any CUDA failure is fatal (VA_CUDA). Only built with VECANNEAL_CUDA. */
#ifndef VECANNEAL_CUDA_PQ_SEARCH_H
#define VECANNEAL_CUDA_PQ_SEARCH_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "cpu/search.h" /* va_neighbor_t (C linkage from the .cu too) */

typedef struct va_cuda_pq va_cuda_pq_t;

/* Whether one block's tables (l2: the query's and the list's, M x ksub floats each; cosine: one), the
 * query and the top-k buffer fit the shared memory a block of `device` may have; 0: the scan on codes
 * of this shape runs on the CPU. */
int va_cuda_pq_fits(int device, int64_t d, int64_t M, int64_t ksub, int cosine);
/* Device bytes the codes of this shape take, plus the scratch of batches of `batch` queries, for a
 * memory check before the upload (ksub at most 256). */
size_t va_cuda_pq_bytes(int64_t nlists, int64_t nrows, int64_t d, int64_t M, int64_t batch);
/* Uploads one rank's codes to `device`: list j is rows [offset[j], offset[j + 1]) of codes (nrows x M
 * bytes, list order) with global ids ids[...]; T the codebooks transposed (d x ksub, va_pq_transpose);
 * frame the nlists anchors in the codes' frame (nlists x d); terms, for l2, the anchors' terms
 * (nlists x M x ksub, va_pq_list_terms), NULL for cosine. The host arrays may be freed after the call.
 * The shape must fit (va_cuda_pq_fits). */
va_cuda_pq_t *va_cuda_pq_create(int device, int64_t nlists, int64_t nrows, int64_t d, int64_t M, int64_t ksub,
                                const int64_t *offset, const uint8_t *codes, const int64_t *ids, const float *T,
                                const float *frame, const float *terms);
void va_cuda_pq_destroy(va_cuda_pq_t *p);
/* out[q * k ...] <- the k first entries (sorted, fillers after) of query q's members of lists
 * probes[q * nprobe ...] (distinct lists) by their distance through query q's tables: va_pq_scan_lists's
 * answer. Qf: nq x d queries in the codes' frame. 1 <= k <= VA_CUDA_SEARCH_MAX_K (cuda/search.h).
 * Returns when out is filled. */
void va_cuda_pq_scan(va_cuda_pq_t *p, const float *Qf, int64_t nq, const int64_t *probes, int64_t nprobe, int64_t k,
                     va_neighbor_t *out);

#ifdef __cplusplus
}
#endif
#endif
