/* cuda_vmm.cu: device memory with a releasable tail (cuda_vmm.cuh), on the driver's cuMem* functions. */
#include <cuda.h>
#include <stdlib.h>

#include "cuda/check.cuh" /* VA_CUDA, dalloc, dfree */
#include "cuda/vmm.cuh"

// clang-format off: one driver function per line
#define VA_CU_FUNCTIONS(X)                                                                                             \
  X(cuGetErrorString)                                                                                                  \
  X(cuDeviceGet)                                                                                                       \
  X(cuDeviceGetAttribute)                                                                                              \
  X(cuMemGetAllocationGranularity)                                                                                     \
  X(cuMemAddressReserve)                                                                                               \
  X(cuMemAddressFree)                                                                                                  \
  X(cuMemCreate)                                                                                                       \
  X(cuMemRelease)                                                                                                      \
  X(cuMemMap)                                                                                                          \
  X(cuMemUnmap)                                                                                                        \
  X(cuMemSetAccess)
// clang-format on

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
#define VA_CU_LOAD(f)                                                                                                  \
  {                                                                                                                    \
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;                                            \
    void *p = NULL;                                                                                                    \
    if (cudaGetDriverEntryPointByVersion(#f, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||                       \
        q != cudaDriverEntryPointSuccess || !p) {                                                                      \
      (void)cudaGetLastError();                                                                                        \
      cu_state = -1;                                                                                                   \
    }                                                                                                                  \
    cu.f = (decltype(cu.f))p;                                                                                          \
  }
  VA_CU_FUNCTIONS(VA_CU_LOAD)
#undef VA_CU_LOAD
  return cu_state > 0;
}

/* The driver's message and the device's free memory (most failures here are a full device); what, if
 * not NULL, names the buffer. */
static void cu_fail(CUresult r, const char *call, const char *what, const char *file, int line) {
  const char *msg = NULL;
  if (cu.cuGetErrorString) cu.cuGetErrorString(r, &msg);
  size_t fr = 0, tot = 0;
  cudaMemGetInfo(&fr, &tot);
  va_fatal_at(file, line, "%s%s%s failed: %s (CUresult %d; device has %zu of %zu bytes free)", call,
              what ? " for " : "", what ? what : "", msg ? msg : "unknown error", (int)r, fr, tot);
}
#define VA_CU_FOR(call, what)                                                                                          \
  do {                                                                                                                 \
    CUresult va_cr_ = (call);                                                                                          \
    if (va_cr_ != CUDA_SUCCESS) cu_fail(va_cr_, #call, (what), __FILE__, __LINE__);                                    \
  } while (0)
#define VA_CU(call) VA_CU_FOR(call, NULL)

static int vmm_supported(int device) {
  if (!cu_load()) return 0;
  CUdevice dev;
  int yes = 0;
  if (cu.cuDeviceGet(&dev, device) != CUDA_SUCCESS) return 0;
  if (cu.cuDeviceGetAttribute(&yes, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS)
    return 0;
  return yes;
}

static CUmemAllocationProp piece_prop(int device) {
  CUmemAllocationProp p = {};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  return p;
}

void va_vmm_alloc(va_vmm_t *m, int device, size_t head, size_t tail, const char *what) {
  *m = va_vmm_t{};
  m->device = device;
  VA_CUDA(cudaSetDevice(device));
  if (!vmm_supported(device)) {
    dalloc(&m->base, head + tail, what);
    m->head = head;
    m->tail = tail;
    return;
  }
  m->vmm = 1;
  const CUmemAllocationProp prop = piece_prop(device);
  size_t gran = 0;
  VA_CU(cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  m->head = (head > 0 ? head + gran - 1 : gran) / gran * gran;
  m->tail = (tail + gran - 1) / gran * gran;
  CUdeviceptr base = 0;
  VA_CU(cu.cuMemAddressReserve(&base, m->head + m->tail, 0, 0, 0));
  m->base = (void *)base;
  const size_t size[2] = {m->head, m->tail};
  for (int p = 0; p < 2 && size[p] > 0; p++) {
    CUmemGenericAllocationHandle h;
    VA_CU_FOR(cu.cuMemCreate(&h, size[p], &prop, 0), what);
    m->piece[p] = h;
    VA_CU(cu.cuMemMap(base + (CUdeviceptr)(p ? m->head : 0), size[p], 0, h, 0));
  }
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  VA_CU(cu.cuMemSetAccess(base, m->head + m->tail, &access, 1));
}

static void give_back(va_vmm_t *m, int p) {
  if (!m->piece[p]) return;
  VA_CU(cu.cuMemUnmap((CUdeviceptr)m->base + (CUdeviceptr)(p ? m->head : 0), p ? m->tail : m->head));
  VA_CU(cu.cuMemRelease((CUmemGenericAllocationHandle)m->piece[p]));
  m->piece[p] = 0;
}

void va_vmm_release_tail(va_vmm_t *m) {
  if (!m->base || !m->vmm) return;
  VA_CUDA(cudaSetDevice(m->device));
  give_back(m, 1);
}

void va_vmm_free(va_vmm_t *m) {
  if (!m->base) return;
  VA_CUDA(cudaSetDevice(m->device));
  if (!m->vmm) {
    dfree(&m->base);
  } else {
    give_back(m, 1);
    give_back(m, 0);
    VA_CU(cu.cuMemAddressFree((CUdeviceptr)m->base, m->head + m->tail));
  }
  *m = va_vmm_t{};
}
