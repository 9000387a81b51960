/* cuda_vmm.cuh: a device allocation whose tail can be handed back to the driver while its head stays
 * where it is, through the driver's virtual memory management (two physical allocations, head and tail,
 * mapped one after the other into one reserved address range). The resident fp16/bf16 rows need it: preprocessed on the
 * GPU they are float32 first and are converted in place into the allocation's first half, whose second half is then
 * given back, so that the start never holds the float32 and the 16-bit rows side by side (6 bytes an element, more than
 * tf32's 4). The driver's functions are taken through cudaGetDriverEntryPointByVersion: the program does
 * not link libcuda, and a CPU-only machine still starts it. A device without that support gets one
 * cudaMalloc whose tail stays held. */
#ifndef VECANNEAL_CUDA_VMM_CUH
#define VECANNEAL_CUDA_VMM_CUH
#include <stddef.h>

typedef struct {
  void *base;                  /* NULL: nothing held */
  size_t head, tail;           /* bytes of the two parts, each rounded up to the driver's granularity */
  unsigned long long piece[2]; /* their physical allocations (0: given back) */
  int device, vmm;             /* vmm 0: one plain cudaMalloc of head + tail */
} va_vmm_t;

/* head + tail bytes on device, one address range, the tail right after the head (fatal, with the
 * device's free memory, when they are not there); what names them in the message. */
void va_vmm_alloc(va_vmm_t *m, int device, size_t head, size_t tail, const char *what);
/* Gives back the tail; the head stays where it is. Nothing queued may still touch the tail: the caller
 * has waited for the streams that did. A plain cudaMalloc keeps it. */
void va_vmm_release_tail(va_vmm_t *m);
/* Gives back everything (after the caller's wait, as release_tail). */
void va_vmm_free(va_vmm_t *m);
#endif
