/* check.cuh: checked CUDA and cuBLAS calls for every .cu file of the project (the k-means kernels and
 * the encoder): a failure names rank, host, file:line and the library's message and ends the job
 * (va_fatal_at). Also device allocation that says what it was for, and a buffer grown on demand. VA_CUBLAS needs
 * cuda/blas.cuh where it is used. */
#ifndef VECANNEAL_CUDA_CHECK_CUH
#define VECANNEAL_CUDA_CHECK_CUH
#include <cuda_runtime.h>
#include <stddef.h>

/* util.h is C (mpi.h, _Noreturn): keep MPI's C++ bindings out and give C++ a _Noreturn. */
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#if defined(__cplusplus) && !defined(_Noreturn)
#define _Noreturn [[noreturn]]
#endif
extern "C" {
#include "util/util.h"
}
#define VA_CUDA(call)                                                                                                  \
  do {                                                                                                                 \
    cudaError_t va_ce_ = (call);                                                                                       \
    if (va_ce_ != cudaSuccess)                                                                                         \
      va_fatal_at(__FILE__, __LINE__, "%s failed: %s (%s)", #call, cudaGetErrorString(va_ce_),                         \
                  cudaGetErrorName(va_ce_));                                                                           \
  } while (0)
#define VA_CUBLAS(call)                                                                                                \
  do {                                                                                                                 \
    cublasStatus_t va_bs_ = (call);                                                                                    \
    if (va_bs_ != CUBLAS_STATUS_SUCCESS)                                                                               \
      va_fatal_at(__FILE__, __LINE__, "%s failed: %s", #call, va_blas().cublasGetStatusString(va_bs_));                \
  } while (0)
/* After every launch: configuration errors now, and (debug builds) faults at once. */
#define VA_LAUNCHED() VA_CUDA(cudaGetLastError())

#define VA_ROUND_UP(x, m) ((((x) + (m)-1) / (m)) * (m))

/* cudaMalloc, fatal with the device's free memory when it fails; what names the buffer. */
template <typename P>
static inline void dalloc(P **p, size_t bytes, const char *what) {
  cudaError_t e = cudaMalloc((void **)p, bytes ? bytes : 16);
  if (e != cudaSuccess) {
    size_t fr = 0, tot = 0;
    (void)cudaGetLastError();
    cudaMemGetInfo(&fr, &tot);
    va_fatal_at(__FILE__, __LINE__, "cudaMalloc of %zu bytes for %s failed: %s (device has %zu of %zu bytes free)",
                bytes, what, cudaGetErrorString(e), fr, tot);
  }
}
template <typename P>
static inline void dfree(P **p) {
  if (*p) VA_CUDA(cudaFree((void *)*p));
  *p = NULL;
}
/* Grows a device buffer to hold n elements (doubling; the contents are not kept). */
template <typename P>
static inline void dgrow(P **buf, size_t *cap, size_t n, const char *what) {
  if (n <= *cap) return;
  dfree(buf);
  size_t c = *cap ? *cap : 1;
  while (c < n) c *= 2;
  dalloc(buf, c * sizeof **buf, what);
  *cap = c;
}
#endif
