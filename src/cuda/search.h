/* search.h (cuda): the GPU side of nearest-neighbour search behind a C API (backend/search.c makes the
 * GPU search engine of backend/search.h from it). One rank's inverted lists (rows float32, global row
 * ids, list offsets) and the index's anchors are uploaded once; every batch uploads its queries, and the
 * probe (queries against the anchors) or the scan (queries against the rows of the lists they probe, or
 * every row: exact) runs as a tiled product with a fused top-k: no queries x rows matrix is formed.
 * At fp32 (and always in the probe) bitwise the CPU engine's answer: every distance is computed with exactly the recipe
 * of cpu/search.h (eight partial sums over t mod 8, each built with fmaf in increasing t, combined as
 * ((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7)); cosine = max(0, 1 - dot); the probe's l2 key |a|^2 - 2 q.a) in
 * IEEE float32 without fast-math (no flush to zero, no reassociation: cuda/search.cu says how), so each
 * distance has the CPU's bits; and a top-k is the k first entries under the same total order (distance,
 * then global row id or anchor id), which depends only on the set of rows scanned. The answer is
 * therefore identical entry for entry, fillers (id -1, distance +inf) included. Any CUDA failure is fatal
 * (VA_CUDA: rank, host, file:line). Only built when VECANNEAL_CUDA is defined (cmake/cuda.cmake). */
#ifndef VECANNEAL_CUDA_SEARCH_H
#define VECANNEAL_CUDA_SEARCH_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "cpu/search.h" /* va_neighbor_t (C linkage from the .cu too) */

/* The largest k (and nprobe) the GPU scan takes: a query keeps its k best and a tile of candidates in a
 * buffer of 512 entries in shared memory. Above it the engine runs the CPU kernels (backend/search.c). */
#define VA_CUDA_SEARCH_MAX_K 256

typedef struct va_cuda_search va_cuda_search_t;

/* The list scan's products: fp32 = the CPU's recipe (bitwise); tf32, fp16, bf16 = tensor cores, the
 * rows stored in that type (fp16/bf16 halve their memory), near neighbours may reorder (cuda/search.cu). */
typedef enum { VA_CUDA_FP32, VA_CUDA_TF32, VA_CUDA_FP16, VA_CUDA_BF16 } va_cuda_precision_t;

/* Device bytes the lists and anchors of this shape take plus the scratch of a batch of `batch` queries
 * probing up to `nlists` lists each: for a memory check before the upload. */
size_t va_cuda_search_bytes(int64_t nlists, int64_t nrows, int64_t d, int64_t nanchors, int64_t batch,
                            va_cuda_precision_t precision);
/* Uploads one rank's lists to `device`: list j is rows [offset[j], offset[j + 1]) of rows (nrows x d,
 * float32) with global ids ids[...]; and the anchors (nanchors x d, the lists' frame) with, for the l2
 * probe, their |a|^2 by the probe's recipe (va_search_probe_norm; NULL for cosine). The host arrays may
 * be freed after the call. The scan's products are taken at `precision`; the probe's always fp32. */
va_cuda_search_t *va_cuda_search_create(int device, int64_t nlists, int64_t nrows, int64_t d, const int64_t *offset,
                                        const float *rows, const int64_t *ids, int64_t nanchors, const float *anchors,
                                        const float *anchor_norms, va_cuda_precision_t precision);
void va_cuda_search_destroy(va_cuda_search_t *s);
/* out[q * k ...] <- the k first entries (sorted, fillers after) of query q's members of lists
 * probes[q * nprobe ...] (distinct lists), or, probes NULL, of every row, at the engine's precision. Q: nq x d in the
 * lists' frame (cosine: unit rows). 1 <= k <= VA_CUDA_SEARCH_MAX_K. Returns when out is filled. */
void va_cuda_search_scan(va_cuda_search_t *s, const float *Q, int64_t nq, const int64_t *probes, int64_t nprobe,
                         int cosine, int64_t k, va_neighbor_t *out);
/* out[q * nprobe ...] <- query q's nprobe first anchors by the probe's key (va_search_probe_key), ids
 * the anchor numbers: va_search_probe's answer. 1 <= nprobe <= VA_CUDA_SEARCH_MAX_K. */
void va_cuda_search_probe(va_cuda_search_t *s, const float *Q, int64_t nq, int cosine, int64_t nprobe,
                          va_neighbor_t *out);

#ifdef __cplusplus
}
#endif
#endif
