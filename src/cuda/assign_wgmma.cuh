/* cuda_assign_wgmma.cuh: host entry points of the Hopper (sm_90a) argmin kernel, for cuda_assign.cu.
 * The kernel lives in its own translation unit (cuda_assign_wgmma.cu), built for sm_90a alone
 * (cmake/cuda.cmake): wgmma exists only there, and no other image of it may be picked on an sm_90
 * device. Errors come back as cudaError_t for the caller's VA_CUDA. */
#ifndef VECANNEAL_CUDA_ASSIGN_WGMMA_CUH
#define VECANNEAL_CUDA_ASSIGN_WGMMA_CUH
#include <cuda_runtime.h>
#include <stdint.h>

/* Dynamic shared memory of the kernel for rows of dp elements in `precision` (VA_CUDA_TF32, _FP16,
 * _BF16), or 0 when no instance takes that row length (padded rows of 32 to 736 elements at 16 bits; 32, 64,
 * 128 and 160 to 352 at tf32). */
size_t va_wgmma_smem(int precision, int64_t dp);
/* a[] and the changed count for rows [0, n) of X (n x dp, the rows past n up to a multiple of 256
 * readable), anchors A (k x dp, storage padded to 256 anchors), half biases hb (+inf past k); sms: the
 * device's multiprocessors (how far ahead a block prefetches rows). */
cudaError_t va_wgmma_argmin(int precision, const void *X, const void *A, const float *hb, int64_t n, int64_t dp,
                            int64_t k, uint32_t *assign, unsigned long long *counter, int sms, cudaStream_t stream);
/* The same two for the kernel whose rows and anchors both stream through shared memory (the TMA's loads):
 * any padded row length (a multiple of 32 elements), made for those the kernel above does not take.
 * splits: blocks per 128-row block, each scanning a slice of the 256-anchor tiles (1 to the tile count);
 * above 1 they merge through merged (n keys, all ones) and tickets (one per 128 rows, zero), which the
 * pass leaves as it found them. */
size_t va_tma_smem(int precision, int64_t dp);
cudaError_t va_tma_argmin(int precision, const void *X, const void *A, const float *hb, int64_t n, int64_t dp,
                          int64_t k, int splits, uint32_t *assign, unsigned long long *counter,
                          unsigned long long *merged, unsigned *tickets, cudaStream_t stream);
/* anchors a tile of that kernel (a pass has ceil(k / it) tiles) */
#define VA_TMA_TILE_ANCHORS 256
#endif
