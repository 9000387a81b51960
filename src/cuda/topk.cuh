/* topk.cuh: the device side of a top-k under the search order (distance, then id as unsigned, so the
 * filler (+inf, id -1) goes last: va_search_before of cpu/search.h), kept by one warp in a buffer of BUF
 * entries in shared memory: the k best so far sorted in [0, k), candidates appended after, and a sort
 * (bitonic over the warp's 32 lanes) that keeps the k first when the candidates could overflow. The k
 * first entries under a total order depend only on the set offered, not on the order of the offers:
 * the GPU scans (cuda/search.cu, cuda/pq_search.cu) answer entry for entry as the CPU heaps do. */
#ifndef VECANNEAL_CUDA_TOPK_CUH
#define VECANNEAL_CUDA_TOPK_CUH
#include <cuda_runtime.h>

/* a before b: smaller distance, then smaller id as unsigned (the filler id -1 last): va_search_before. */
__device__ __forceinline__ bool entry_before(float da, unsigned long long ia, float db, unsigned long long ib) {
  return da != db ? da < db : ia < ib;
}

/* Sorts one query's BUF entries ascending (bitonic network, the 32 lanes of a warp; ends with a warp
 * barrier). Equal entries are only fillers, so the result does not depend on the network. */
template <int BUF>
__device__ void warp_sort(float *sd, unsigned long long *sid, int lane) {
  for (int size = 2; size <= BUF; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = lane; i < BUF / 2; i += 32) {
        const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        const bool up = (lo & size) == 0;
        const float da = sd[lo], db = sd[hi];
        const unsigned long long ia = sid[lo], ib = sid[hi];
        if (entry_before(db, ib, da, ia) == up) {
          sd[lo] = db;
          sd[hi] = da;
          sid[lo] = ib;
          sid[hi] = ia;
        }
      }
      __syncwarp();
    }
}

/* Fillers from `from` on (+inf, id -1). Ends with a warp barrier. */
template <int BUF>
__device__ void warp_fill(float *sd, unsigned long long *sid, int from, int lane) {
  for (int i = from + lane; i < BUF; i += 32) {
    sd[i] = __int_as_float(0x7f800000);
    sid[i] = ~0ull;
  }
  __syncwarp();
}

/* The buffer's first k after a sort, the rest fillers; the new bound is entry k - 1. */
template <int BUF>
__device__ void warp_compact(float *sd, unsigned long long *sid, int *count, int k, int lane) {
  warp_sort<BUF>(sd, sid, lane);
  warp_fill<BUF>(sd, sid, k, lane);
  if (lane == 0) *count = 0;
  __syncwarp();
}

#endif
