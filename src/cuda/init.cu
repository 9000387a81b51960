/* cuda_init.cu: farthest-point initialisation (init.c's init_farthest, the parity preset's init) with
 * the rows resident on the device. The host loop of init.c costs k round trips, each moving every
 * row's distance to the host; here each step is one kernel that folds the new anchor into every row's
 * running minimum and leaves the step's winner as one 64-bit key in device memory: the minimum's float
 * bits (non-negative, so ordered as integers) above the complement of the global row, so that the
 * largest key is the farthest row and, on ties, the lowest row, as init.c chooses. One rank chooses
 * the next anchor on the device from that key (no wait at all); several ranks reduce the keys on the
 * host and fetch the row (backend_cuda.c). Distances are r's (dist_acc4: double, float result). */
#include <float.h>
#include <string.h>

#include "cuda/internal.cuh"

static const int FPI_THREADS = 256;

__device__ __forceinline__ unsigned long long fpi_encode(float mind, uint32_t global_row) {
  return ((unsigned long long)__float_as_uint(mind) << 32) | (unsigned long long)(0xFFFFFFFFu - global_row);
}

/* One warp per row: mind[i] = min(mind[i], distance to anchor), then the block's largest key into *key. */
template <typename T>
__global__ void __launch_bounds__(FPI_THREADS)
    fpi_step_kernel(const T *__restrict__ X, int64_t n, int dp, const float *__restrict__ anchor, int cosine,
                    float *__restrict__ mind, uint32_t global_row0, unsigned long long *key) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t i = (int64_t)blockIdx.x * (FPI_THREADS / 32) + warp;
  unsigned long long best = 0;
  if (i < n) {
    const T *x = X + i * dp;
    const float4 *a4 = (const float4 *)anchor;
    double s = 0;
    for (int q = lane; q < dp / 4; q += 32) s = dist_acc4(row_load4<true>(x + 4 * q), __ldg(a4 + q), cosine, s);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (cosine) {
      s = 1.0 - s;
      s = s > 0 ? s : 0;
    }
    float v = (float)s, m = mind[i];
    if (v < m) m = v;
    if (lane == 0) mind[i] = m;
    best = fpi_encode(m, global_row0 + (uint32_t)i);
  }
  __shared__ unsigned long long wbest[FPI_THREADS / 32];
  if (lane == 0) wbest[warp] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < FPI_THREADS / 32; w++) best = wbest[w] > best ? wbest[w] : best;
    if (best) atomicMax(key, best);
  }
}

/* anchor <- the local row named by *key (one rank: always local). */
template <typename T>
__global__ void fpi_pick_kernel(const T *__restrict__ X, int64_t n, int dp, uint32_t global_row0,
                                const unsigned long long *__restrict__ key, float *__restrict__ anchor) {
  const int64_t row = (int64_t)(0xFFFFFFFFu - (uint32_t)(*key & 0xFFFFFFFFull)) - (int64_t)global_row0;
  for (int t = threadIdx.x; t < dp; t += blockDim.x)
    anchor[t] = row >= 0 && row < n ? elem_to_float(X[row * dp + t]) : 0.0f;
}

__global__ void fpi_fill_kernel(float *mind, int64_t n, float v) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    mind[i] = v;
}

extern "C" int va_cuda_farthest_init_begin(va_cuda_t *c, int64_t k, int64_t global_row0, int64_t global_n) {
  if (c->chunk_rows || k <= 0 || global_n >= (int64_t)0xFFFFFFFF)
    return 0; /* streamed rows or 32-bit row keys too small */
  va_cuda_enter(c);
  c->fpi_k = k;
  c->fpi_row0 = global_row0;
  VA_CUDA(cudaMalloc((void **)&c->fpi_mind, (size_t)(c->n > 0 ? c->n : 1) * 4));
  VA_CUDA(cudaMalloc((void **)&c->fpi_key, (size_t)k * 8));
  VA_CUDA(cudaMalloc((void **)&c->fpi_A, (size_t)(k * c->dp) * 4));
  VA_CUDA(cudaMemsetAsync(c->fpi_key, 0, (size_t)k * 8, c->stream));
  /* anchor 0 is global row 0: its key as a step would have left it */
  const unsigned long long key0 = 0xFFFFFFFFull;
  VA_CUDA(cudaMemcpyAsync(c->fpi_key, &key0, 8, cudaMemcpyHostToDevice, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream)); /* key0 lives on this stack frame */
  if (c->n > 0) {
    fpi_fill_kernel<<<(unsigned)((c->n + 255) / 256 < 1024 ? (c->n + 255) / 256 : 1024), 256, 0, c->stream>>>(
        c->fpi_mind, c->n, FLT_MAX);
    VA_LAUNCHED();
  }
  return 1;
}

