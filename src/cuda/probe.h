/* probe.h: FOR TESTS AND BENCHMARKS ONLY. Hooks into a CUDA context (cuda/kernels.h) that no job needs:
 * forcing a kernel or configuration, poisoning a[] and r[], reading the device's anchor norms, and device
 * times of single passes. They live in their own static library, vecanneal_cuda_probe (cmake/cuda.cmake),
 * which tests/cuda and bench/ link and the vecanneal executable and vecanneal_core do not; nothing under
 * src/ other than cuda/probe.cu includes this header. The probes launch the library's own host code and
 * kernels (cuda/internal.cuh), so what they time or check is what a job runs. */
#ifndef VECANNEAL_CUDA_PROBE_H
#define VECANNEAL_CUDA_PROBE_H
#include <stdint.h>

#include "cpu/stats.h"
#include "cuda/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Choose the kernels: VA_CUDA_ASSIGN_* and VA_CUDA_STATS_* (a context starts at AUTO and SORT, the
 * production choice). */
void va_cuda_set_assign_variant(va_cuda_t *ctx, int variant);
void va_cuda_set_stats_variant(va_cuda_t *ctx, int variant);
/* How the sorted statistics group rows by anchor (cuda/seg_sort.cu): 0 = automatic (the counting sort where it
 * applies, else the radix sort), 2 = cub's radix sort always. */
void va_cuda_set_segment_way(va_cuda_t *ctx, int way);
/* Fused kernel configuration: 0 = automatic, 1 = rows in shared memory (any d whose tiles fit),
 * 2 = rows held in registers (d <= 128, mma.sync), 3 = wgmma (sm_90 only; padded rows of 32 to 384
 * elements at 16 bits, 32, 64 and 128 at tf32; the fastest where it applies, docs/performance.md),
 * 4 = wgmma with rows and anchors loaded by the TMA (sm_90 only, any d; on sm_90 the automatic choice for
 * every row 3 does not take). Returns the configuration now in force (0: that one
 * does not apply to this context's shape and device). */
#define VA_CUDA_FUSED_CONFIGS 4
int va_cuda_set_fused_config(va_cuda_t *ctx, int cfg);
/* Blocks per 128-row block of configuration 4, each scanning a slice of the anchor tiles (0: automatic,
 * from the L2's size). Returns the count a pass over all rows now takes (capped at the tile count). */
int va_cuda_set_tma_splits(va_cuda_t *ctx, int splits);
/* Rows per chunk of the GEMM path (0: about 128 MB of products, the default). */
void va_cuda_set_gemm_rows(va_cuda_t *ctx, int64_t rows);
/* The context's device as "domain:bus:device.0" (NVML's PCI bus id form), for a benchmark's clock reader. */
void va_cuda_pci_bus_id(const va_cuda_t *ctx, char *buf, size_t len);

/* The rows grouped by segment as the sorted statistics group them: keys (n values in [0, nseg], n at most the
 * context's rows a pass sees) sorted stably, the counting sort where it applies (way 0) or the radix sort (2):
 * the rows in order into rows[n], each segment's [start, end) into start[nseg], end[nseg]. Returns the sort
 * taken (1 counting, 2 radix), 0 when n exceeds the rows a pass sees (nothing written). */
int va_cuda_debug_segment_rows(va_cuda_t *ctx, const uint32_t *keys, int64_t n, int64_t nseg, int way, uint32_t *rows,
                               int32_t *start, int32_t *end);
/* Fill a[] with an impossible anchor and r[] with NaN, so a test sees every row written next pass. */
void va_cuda_debug_poison(va_cuda_t *ctx);
/* The anchors' squared norms as the device holds them (k floats: twice the l2 half biases). */
void va_cuda_debug_anchor_norms(va_cuda_t *ctx, float *out);

/* Device time of one assign pass (kernels only, CUDA events), `reps` timed runs after `warmup`:
 * the median in ms (min in *min_ms if not NULL). gemm_only: 1 = the cuBLAS products of the GEMM path
 * alone (the library's own rate); 2 = the fused argmin kernel alone; 3 = the r kernel alone. */
double va_cuda_bench_assign(va_cuda_t *ctx, int cosine, int warmup, int reps, int gemm_only, double *min_ms);
/* TFLOP/s of mma.sync alone (registers only, no memory): the fused kernel's ceiling on this device.
 * precision VA_CUDA_TF32 / FP16 / BF16; blocks_per_sm of 8 warps. */
double va_cuda_bench_mma_peak(va_cuda_t *ctx, int precision, int blocks_per_sm);
/* Same for one statistics reduction (rule as va_cuda_stats), excluding the host copies. compute_r: the
 * reduction computes r itself, as after a deferred assign pass (sorted reduction, none/huber). */
double va_cuda_bench_stats(va_cuda_t *ctx, const va_stats_rule_t *rule, int compute_r, int warmup, int reps,
                           double *min_ms);
/* Same for the device's share of one annealing-loop iteration as the CUDA backend queues it: deferred
 * assign pass, statistics (r computed there unless trim), the scalars' gather and copy, the update
 * (eta 0.5, beta 0, no clamp) with norms and 16-bit copy. The anchors move: call it on a scratch context. */
double va_cuda_bench_iteration(va_cuda_t *ctx, const va_stats_rule_t *rule, int cosine, int warmup, int reps,
                               double *min_ms);
/* Same for farthest + hist (bins > 0) together, excluding the host copies. */
double va_cuda_bench_farthest_hist(va_cuda_t *ctx, const float *rmax_host, int64_t bins, int warmup, int reps,
                                   double *min_ms);

#ifdef __cplusplus
}
#endif
#endif
