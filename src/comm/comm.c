/* comm.c: the loop's allreduces. MPI over MPI_COMM_WORLD on host buffers; with the CUDA backend and
 * NCCL, the same calls stage the host buffer through one device buffer and reduce it with
 * ncclAllReduce on the communicator's own stream (within a node NVLink beats MPI's host copies), and
 * device buffers (the statistics) are reduced in place, ordered within the compute stream so that
 * neither side waits on the host. Each collective times itself into the 'allreduce' phase (the
 * device-buffer one by its time on the device) and counts the bytes it moves. */
#include "comm/comm.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/metrics.h"
#include "util/util.h"
#ifdef VECANNEAL_NCCL
#include <cuda_runtime.h>

#include "comm/nccl.h"
static va_nccl_t *nccl;
static void *dev_buf;
static size_t dev_bytes;
static int device_pending; /* a device-buffer allreduce not yet waited for (va_comm_wait_device) */

/* Any exit with a communicator alive: finalized when every rank leaves together, aborted when one
 * rank fails (util.h). */
static void comm_exit_hook(int aborting) {
  if (!nccl) return;
  if (aborting) va_nccl_abort(nccl);
  else va_comm_finalize();
  if (getenv("VECANNEAL_TRACE_EXIT")) /* tests check that no communicator is left behind */
    fprintf(stderr, "vecanneal: rank %d: NCCL communicator %s\n", va_proc.rank, aborting ? "aborted" : "finalized");
}

void va_comm_use_nccl(va_nccl_t *c) {
  nccl = c;
  va_set_exit_hook(comm_exit_hook);
}

void va_comm_finalize(void) {
  if (!nccl) return;
  va_nccl_destroy(nccl);
  nccl = NULL;
  device_pending = 0;
  if (dev_buf) cudaFree(dev_buf);
  dev_buf = NULL;
  dev_bytes = 0;
}

/* The communicator's device buffer, grown to at least bytes. */
static void *device_buffer(size_t bytes) {
  if (bytes > dev_bytes) {
    if (dev_buf) cudaFree(dev_buf);
    cudaError_t e = cudaMalloc(&dev_buf, bytes);
    if (e != cudaSuccess)
      VA_FATAL("cudaMalloc(%zu) for the NCCL staging buffer failed: %s", bytes, cudaGetErrorString(e));
    dev_bytes = bytes;
  }
  return dev_buf;
}

static void nccl_allreduce(void *buf, int64_t count, size_t elem, int type, int op) {
  size_t bytes = (size_t)count * elem;
  void *d = device_buffer(bytes);
  cudaStream_t s = (cudaStream_t)va_nccl_stream(nccl);
  cudaError_t e = cudaMemcpyAsync(d, buf, bytes, cudaMemcpyHostToDevice, s);
  if (e != cudaSuccess) VA_FATAL("cudaMemcpyAsync (to device) failed: %s", cudaGetErrorString(e));
  va_nccl_allreduce(nccl, d, count, type, op, NULL);
  e = cudaMemcpyAsync(buf, d, bytes, cudaMemcpyDeviceToHost, s);
  if (e != cudaSuccess) VA_FATAL("cudaMemcpyAsync (to host) failed: %s", cudaGetErrorString(e));
  va_nccl_wait(nccl);
}
#else
void va_comm_finalize(void) {}
#endif

int va_allreduce_sum_f64_device(double *dbuf, int64_t count, void *stream) {
  if (va_proc.nranks == 1) return 1; /* nothing to combine */
#ifdef VECANNEAL_NCCL
  if (nccl) {
    va_nccl_allreduce(nccl, dbuf, count, VA_NCCL_F64, VA_NCCL_SUM, stream);
    va_metrics_add_bytes((double)count * sizeof(double));
    device_pending = 1;
    return 1;
  }
#else
  (void)dbuf;
  (void)count;
  (void)stream;
#endif
  return 0;
}

void va_comm_wait_device(void) {
#ifdef VECANNEAL_NCCL
  if (!device_pending) return;
  device_pending = 0;
  va_nccl_wait(nccl);
  va_phase_add(VA_PH_ALLREDUCE, va_nccl_last_seconds(nccl));
#endif
}

void va_comm_ready(int64_t count) {
  if (va_proc.nranks == 1) return;
#ifdef VECANNEAL_NCCL
  if (nccl && count > 0) {
    void *d = device_buffer((size_t)count * sizeof(double));
    cudaError_t e = cudaMemsetAsync(d, 0, (size_t)count * sizeof(double), (cudaStream_t)va_nccl_stream(nccl));
    if (e != cudaSuccess) VA_FATAL("cudaMemsetAsync failed: %s", cudaGetErrorString(e));
    va_nccl_allreduce(nccl, d, count, VA_NCCL_F64, VA_NCCL_SUM, NULL);
    va_nccl_wait(nccl);
    return;
  }
#else
  (void)count;
#endif
  VA_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void allreduce(void *buf, int64_t count, MPI_Datatype type, size_t elem, MPI_Op op, int nccl_type, int nccl_op) {
  double t0 = va_now();
  if (va_proc.nranks == 1) return; /* nothing to combine */
#ifdef VECANNEAL_NCCL
  if (nccl && count > 0) {
    nccl_allreduce(buf, count, elem, nccl_type, nccl_op);
    va_metrics_add_bytes((double)count * (double)elem);
    va_phase_add(VA_PH_ALLREDUCE, va_now() - t0);
    return;
  }
#else
  (void)nccl_type;
  (void)nccl_op;
#endif
  const int64_t max_chunk = (int64_t)1 << 30;
  for (int64_t off = 0; off < count; off += max_chunk) {
    int64_t c = count - off < max_chunk ? count - off : max_chunk;
    VA_MPI(MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * (int64_t)elem, (int)c, type, op, MPI_COMM_WORLD));
  }
  va_metrics_add_bytes((double)count * (double)elem);
  va_phase_add(VA_PH_ALLREDUCE, va_now() - t0);
}

/* NCCL type/op codes (dist/nccl_comm.h): F32 0, F64 1, I64 2; SUM 0, MAX 1, MIN 2. */
void va_allreduce_sum_f64(double *buf, int64_t count) {
  allreduce(buf, count, MPI_DOUBLE, sizeof(double), MPI_SUM, 1, 0);
}
void va_allreduce_sum_f32(float *buf, int64_t count) { allreduce(buf, count, MPI_FLOAT, sizeof(float), MPI_SUM, 0, 0); }
void va_allreduce_max_f32(float *buf, int64_t count) { allreduce(buf, count, MPI_FLOAT, sizeof(float), MPI_MAX, 0, 1); }
void va_allreduce_min_i64(int64_t *buf, int64_t count) {
  allreduce(buf, count, MPI_INT64_T, sizeof(int64_t), MPI_MIN, 2, 2);
}
void va_allreduce_sum_i64(int64_t *buf, int64_t count) {
  allreduce(buf, count, MPI_INT64_T, sizeof(int64_t), MPI_SUM, 2, 0);
}
