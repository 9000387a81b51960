/* comm.h: the collectives of the annealing loop. On the CPU backend they are MPI allreduces over
 * MPI_COMM_WORLD (with the CUDA backend and NCCL, NCCL allreduces of device buffers); each times itself
 * into the 'allreduce' phase and counts the bytes it moves. Sums are in double so that the result does
 * not depend on the rank count beyond rounding. */
#ifndef VECANNEAL_COMM_H
#define VECANNEAL_COMM_H
#include <stdint.h>

void va_allreduce_sum_f64(double *buf, int64_t count);
/* CUDA backend: the sum over ranks of a device buffer, in place (NCCL), ordered within stream (a
 * cudaStream_t): it starts once the work queued there is done, and work queued there afterwards sees
 * the sum; the host does not wait (va_comm_wait_device does). Returns 1 when the buffer will hold the
 * sum (one rank: at once), 0 without touching it when the job has no NCCL communicator: the caller then
 * sums a host copy with va_allreduce_sum_f64. */
int va_allreduce_sum_f64_device(double *dbuf, int64_t count, void *stream);
/* Waits for the last va_allreduce_sum_f64_device (none pending: returns at once), polling for NCCL's
 * asynchronous errors so that a peer's failure ends the job, and times it into the 'allreduce' phase by
 * its time on the device from the moment its input was ready. */
void va_comm_wait_device(void);
#ifdef VECANNEAL_NCCL
struct va_nccl;
/* From now on the calls below reduce through this NCCL communicator (CUDA backend). */
void va_comm_use_nccl(struct va_nccl *c);
#endif
/* Collective, untimed, before the loop: the ranks leave it together, so that one rank's longer start
 * (its GPU's warm-up) is not waited for inside the first iteration; with NCCL, through one allreduce of
 * count zero doubles on a device buffer (the loop's statistics size), which also takes NCCL's first-use
 * costs for that size out of the loop. */
void va_comm_ready(int64_t count);
/* Collective: releases the NCCL communicator, if any. */
void va_comm_finalize(void);
void va_allreduce_sum_f32(float *buf, int64_t count);
void va_allreduce_max_f32(float *buf, int64_t count);
void va_allreduce_min_i64(int64_t *buf, int64_t count);
void va_allreduce_sum_i64(int64_t *buf, int64_t count);
#endif