extern "C" void va_cuda_farthest_init_pick(va_cuda_t *c, int64_t q) {
  va_cuda_enter(c);
  const va_cuda_rows_t v = va_cuda_resident_rows(c);
  va_cuda_with_rows(c, &v, [&](auto X) {
    fpi_pick_kernel<<<1, 128, 0, c->stream>>>(X, c->n, (int)c->dp, (uint32_t)c->fpi_row0, c->fpi_key + q,
                                              c->fpi_A + q * c->dp);
  });
  VA_LAUNCHED();
}

extern "C" void va_cuda_farthest_init_set(va_cuda_t *c, int64_t q, const float *row) {
  va_cuda_enter(c);
  float *h = (float *)va_cuda_host_scratch(c, (size_t)c->dp * 4);
  memset(h, 0, (size_t)c->dp * 4);
  memcpy(h, row, (size_t)c->d * 4);
  VA_CUDA(cudaMemcpyAsync(c->fpi_A + q * c->dp, h, (size_t)c->dp * 4, cudaMemcpyHostToDevice, c->stream));
}

extern "C" void va_cuda_farthest_init_step(va_cuda_t *c, int64_t q, int cosine) {
  if (c->n <= 0 || q + 1 >= c->fpi_k) return; /* the last anchor's distances choose nothing */
  va_cuda_enter(c);
  const int64_t per_block = FPI_THREADS / 32;
  const va_cuda_rows_t v = va_cuda_resident_rows(c);
  va_cuda_with_rows(c, &v, [&](auto X) {
    fpi_step_kernel<<<(unsigned)((c->n + per_block - 1) / per_block), FPI_THREADS, 0, c->stream>>>(
        X, c->n, (int)c->dp, c->fpi_A + q * c->dp, cosine, c->fpi_mind, (uint32_t)c->fpi_row0, c->fpi_key + q + 1);
  });
  VA_LAUNCHED();
}

extern "C" void va_cuda_farthest_init_candidate(va_cuda_t *c, int64_t q, float *dist, int64_t *global_row) {
  va_cuda_enter(c);
  unsigned long long *h = (unsigned long long *)va_cuda_host_scratch(c, 8);
  VA_CUDA(cudaMemcpyAsync(h, c->fpi_key + q, 8, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  const unsigned long long key = *h;
  const uint32_t bits = (uint32_t)(key >> 32);
  *dist = -1.0f;
  *global_row = INT64_MAX;
  if (!key) return; /* no rows on this rank */
  memcpy(dist, &bits, sizeof bits);
  *global_row = (int64_t)(0xFFFFFFFFu - (uint32_t)(key & 0xFFFFFFFFull));
}

extern "C" void va_cuda_farthest_init_end(va_cuda_t *c, float *A_host) {
  va_cuda_enter(c);
  if (A_host && c->fpi_k > 0)
    VA_CUDA(cudaMemcpy2DAsync(A_host, (size_t)c->d * 4, c->fpi_A, (size_t)c->dp * 4, (size_t)c->d * 4, (size_t)c->fpi_k,
                              cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  VA_CUDA(cudaFree(c->fpi_mind));
  VA_CUDA(cudaFree(c->fpi_key));
  VA_CUDA(cudaFree(c->fpi_A));
  c->fpi_mind = NULL;
  c->fpi_key = NULL;
  c->fpi_A = NULL;
  c->fpi_k = 0;
}
