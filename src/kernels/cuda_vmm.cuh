/* cuda_vmm.cuh: a device allocation whose tail can be handed back to the driver while its head stays
 * where it is, through the driver's virtual memory management (physical pieces mapped into one reserved
 * address range). The resident fp16/bf16 rows need it: preprocessed on the GPU they are float32 first
 * and are converted in place into the allocation's first half, whose second half is then given back, so
 * that the start never holds the float32 and the 16-bit rows side by side (6 bytes an element, more than
 * tf32's 4). The driver's functions are taken through cudaGetDriverEntryPointByVersion: the program does
 * not link libcuda, and a CPU-only machine still starts it. A device without that support gets one
 * cudaMalloc whose tail stays held. */
#ifndef VECANNEAL_CUDA_VMM_CUH
#define VECANNEAL_CUDA_VMM_CUH
#include <stddef.h>
#include <stdint.h>

typedef struct {
  void *base;                  /* NULL: nothing held */
  size_t piece, reserved;      /* bytes of each physical piece; of the address range (npieces x piece) */
  int64_t npieces, mapped;     /* pieces in the range; pieces still mapped (the first ones) */
  unsigned long long *handles; /* the pieces' physical allocations; NULL: a plain cudaMalloc */
  int device;
} va_vmm_t;

/* bytes on device (fatal, with the device's free memory, when they are not there); what names them in
 * the message. Pieces of about bytes / 256: what shrink keeps beyond what it is asked to is under one
 * piece. */
void va_vmm_alloc(va_vmm_t *m, int device, size_t bytes, const char *what);
/* Gives back every piece past the first keep bytes. Nothing queued may still touch them: the caller has
 * waited for the streams that did. A plain cudaMalloc keeps everything. */
void va_vmm_shrink(va_vmm_t *m, size_t keep);
/* Gives back everything (after the caller's wait, as shrink). */
void va_vmm_free(va_vmm_t *m);
/* Bytes the allocation holds now. */
size_t va_vmm_held(const va_vmm_t *m);
#endif
