/* mma.cuh: one mma.sync k-step on the tensor cores, per element type, for the fused argmin kernels
 * (cuda/assign.cu) and the tensor-core ceiling measured by the benchmark probe (cuda/probe.cu). Both
 * must issue the same instruction for the ceiling to be the fused kernels' own. Header-only, device
 * code only. */
#ifndef VECANNEAL_CUDA_MMA_CUH
#define VECANNEAL_CUDA_MMA_CUH
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

/* One 32-byte k-step of a 16 x 8 output tile: fp16/bf16 m16n8k16, tf32 m16n8k8 (the fragments that
 * ldmatrix gives are laid out alike in bytes for both). */
template <typename T>
struct Mma;
template <>
struct Mma<__half> {
  static __device__ __forceinline__ void run(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <>
struct Mma<float> { /* tf32: the hardware reads the top 19 bits of each float */
  static __device__ __forceinline__ void run(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

#endif
