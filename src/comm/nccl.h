/* nccl_comm.h: an NCCL communicator over an MPI communicator, for allreduces of device buffers.
 * Creation is collective: rank 0 draws the ncclUniqueId, MPI_Bcast hands it to every rank, and each
 * rank joins with ncclCommInitRank on its node-local GPU. Every NCCL or CUDA failure is fatal on the
 * failing rank with rank, host, file:line and NCCL's message (VA_FATAL -> MPI_Abort), so no rank is
 * left waiting in a collective. Waits poll ncclCommGetAsyncError, so a peer's failure (or a network
 * error) ends the job instead of hanging it. Only built with VECANNEAL_HAVE_NCCL (cmake/cuda.cmake). */
#ifndef VECANNEAL_NCCL_COMM_H
#define VECANNEAL_NCCL_COMM_H
#include <mpi.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { VA_NCCL_F32, VA_NCCL_F64, VA_NCCL_I64 };
enum { VA_NCCL_SUM, VA_NCCL_MAX, VA_NCCL_MIN };

typedef struct va_nccl va_nccl_t;

/* Collective over comm. device: the CUDA device of this rank; -1 = the node-local rank (va_proc)
 * modulo the visible device count. A timeout for waits, in seconds, comes from the environment
 * variable VECANNEAL_NCCL_TIMEOUT (unset or 0: none); past it the wait is fatal. */
va_nccl_t *va_nccl_create(MPI_Comm comm, int device);
/* In-place allreduce of count elements of a device buffer, enqueued on the communicator's own stream.
 * stream (a cudaStream_t, or NULL): the allreduce is ordered within that stream as if queued on it: it
 * waits for the work already queued there, and work queued there afterwards waits for it, so neither
 * side needs a host synchronisation. Returns at once. */
void va_nccl_allreduce(va_nccl_t *c, void *dbuf, int64_t count, int type, int op, void *stream);
/* After a wait: seconds the last allreduce ordered within a stream took on the device, from the moment
 * its input was ready (a peer that is late is waited for inside it); 0 before the first. */
double va_nccl_last_seconds(va_nccl_t *c);
/* Waits for everything queued on the communicator's stream, polling for asynchronous NCCL errors. */
void va_nccl_wait(va_nccl_t *c);
/* Enqueue + wait, timed into the allreduce phase (metrics.h), bytes counted. */
void va_nccl_allreduce_sum_f64(va_nccl_t *c, double *dbuf, int64_t count);
void va_nccl_allreduce_sum_f32(va_nccl_t *c, float *dbuf, int64_t count);
void va_nccl_allreduce_max_f32(va_nccl_t *c, float *dbuf, int64_t count);
/* Non-blocking check: fatal if NCCL reported an asynchronous error on this communicator. */
void va_nccl_check_async(va_nccl_t *c);
/* The communicator's stream (cudaStream_t), its rank, size and device. */
void *va_nccl_stream(const va_nccl_t *c);
int va_nccl_rank(const va_nccl_t *c);
int va_nccl_size(const va_nccl_t *c);
int va_nccl_device(const va_nccl_t *c);
/* Collective: finalizes and destroys the communicator. */
void va_nccl_destroy(va_nccl_t *c);
/* Local, on a failing rank's way out: aborts the communicator (its peers' pending collectives return
 * with an error instead of waiting); unchecked, idempotent. */
void va_nccl_abort(va_nccl_t *c);

#ifdef __cplusplus
}
#endif
#endif
