/* plan.h: which backend a compress job runs on and with what memory plan, and attaching it: the
 * decisions that depend on the hardware, taken here so that the job sees none of it. */
#ifndef VECANNEAL_BACKEND_PLAN_H
#define VECANNEAL_BACKEND_PLAN_H
#include <stddef.h>
#include <stdint.h>

#include "core/anneal.h" /* va_state_t */
#include "core/config.h" /* va_config_t */

/* The backend of the job: CUDA on `device`, the rows resident or streamed in chunks of chunk_rows;
 * host_prep: the rows are read into host memory and preprocessed there (resident 16-bit rows whose
 * float32 values do not fit the GPU for preprocessing there). */
typedef struct {
  int cuda, device;
  int64_t chunk_rows;
  int host_prep;
  double free_bytes;
} va_backend_plan_t;

/* Collective: backend = cuda in a build without CUDA ends every rank with VA_EXIT_USAGE. */
void va_backend_check_built(int backend);
/* Collective, before the read (the host memory check counts a streamed shard's pinned copy): CPU or
 * CUDA for every rank (never a mix: both would have to agree to the last bit). auto takes CUDA when
 * this build has it, every rank sees a device and the largest shard's product (rows x k x d) reaches
 * gpu_min_work. The rows stream from pinned host memory when gpu_stream = on, or (auto) when some
 * rank's would not fit its GPU (then every rank streams); a job that does not fit even so stops
 * (backend cuda) or stays on the CPU (auto), and so does one whose ranks would share a GPU under NCCL.
 * Prints the auto decisions on rank 0. */
va_backend_plan_t va_backend_plan(const va_state_t *st, const va_config_t *cfg);
/* This rank's device for the metrics' layout: "cpu", or "cuda device N, bus 0000:3c:00.0". */
void va_backend_device_name(const va_backend_plan_t *plan, char *buf, size_t len);
/* The GPU memory the job holds now, for the metrics (0 on the CPU backend). */
double va_backend_gpu_memory(const va_backend_plan_t *plan);
/* Attaches the planned backend to st (uploading st->X when set), with the NCCL communicator of a
 * multi-rank CUDA job; prints it on rank 0; returns its name ("cpu", "cuda"). */
const char *va_backend_attach(va_state_t *st, const va_config_t *cfg, const va_backend_plan_t *plan);
#endif
