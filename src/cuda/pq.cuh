/* pq.cuh: the device form of va_pq_subspace (cpu/pq.h) for the GPU PQ kernels (cuda/pq_search.cu,
 * cuda/pq_encode.cu): subspace m of M over d columns is columns [col0, col0 + width); every subspace has
 * d / M columns but the first d mod M, which have one more. */
#ifndef VECANNEAL_CUDA_PQ_CUH
#define VECANNEAL_CUDA_PQ_CUH
#include <stdint.h>

__device__ __forceinline__ void pq_subspace(int64_t d, int M, int m, int *col0, int *width) {
  const int base = (int)(d / M), longer = (int)(d % M);
  *width = base + (m < longer);
  *col0 = m * base + (m < longer ? m : longer);
}
#endif
