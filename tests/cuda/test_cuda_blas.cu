/* test_cuda_blas.cu: cuBLAS and cuBLASLt are opened at their first use (kernels/cuda_blas.cuh), not at
 * program start. Needs no GPU (runs in CI): checks that neither library is in the process before
 * va_blas(), that every function of the table resolves, that the table's cublasGetStatusString tells two statuses
 * apart and a cuBLASLt descriptor can be created, set and destroyed through it, and that va_blas() loads only once.
 * Exits 1 on any failure, 0 when all pass. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda/blas.cuh"

static int failures = 0;
static void check(bool ok, const char *what) {
  printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) failures++;
}

static bool loaded(const char *soname) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != NULL;
}

int main() {
  const char *blas = VA_CUBLAS_SONAME, *lt = VA_CUBLASLT_SONAME;
  check(!loaded(blas) && !loaded(lt), "neither cuBLAS library is loaded at program start");
  const va_blas_api &api = va_blas();
  check(loaded(blas) && loaded(lt), "va_blas() loaded libcublas and libcublasLt");
  int missing = 0;
#define VA_BLAS_PRESENT(f, type) missing += api.f == NULL;
  VA_BLAS_FUNCTIONS(VA_BLAS_PRESENT)
#undef VA_BLAS_PRESENT
  check(missing == 0, "every function of the table resolved");
  const char *ok_text = api.cublasGetStatusString(CUBLAS_STATUS_SUCCESS);
  const char *bad_text = api.cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE);
  printf("      cublasGetStatusString: success \"%s\", invalid value \"%s\"\n", ok_text ? ok_text : "(null)",
         bad_text ? bad_text : "(null)");
  check(ok_text && bad_text && ok_text[0] && bad_text[0] && strcmp(ok_text, bad_text),
        "cublasGetStatusString through the table: two statuses, two texts");
  /* A descriptor needs no device: create, set and destroy one through the table. */
  cublasLtMatmulDesc_t desc = NULL;
  cublasStatus_t st = api.cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t ta = CUBLAS_OP_T;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = api.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (desc && st == CUBLAS_STATUS_SUCCESS) st = api.cublasLtMatmulDescDestroy(desc);
  check(st == CUBLAS_STATUS_SUCCESS, "a cuBLASLt matmul descriptor created, set and destroyed through the table");
  check(&va_blas() == &api, "va_blas() returns the same table");
  if (failures) printf("%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
