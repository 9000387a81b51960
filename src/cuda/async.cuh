/* cuda_async.cuh: cp.async (global -> shared, 16 bytes, bypassing L1) and its group commit/wait, shared by
 * the assign kernels (cuda_assign.cu, cuda_assign_wgmma.cu) and the statistics pass (cuda_stats.cu). The
 * "memory" clobbers keep the compiler from moving ordinary shared-memory reads above a wait. Header-only,
 * device code only: the wgmma object library includes it without the rest of the context's headers. */
#ifndef VECANNEAL_CUDA_ASYNC_CUH
#define VECANNEAL_CUDA_ASYNC_CUH
#include <stdint.h>

/* saddr: a shared-memory address (__cvta_generic_to_shared). */
__device__ __forceinline__ void cp_async16(uint32_t saddr, const void *g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(saddr), "l"(g) : "memory");
}
/* 4 bytes, through L1 (the .cg form takes 16 only) */
__device__ __forceinline__ void cp_async4(uint32_t saddr, const void *g) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(saddr), "l"(g) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif
