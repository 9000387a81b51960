/* nccl.c: NCCL communicator from an MPI-broadcast unique id, checked allreduces on its own stream,
 * and waits that poll for asynchronous errors (see nccl.h). */
#define _GNU_SOURCE
#include "comm/nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/metrics.h"
#include "util/util.h"

struct va_nccl {
  ncclComm_t comm;
  cudaStream_t stream;
  cudaEvent_t dep;
  cudaEvent_t began, ended; /* around the last stream-ordered allreduce (va_nccl_last_seconds) */
  int timed;                /* began/ended hold such an allreduce */
  int rank, size, device;
  double timeout;
};

#define VA_NC_CUDA(call)                                                                                               \
  do {                                                                                                                 \
    cudaError_t va_ce_ = (call);                                                                                       \
    if (va_ce_ != cudaSuccess) va_fatal_at(__FILE__, __LINE__, "%s failed: %s", #call, cudaGetErrorString(va_ce_));    \
  } while (0)

static void nccl_fail(ncclComm_t comm, ncclResult_t res, const char *call, const char *file, int line) {
  const char *last = comm ? ncclGetLastError(comm) : ncclGetLastError(NULL);
  va_fatal_at(file, line, "%s failed: %s%s%s", call, ncclGetErrorString(res), last && *last ? ": " : "",
              last ? last : "");
}
/* ncclInProgress only comes back from non-blocking communicators, which are not used here. */
#define VA_NCCL(comm, call)                                                                                            \
  do {                                                                                                                 \
    ncclResult_t va_nr_ = (call);                                                                                      \
    if (va_nr_ != ncclSuccess) nccl_fail((comm), va_nr_, #call, __FILE__, __LINE__);                                   \
  } while (0)

va_nccl_t *va_nccl_create(MPI_Comm comm, int device) {
  va_nccl_t *c = va_calloc(1, sizeof *c, "NCCL communicator");
  VA_MPI(MPI_Comm_rank(comm, &c->rank));
  VA_MPI(MPI_Comm_size(comm, &c->size));
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev <= 0)
    VA_FATAL("NCCL communicator asked for, but no CUDA device is visible (%s)", cudaGetErrorString(e));
  c->device = device >= 0 ? device : va_proc.local_rank % ndev;
  if (c->device >= ndev) VA_FATAL("CUDA device %d asked for, %d visible", c->device, ndev);
  VA_NC_CUDA(cudaSetDevice(c->device));
  /* NCCL 2.22+ connects peers lazily, at the first collective of each algorithm and protocol, so that
   * cost (tens of ms) would land in an iteration of the timed loop; connect everything at init instead
   * unless the user says otherwise (setenv does not override a value already in the environment). */
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  const char *to = getenv("VECANNEAL_NCCL_TIMEOUT");
  c->timeout = to ? atof(to) : 0;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (c->rank == 0) VA_NCCL(NULL, ncclGetUniqueId(&id));
  VA_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, comm));
  VA_NCCL(NULL, ncclCommInitRank(&c->comm, c->size, id, c->rank));
  VA_NC_CUDA(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  VA_NC_CUDA(cudaEventCreateWithFlags(&c->dep, cudaEventDisableTiming));
  VA_NC_CUDA(cudaEventCreate(&c->began));
  VA_NC_CUDA(cudaEventCreate(&c->ended));
  return c;
}

void va_nccl_check_async(va_nccl_t *c) {
  ncclResult_t ae = ncclSuccess;
  VA_NCCL(c->comm, ncclCommGetAsyncError(c->comm, &ae));
  if (ae != ncclSuccess) {
    const char *last = ncclGetLastError(c->comm);
    char msg[512];
    snprintf(msg, sizeof msg, "%s%s%s", ncclGetErrorString(ae), last && *last ? ": " : "", last ? last : "");
    ncclCommAbort(c->comm); /* release the peers' side of the pending collectives */
    c->comm = NULL;
    VA_FATAL("NCCL asynchronous error on communicator rank %d of %d: %s", c->rank, c->size, msg);
  }
}

/* A wait polls without sleeping for this long, then sleeps 20 us between polls. A sleep costs the timer slack
 * (about 50 us on Linux) on top of its length, and the wait for an allreduce ordered within the compute
 * stream also covers the statistics kernels queued before it (about a millisecond at 2M rows a GPU): a wait
 * that began to sleep within that time would notice the end late in every iteration. Each poll yields the
 * core, so a thread that shares it (NCCL's proxy thread on a rank bound to one core) still runs; a wait on a
 * stuck peer sleeps after the first 50 ms. */
#define VA_NCCL_SPIN_SECONDS 0.05

void va_nccl_wait(va_nccl_t *c) {
  double t0 = va_now();
  for (;;) {
    cudaError_t e = cudaStreamQuery(c->stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) va_fatal_at(__FILE__, __LINE__, "NCCL stream failed: %s", cudaGetErrorString(e));
    va_nccl_check_async(c);
    const double waited = va_now() - t0;
    if (c->timeout > 0 && waited > c->timeout)
      VA_FATAL("NCCL collective still pending after %.0f s (VECANNEAL_NCCL_TIMEOUT): a peer rank is stuck or gone",
               c->timeout);
    if (waited > VA_NCCL_SPIN_SECONDS) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    } else {
      sched_yield();
    }
  }
}

static ncclDataType_t nccl_type(int type, size_t *elem) {
  switch (type) {
  case VA_NCCL_F32: *elem = 4; return ncclFloat32;
  case VA_NCCL_F64: *elem = 8; return ncclFloat64;
  case VA_NCCL_I64: *elem = 8; return ncclInt64;
  }
  VA_FATAL("unknown NCCL data type %d", type);
}
static ncclRedOp_t nccl_op(int op) {
  switch (op) {
  case VA_NCCL_SUM: return ncclSum;
  case VA_NCCL_MAX: return ncclMax;
  case VA_NCCL_MIN: return ncclMin;
  }
  VA_FATAL("unknown NCCL reduction %d", op);
}

void va_nccl_allreduce(va_nccl_t *c, void *dbuf, int64_t count, int type, int op, void *stream) {
  if (count <= 0) return;
  size_t elem = 0;
  ncclDataType_t t = nccl_type(type, &elem);
  VA_NC_CUDA(cudaSetDevice(c->device));
  if (stream) {
    VA_NC_CUDA(cudaEventRecord(c->dep, (cudaStream_t)stream));
    VA_NC_CUDA(cudaStreamWaitEvent(c->stream, c->dep, 0));
    VA_NC_CUDA(cudaEventRecord(c->began, c->stream)); /* completes when the input is ready */
  }
  VA_NCCL(c->comm, ncclAllReduce(dbuf, dbuf, (size_t)count, t, nccl_op(op), c->comm, c->stream));
  if (stream) {
    VA_NC_CUDA(cudaEventRecord(c->ended, c->stream));
    VA_NC_CUDA(cudaStreamWaitEvent((cudaStream_t)stream, c->ended, 0));
    c->timed = 1;
  }
}

double va_nccl_last_seconds(va_nccl_t *c) {
  if (!c->timed) return 0;
  float ms = 0;
  VA_NC_CUDA(cudaEventElapsedTime(&ms, c->began, c->ended));
  return ms / 1e3;
}

static void reduce_wait(va_nccl_t *c, void *dbuf, int64_t count, int type, int op) {
  double t0 = va_now();
  va_nccl_allreduce(c, dbuf, count, type, op, NULL);
  va_nccl_wait(c);
  va_metrics_add_bytes((double)count * (type == VA_NCCL_F32 ? 4.0 : 8.0));
  va_phase_add(VA_PH_ALLREDUCE, va_now() - t0);
}
void va_nccl_allreduce_sum_f64(va_nccl_t *c, double *dbuf, int64_t count) {
  reduce_wait(c, dbuf, count, VA_NCCL_F64, VA_NCCL_SUM);
}
void va_nccl_allreduce_sum_f32(va_nccl_t *c, float *dbuf, int64_t count) {
  reduce_wait(c, dbuf, count, VA_NCCL_F32, VA_NCCL_SUM);
}
void va_nccl_allreduce_max_f32(va_nccl_t *c, float *dbuf, int64_t count) {
  reduce_wait(c, dbuf, count, VA_NCCL_F32, VA_NCCL_MAX);
}

void *va_nccl_stream(const va_nccl_t *c) { return (void *)c->stream; }
int va_nccl_rank(const va_nccl_t *c) { return c->rank; }
int va_nccl_size(const va_nccl_t *c) { return c->size; }
int va_nccl_device(const va_nccl_t *c) { return c->device; }

void va_nccl_abort(va_nccl_t *c) {
  if (!c || !c->comm) return;
  ncclCommAbort(c->comm);
  c->comm = NULL;
}

void va_nccl_destroy(va_nccl_t *c) {
  if (!c) return;
  VA_NC_CUDA(cudaSetDevice(c->device));
  va_nccl_wait(c);
  if (c->comm) {
    VA_NCCL(c->comm, ncclCommFinalize(c->comm));
    VA_NCCL(c->comm, ncclCommDestroy(c->comm));
  }
  VA_NC_CUDA(cudaEventDestroy(c->dep));
  VA_NC_CUDA(cudaEventDestroy(c->began));
  VA_NC_CUDA(cudaEventDestroy(c->ended));
  VA_NC_CUDA(cudaStreamDestroy(c->stream));
  free(c);
}
