/* cuda_blas.cu: opens libcublas and libcublasLt on first use and fills the function table of
 * cuda_blas.cuh. The libraries are looked up by their sonames first (LD_LIBRARY_PATH, the loader's
 * cache: what a cluster's CUDA module sets up), then in the directory the build found them in. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda/blas.cuh"
#include "cuda/check.cuh" /* VA_FATAL via util.h */

#ifndef VA_CUBLAS_DIR
#define VA_CUBLAS_DIR ""
#endif

namespace {

void *open_library(const char *soname) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (h) return h;
  char first[512];
  snprintf(first, sizeof first, "%s", dlerror());
  if (VA_CUBLAS_DIR[0]) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", VA_CUBLAS_DIR, soname);
    if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return h;
    VA_FATAL("cannot load %s, needed for matrix products (CUDA toolkit): %s; nor %s: %s", soname, first, path,
             dlerror());
  }
  VA_FATAL("cannot load %s, needed for matrix products (CUDA toolkit): %s", soname, first);
}

void *symbol(void *lib, const char *soname, const char *name) {
  void *f = dlsym(lib, name);
  if (!f)
    VA_FATAL("%s has no function %s (built against cuBLAS %d.%d): %s", soname, name, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR,
             dlerror());
  return f;
}

va_blas_api load() {
  static const char blas_name[] = VA_CUBLAS_SONAME, lt_name[] = VA_CUBLASLT_SONAME;
  void *blas = open_library(blas_name), *lt = open_library(lt_name);
  va_blas_api api;
#define VA_BLAS_LOAD(f, type)                                                                                          \
  {                                                                                                                    \
    const bool from_lt = !strncmp(#f, "cublasLt", 8);                                                                  \
    api.f = reinterpret_cast<type>(symbol(from_lt ? lt : blas, from_lt ? lt_name : blas_name, #f));                    \
  }
  VA_BLAS_FUNCTIONS(VA_BLAS_LOAD)
#undef VA_BLAS_LOAD
  return api; /* the libraries stay open for the process's life */
}

} // namespace

const va_blas_api &va_blas() {
  static const va_blas_api api = load();
  return api;
}

extern "C" void va_cuda_load_blas(void) { (void)va_blas(); }
