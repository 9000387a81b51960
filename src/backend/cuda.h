/* backend_cuda.h: choosing a GPU and attaching the CUDA backend to a job's state. */
#ifndef VECANNEAL_BACKEND_CUDA_H
#define VECANNEAL_BACKEND_CUDA_H
#include "backend/backend.h"

#include <stddef.h>
#include <stdint.h>

struct va_state;
struct va_cuda;
/* Device a[] <- host assign (n_local entries): the previous pass the next one is compared with. */
void va_cuda_set_assign(struct va_cuda *ctx, const uint32_t *assign_host);
extern const va_backend_t va_backend_cuda;
/* The device of this rank: `requested` if >= 0 (and visible), else node-local rank modulo the visible
 * devices; -1 when there is none. The first call narrows the visible devices to that one where it can
 * (backend/visible.h; it is then device 0), so it must be the process's first CUDA call. A device picked:
 * the process's exit skips the libraries' exit handlers (va_exit_skip_handlers). */
int va_cuda_pick_device(int requested);
/* Makes `device` current on the calling thread and creates its primary context (the CUDA driver's
 * start comes first in a process); non-zero when either fails (the caller reports later uses' errors). */
int va_cuda_start_device(int device);
/* Loads cuBLAS and cuBLASLt (dlopen, a tenth of a second) now, so that a later first use does not wait
 * for them; safe from any thread. */
void va_cuda_load_blas(void);
/* A device's PCI bus id ("0000:3c:00.0": the same GPU whatever CUDA_VISIBLE_DEVICES numbers it);
 * non-zero when it cannot be read. */
int va_cuda_bus_id(int device, char *buf, int len);
/* Free and total bytes of a device's memory; non-zero when they cannot be read. */
int va_cuda_memory(int device, size_t *free_bytes, size_t *total_bytes);
/* Creates the device context for st (rows from st->X, uploaded now, or copied to pinned host memory
 * when chunk_rows > 0: streamed in chunks of that many rows; st->X NULL: none, the caller fills a
 * resident context from device memory) and switches st to the CUDA backend.
 * precision: VA_CUDA_FP32 / TF32 / FP16 / BF16. */
void va_backend_cuda_attach(struct va_state *st, int device, int precision, int64_t chunk_rows);
/* Once the anchors are set, before the loop: runs the loop's device work once and puts the previous
 * pass back, so that loading the kernels' code (CUDA loads it lazily, at a kernel's first launch) is
 * paid for in the initialisation rather than in the first iteration. Changes no anchor. */
void va_backend_cuda_warm_up(struct va_state *st);
#endif
