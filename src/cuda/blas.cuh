/* cuda_blas.cuh: cuBLAS and cuBLASLt, opened at their first use (dlopen) instead of linked.
 * Linked, they cost every process of a CUDA build their load before main: libcublasLt is a 540 MB
 * library whose ~400,000 relocations touch 25,000 pages (docs/performance.md). Most processes never
 * multiply a matrix: the CPU backend, small GPU passes (DIRECT), the fused argmin kernels, gen and info.
 * The GEMM assign path and the encoder call va_blas() where they create their handle; the other calls
 * go through the same table. */
#ifndef VECANNEAL_CUDA_BLAS_CUH
#define VECANNEAL_CUDA_BLAS_CUH
#include <cublasLt.h>
#include <cublas_v2.h>

/* cublasGemmEx is overloaded in C++ (an inline wrapper taking the old cudaDataType compute type):
 * the library's own function is the one with cublasComputeType_t. */
using va_cublasGemmEx_fn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                              const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                                              int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                                              cublasGemmAlgo_t);
#define VA_BLAS_TYPE(f) decltype(&::f)

/* Every cuBLAS/cuBLASLt function vecanneal calls, with its pointer type. cublas_v2.h maps cublasCreate
 * and friends to their _v2 names, so call sites keep writing va_blas().cublasCreate(...). */
#define VA_BLAS_FUNCTIONS(X)                                                                                           \
  X(cublasCreate_v2, VA_BLAS_TYPE(cublasCreate_v2))                                                                    \
  X(cublasDestroy_v2, VA_BLAS_TYPE(cublasDestroy_v2))                                                                  \
  X(cublasSetStream_v2, VA_BLAS_TYPE(cublasSetStream_v2))                                                              \
  X(cublasGemmEx, va_cublasGemmEx_fn)                                                                                  \
  X(cublasGetStatusString, VA_BLAS_TYPE(cublasGetStatusString))                                                        \
  X(cublasLtCreate, VA_BLAS_TYPE(cublasLtCreate))                                                                      \
  X(cublasLtDestroy, VA_BLAS_TYPE(cublasLtDestroy))                                                                    \
  X(cublasLtMatmul, VA_BLAS_TYPE(cublasLtMatmul))                                                                      \
  X(cublasLtMatmulAlgoGetHeuristic, VA_BLAS_TYPE(cublasLtMatmulAlgoGetHeuristic))                                      \
  X(cublasLtMatmulDescCreate, VA_BLAS_TYPE(cublasLtMatmulDescCreate))                                                  \
  X(cublasLtMatmulDescDestroy, VA_BLAS_TYPE(cublasLtMatmulDescDestroy))                                                \
  X(cublasLtMatmulDescSetAttribute, VA_BLAS_TYPE(cublasLtMatmulDescSetAttribute))                                      \
  X(cublasLtMatrixLayoutCreate, VA_BLAS_TYPE(cublasLtMatrixLayoutCreate))                                              \
  X(cublasLtMatrixLayoutDestroy, VA_BLAS_TYPE(cublasLtMatrixLayoutDestroy))                                            \
  X(cublasLtMatrixLayoutSetAttribute, VA_BLAS_TYPE(cublasLtMatrixLayoutSetAttribute))                                  \
  X(cublasLtMatmulPreferenceCreate, VA_BLAS_TYPE(cublasLtMatmulPreferenceCreate))                                      \
  X(cublasLtMatmulPreferenceDestroy, VA_BLAS_TYPE(cublasLtMatmulPreferenceDestroy))                                    \
  X(cublasLtMatmulPreferenceSetAttribute, VA_BLAS_TYPE(cublasLtMatmulPreferenceSetAttribute))

/* The libraries' sonames, of the cuBLAS major version the build compiled against. */
#define VA_BLAS_STR_(x)    #x
#define VA_BLAS_STR(x)     VA_BLAS_STR_(x)
#define VA_CUBLAS_SONAME   "libcublas.so." VA_BLAS_STR(CUBLAS_VER_MAJOR)
#define VA_CUBLASLT_SONAME "libcublasLt.so." VA_BLAS_STR(CUBLAS_VER_MAJOR)

struct va_blas_api {
#define VA_BLAS_MEMBER(f, type) type f;
  VA_BLAS_FUNCTIONS(VA_BLAS_MEMBER)
#undef VA_BLAS_MEMBER
};

/* The table, loaded on the first call (thread-safe); a library or function that cannot be found ends
 * the job with the loader's message (VA_FATAL). */
const va_blas_api &va_blas();

#endif
