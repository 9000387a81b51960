/* cuda_vmm.cu: device memory with a releasable tail (cuda_vmm.cuh), on the driver's cuMem* functions. */
#include <cuda.h>
#include <stdlib.h>

#include "kernels/cuda_internal.cuh"
#include "kernels/cuda_vmm.cuh"

#define VA_CU_FUNCTIONS(X)                                                                               \
  X(cuGetErrorString) X(cuDeviceGet) X(cuDeviceGetAttribute) X(cuMemGetAllocationGranularity)           \
  X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap)  \
  X(cuMemSetAccess)

static struct {
#define VA_CU_MEMBER(f) decltype(&::f) f;
  VA_CU_FUNCTIONS(VA_CU_MEMBER)
#undef VA_CU_MEMBER
} cu;
static int cu_state; /* 0 not looked up, 1 found, -1 missing */

/* The driver functions (12.0 ABI); 0 when the driver lacks one. */
static int cu_load(void) {
  if (cu_state) return cu_state > 0;
  cu_state = 1;
#define VA_CU_LOAD(f)                                                                                    \
  {                                                                                                      \
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;                              \
    void *p = NULL;                                                                                      \
    if (cudaGetDriverEntryPointByVersion(#f, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||          \
        q != cudaDriverEntryPointSuccess || !p) {                                                        \
      (void)cudaGetLastError();                                                                          \
      cu_state = -1;                                                                                     \
    }                                                                                                    \
    cu.f = (decltype(cu.f))p;                                                                            \
  }
  VA_CU_FUNCTIONS(VA_CU_LOAD)
#undef VA_CU_LOAD
  return cu_state > 0;
}

static void cu_fail(CUresult r, const char *call, const char *file, int line) {
  const char *msg = NULL;
  if (cu.cuGetErrorString) cu.cuGetErrorString(r, &msg);
  size_t fr = 0, tot = 0;
  cudaMemGetInfo(&fr, &tot);
  va_fatal_at(file, line, "%s failed: %s (CUresult %d; device has %zu of %zu bytes free)", call, msg ? msg : "unknown error", (int)r, fr, tot);
}
#define VA_CU(call)                                                                                      \
  do {                                                                                                   \
    CUresult va_cr_ = (call);                                                                            \
    if (va_cr_ != CUDA_SUCCESS) cu_fail(va_cr_, #call, __FILE__, __LINE__);                              \
  } while (0)

static int vmm_supported(int device) {
  if (!cu_load()) return 0;
  CUdevice dev;
  int yes = 0;
  if (cu.cuDeviceGet(&dev, device) != CUDA_SUCCESS) return 0;
  if (cu.cuDeviceGetAttribute(&yes, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS) return 0;
  return yes;
}

static CUmemAllocationProp piece_prop(int device) {
  CUmemAllocationProp p = {};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  return p;
}

void va_vmm_alloc(va_vmm_t *m, int device, size_t bytes, const char *what) {
  *m = va_vmm_t{};
  m->device = device;
  if (bytes == 0) bytes = 1;
  VA_CUDA(cudaSetDevice(device));
  if (!vmm_supported(device)) {
    cudaError_t e = cudaMalloc(&m->base, bytes);
    if (e != cudaSuccess) {
      size_t fr = 0, tot = 0;
      (void)cudaGetLastError();
      cudaMemGetInfo(&fr, &tot);
      VA_FATAL("cudaMalloc of %zu bytes for %s failed: %s (device has %zu of %zu bytes free)", bytes, what, cudaGetErrorString(e), fr, tot);
    }
    m->piece = m->reserved = bytes;
    m->npieces = m->mapped = 1;
    return;
  }
  const CUmemAllocationProp prop = piece_prop(device);
  size_t gran = 0;
  VA_CU(cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t piece = (bytes / 256 + gran - 1) / gran * gran;
  if (piece < gran) piece = gran;
  m->piece = piece;
  m->npieces = (int64_t)((bytes + piece - 1) / piece);
  m->reserved = (size_t)m->npieces * piece;
  m->handles = (unsigned long long *)va_calloc((size_t)m->npieces, sizeof *m->handles, "device memory pieces");
  CUdeviceptr base = 0;
  VA_CU(cu.cuMemAddressReserve(&base, m->reserved, 0, 0, 0));
  m->base = (void *)base;
  for (int64_t i = 0; i < m->npieces; i++) {
    CUmemGenericAllocationHandle h;
    CUresult r = cu.cuMemCreate(&h, piece, &prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      size_t fr = 0, tot = 0;
      cudaMemGetInfo(&fr, &tot);
      VA_FATAL("allocating %zu bytes for %s: out of device memory after %lld of %lld pieces of %zu bytes (device has %zu of %zu bytes free)", bytes, what,
               (long long)i, (long long)m->npieces, piece, fr, tot);
    }
    VA_CU(r);
    m->handles[i] = h;
    VA_CU(cu.cuMemMap(base + (CUdeviceptr)((size_t)i * piece), piece, 0, h, 0));
    m->mapped = i + 1;
  }
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  VA_CU(cu.cuMemSetAccess(base, m->reserved, &access, 1));
}

static void unmap_from(va_vmm_t *m, int64_t keep_pieces) {
  for (int64_t i = m->mapped - 1; i >= keep_pieces; i--) {
    VA_CU(cu.cuMemUnmap((CUdeviceptr)m->base + (CUdeviceptr)((size_t)i * m->piece), m->piece));
    VA_CU(cu.cuMemRelease((CUmemGenericAllocationHandle)m->handles[i]));
  }
  if (keep_pieces < m->mapped) m->mapped = keep_pieces;
}

void va_vmm_shrink(va_vmm_t *m, size_t keep) {
  if (!m->base || !m->handles) return;
  VA_CUDA(cudaSetDevice(m->device));
  unmap_from(m, (int64_t)((keep + m->piece - 1) / m->piece));
}

void va_vmm_free(va_vmm_t *m) {
  if (!m->base) return;
  VA_CUDA(cudaSetDevice(m->device));
  if (!m->handles) {
    VA_CUDA(cudaFree(m->base));
  } else {
    unmap_from(m, 0);
    VA_CU(cu.cuMemAddressFree((CUdeviceptr)m->base, m->reserved));
    free(m->handles);
  }
  *m = va_vmm_t{};
}

size_t va_vmm_held(const va_vmm_t *m) { return m->base ? (size_t)m->mapped * m->piece : 0; }
