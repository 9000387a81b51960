/* elem.cuh: the element types of rows and activations on the GPU (float, __half, __nv_bfloat16): a value
 * seen as the float it is (a 16-bit value converts to float exactly) and a float rounded to the type (to
 * nearest). Header-only, device code; used by the k-means context, the search scan and the encoder. */
#ifndef VECANNEAL_CUDA_ELEM_CUH
#define VECANNEAL_CUDA_ELEM_CUH
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float elem_to_float(float x) { return x; }
__device__ __forceinline__ float elem_to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float elem_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T elem_from_float(float x);
template <>
__device__ __forceinline__ float elem_from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half elem_from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 elem_from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
#endif
