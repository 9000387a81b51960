/* cuda_internal.cuh: the context struct and checked-call macros shared by the cuda_*.cu files. */
#ifndef VECANNEAL_CUDA_INTERNAL_CUH
#define VECANNEAL_CUDA_INTERNAL_CUH
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

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
#include "util.h"
}
#include "kernels/cuda_kernels.h"

#define VA_CUDA(call)                                                                                  \
  do {                                                                                                 \
    cudaError_t va_ce_ = (call);                                                                       \
    if (va_ce_ != cudaSuccess) va_fatal_at(__FILE__, __LINE__, "%s failed: %s (%s)", #call,            \
                                           cudaGetErrorString(va_ce_), cudaGetErrorName(va_ce_));      \
  } while (0)
#define VA_CUBLAS(call)                                                                                \
  do {                                                                                                 \
    cublasStatus_t va_bs_ = (call);                                                                    \
    if (va_bs_ != CUBLAS_STATUS_SUCCESS)                                                               \
      va_fatal_at(__FILE__, __LINE__, "%s failed: %s", #call, cublasGetStatusString(va_bs_));          \
  } while (0)
/* After every launch: configuration errors now, and (debug builds) faults at once. */
#define VA_LAUNCHED() VA_CUDA(cudaGetLastError())

#define VA_ROUND_UP(x, m) ((((x) + (m) - 1) / (m)) * (m))
/* Row stride of every device matrix (floats or 16-bit elements): d rounded up to 32, zero padded, so
 * that a 32-byte k-step of the tensor-core kernels never straddles a row's end. */
#define VA_CUDA_DPAD 32
/* Rows are padded to a multiple of this (the fused kernel's largest BM), anchors too (largest BN). */
#define VA_CUDA_ROWPAD 256
#define VA_CUDA_KPAD 256

struct va_cuda {
  int device, precision, assign_variant, stats_variant;
  int64_t n, npad, d, dp;
  int64_t k, k_cap;            /* anchors in use; allocated (a multiple of VA_CUDA_KPAD) */
  cudaStream_t stream;
  cudaEvent_t ev0, ev1;
  cublasHandle_t blas;
  cudaDeviceProp prop;
  /* rows */
  float *X32;                  /* npad x dp, zero padded */
  void *Xlp;                   /* npad x dp fp16/bf16 (precision 2/3), else NULL */
  int *overflow;               /* set when a row does not fit fp16 */
  /* anchors */
  float *A32;                  /* k_cap x dp */
  void *Alp;                   /* k_cap x dp fp16/bf16 */
  float *bias_l2, *bias_cos;   /* k_cap: half biases ||a||^2 / 2 (l2), 0 (cosine) for j < k, +inf beyond */
  /* per row */
  uint32_t *assign;            /* n (UINT32_MAX before the first pass) */
  float *r;
  uint32_t *keys, *keys_sorted, *iota, *vals_sorted; /* n each: the sort of rows by segment */
  unsigned long long *counter; /* changed rows */
  unsigned long long *h_counter; /* pinned */
  /* GEMM path scratch: chunk x k_cap floats */
  float *C;
  int64_t chunk, C_cap, gemm_rows;
  /* per anchor */
  unsigned *rmax_bits;
  unsigned long long *rarg;
  float *rmax_in;
  int32_t *bin_lo, *bin_hi;
  double *huber;
  unsigned *hist;
  int64_t hist_cap;
  double *acc;                 /* seg_cap x W */
  /* segmented reduction */
  int64_t seg_cap;             /* segments the arrays below hold (+1) */
  int32_t *seg_start, *seg_end, *npieces, *pstart, *ptable;
  double *partial;
  int64_t partial_cap;         /* pieces */
  void *cub_tmp;
  size_t cub_tmp_bytes;
  /* split */
  int32_t *slot;
  float *cent;
  int64_t split_cap;           /* halves */
  /* host staging */
  float *pinned[2];
  cudaEvent_t staged[2];
  size_t pinned_bytes;
  int pin_next;
  void *h_buf;                 /* pinned scratch for results */
  size_t h_buf_bytes;
  int64_t *d_rows;             /* get_rows indices */
  float *d_rows_out;
  int64_t rows_cap;
  /* resolved fused-kernel configuration (cuda_assign.cu): 0 none, 1..6; fused_force: asked for */
  int fused_cfg, fused_force;
};

/* Internal entry points across the .cu files. */
void va_cuda_enter(const va_cuda_t *ctx);
void *va_cuda_host_scratch(va_cuda_t *ctx, size_t bytes);
void va_cuda_ensure_segments(va_cuda_t *ctx, int64_t nseg);
int va_cuda_fused_config(const va_cuda_t *ctx);
/* Parts of an assign pass (benchmarks): the whole pass; the GEMM path's cuBLAS products alone; the
 * fused path's argmin kernel alone (a[] and the changed count); its r kernel alone. */
enum { VA_ASSIGN_PART_ALL = 0, VA_ASSIGN_PART_PRODUCTS = 1, VA_ASSIGN_PART_ARGMIN = 2, VA_ASSIGN_PART_R = 3 };
void va_cuda_assign_launch(va_cuda_t *ctx, int cosine, int variant, int part);
#endif
