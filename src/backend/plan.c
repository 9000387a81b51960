/* plan.c: the backend plan and its attachment (see plan.h). */
#include "backend/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h" /* va_backend_cpu */
#include "cpu/assign.h"      /* va_assign_fused_available */
#include "util/util.h"       /* va_proc, VA_MPI, VA_AGREE_OR_EXIT */
#ifdef VECANNEAL_CUDA
#include "backend/cuda.h"
#include "cuda/kernels.h"
#endif
#ifdef VECANNEAL_NCCL
#include <nccl.h>

#include "comm/comm.h" /* va_comm_use_nccl */
#include "comm/nccl.h"
#endif

#if defined(VECANNEAL_CUDA) && defined(VECANNEAL_NCCL)
/* Collective. NCCL takes one GPU per rank (two ranks on one GPU: "Duplicate GPU detected", fatal on
 * every rank at the communicator's creation), so a shared GPU has to be found before. GPUs are told
 * apart by host and PCI bus id, so ranks that each see only their own GPU as device 0 (srun
 * --gpus-per-task=1) do not look alike. Returns 1 on a rank whose GPU a lower rank uses too, with the
 * message in err. */
static int shares_gpu(int dev, char *err, size_t len) {
  typedef struct {
    char host[64], bus[32];
  } gpu_id_t;
  gpu_id_t me;
  memset(&me, 0, sizeof me);
  snprintf(me.host, sizeof me.host, "%s", va_proc.host);
  if (va_cuda_bus_id(dev, me.bus, (int)sizeof me.bus)) snprintf(me.bus, sizeof me.bus, "device %d", dev);
  gpu_id_t *all = va_malloc((size_t)va_proc.nranks * sizeof *all, "GPU ids");
  VA_MPI(MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, MPI_COMM_WORLD));
  int other = -1;
  for (int r = 0; r < va_proc.rank && other < 0; r++)
    if (!strcmp(all[r].host, me.host) && !strcmp(all[r].bus, me.bus)) other = r;
  free(all);
  snprintf(err, len,
           "ranks %d and %d on %s both use the GPU at %s, but NCCL needs one GPU per rank: start at most as many ranks "
           "per node as it has GPUs (and leave 'device' unset), or set gpu_collectives = mpi to let ranks share a GPU",
           other, va_proc.rank, va_proc.host, me.bus);
  return other >= 0;
}
#endif

/* Collective, before the read (the host memory check counts a streamed shard's pinned copy): CPU or
 * CUDA for every rank (never a mix: both would have to agree to the last bit). auto takes CUDA when
 * this build has it, every rank sees a device and the largest shard's product (rows x k x d) reaches
 * gpu_min_work. The rows stream from pinned host memory when gpu_stream = on, or (auto) when some
 * rank's would not fit its GPU (then every rank streams); a job that does not fit even so stops
 * (backend cuda) or stays on the CPU (auto), and so does one whose ranks would share a GPU under NCCL.
 * Prints the auto decisions on rank 0. */
void va_backend_check_built(int backend) {
#ifndef VECANNEAL_CUDA
  if (backend == VA_BACKEND_CUDA)
    VA_AGREE_OR_EXIT(VA_EXIT_USAGE, "backend 'cuda' asked for, but this build has no CUDA backend (rebuild with "
                                    "-DVECANNEAL_CUDA=ON on a machine with the CUDA toolkit)");
#else
  (void)backend;
#endif
}

va_backend_plan_t va_backend_plan(const va_state_t *st, const va_config_t *cfg) {
  va_backend_plan_t plan = {0, -1, 0, 0, 0};
#ifdef VECANNEAL_CUDA
  double work = (double)st->n_local * (double)st->k * (double)st->d;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &work, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  /* Work below the threshold stays on the CPU without asking for a device: that question starts the
   * CUDA driver, a large part of a small job (docs/performance.md). */
  if (cfg->backend == VA_BACKEND_AUTO && work < cfg->gpu_min_work) {
    va_log0("backend auto: %.3g rows x anchors x dims per rank is below gpu_min_work = %.3g: the CPU\n", work,
            cfg->gpu_min_work);
    return plan;
  }
  int dev = cfg->backend == VA_BACKEND_CPU ? -1 : va_cuda_pick_device((int)cfg->device);
  int all_have = dev >= 0;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (cfg->backend == VA_BACKEND_CUDA && !all_have) {
    char err[256];
    snprintf(err, sizeof err, "backend 'cuda' asked for, but rank %d on %s sees no usable CUDA device (device = %lld)",
             va_proc.rank, va_proc.host, (long long)cfg->device);
    VA_AGREE_OR_EXIT(dev < 0 ? VA_EXIT_USAGE : 0, err);
  }
  if (!all_have) return plan;
#ifdef VECANNEAL_NCCL
  if (va_proc.nranks > 1 && cfg->gpu_collectives == VA_GPU_COLL_NCCL) {
    char err[512];
    int shared = shares_gpu(dev, err, sizeof err), any_shared = shared;
    VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &any_shared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (any_shared && cfg->backend == VA_BACKEND_CUDA) VA_AGREE_OR_EXIT(shared ? VA_EXIT_USAGE : 0, err);
    if (any_shared) {
      va_log0("backend auto: ranks share a GPU, which NCCL does not allow (gpu_collectives = mpi does): staying on the "
              "CPU\n");
      return plan;
    }
  }
#endif
  size_t free_b = 0, total_b = 0;
  double avail = va_cuda_memory(dev, &free_b, &total_b) ? -1 : (double)free_b;
  if (avail >= 0 && cfg->gpu_mem_limit_mb > 0) avail = fmin(avail, cfg->gpu_mem_limit_mb * 1048576.0);
  int64_t chunk_rows = va_cuda_stream_chunk_rows(st->d, cfg->gpu_stream_chunk_mb * 1048576.0);
  double resident = (double)va_cuda_bytes_needed(st->n_local, st->d, st->k, cfg->precision, 0);
  double streamed = (double)va_cuda_bytes_needed(st->n_local, st->d, st->k, cfg->precision, chunk_rows);
  int stream =
      cfg->gpu_stream == VA_STREAM_ON || (cfg->gpu_stream == VA_STREAM_AUTO && avail >= 0 && resident > 0.95 * avail);
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &stream, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  double need = stream ? streamed : resident;
  int short_of = avail >= 0 && need > 0.95 * avail, any_short = short_of;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &any_short, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  char err[512];
  snprintf(
      err, sizeof err,
      "rank %d on %s needs %.2f GiB on GPU %d for its %lld rows (%s) but %.2f GiB are free%s; use more GPUs (ranks)%s",
      va_proc.rank, va_proc.host, need / 1073741824.0, dev, (long long)st->n_local, stream ? "streamed" : "resident",
      avail / 1073741824.0, cfg->gpu_mem_limit_mb > 0 ? " under gpu_mem_limit_mb" : "",
      cfg->backend == VA_BACKEND_CUDA ? (stream ? " or backend = cpu" : " or gpu_stream = auto") : "");
  if (any_short && cfg->backend == VA_BACKEND_CUDA) VA_AGREE_OR_EXIT(short_of ? VA_EXIT_RESOURCE : 0, err);
  if (any_short) {
    va_log0("backend auto: a shard does not fit its GPU's free memory%s: staying on the CPU\n",
            stream ? " even streamed" : "");
    return plan;
  }
  if (stream && cfg->gpu_stream == VA_STREAM_AUTO)
    va_log0("backend cuda: the rows do not fit the GPU (rank 0: %.2f GiB needed resident, %.2f GiB free): streaming "
            "them from pinned host memory\n",
            resident / 1073741824.0, avail / 1073741824.0);
  plan.cuda = 1;
  plan.device = dev;
  plan.chunk_rows = stream ? chunk_rows : 0;
  plan.free_bytes = (double)free_b;
  /* fp16/bf16 rows preprocessed on the GPU are float32 there, in the 16-bit rows' place, until converted */
  const double prep = (double)va_cuda_prep_bytes(st->n_local, st->d, cfg->precision, plan.chunk_rows);
  plan.host_prep = prep > 0 && avail >= 0 && need + prep > 0.95 * avail;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &plan.host_prep, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (plan.host_prep)
    va_log0(
        "backend cuda: the rows fit the GPU in 16 bits but not in float32 (rank 0: %.2f GiB more) while preprocessed: "
        "reading and preprocessing them on the host\n",
        prep / 1073741824.0);
#else
  (void)st;
  (void)cfg;
#endif
  return plan;
}

/* The GPU memory the job holds now, for the metrics: the drop in the device's free memory since the
 * plan (the context's buffers and the cuBLAS and NCCL handles; another process on the same GPU would
 * count too); 0 on the CPU backend. Taken where the job is fullest: the rows preprocessed on the GPU
 * (fp16/bf16: in float32, in the 16-bit rows' place), the rows uploaded, the loop's end. */
double va_backend_gpu_memory(const va_backend_plan_t *plan) {
#ifdef VECANNEAL_CUDA
  size_t free_b = 0, total_b = 0;
  if (plan->cuda && !va_cuda_memory(plan->device, &free_b, &total_b))
    return fmax(0.0, plan->free_bytes - (double)free_b);
#else
  (void)plan;
#endif
  return 0;
}

void va_backend_device_name(const va_backend_plan_t *plan, char *buf, size_t len) {
  snprintf(buf, len, "cpu");
#ifdef VECANNEAL_CUDA
  char bus[32];
  if (plan->cuda)
    snprintf(buf, len, "cuda device %d, bus %s", plan->device,
             va_cuda_bus_id(plan->device, bus, (int)sizeof bus) ? "unknown" : bus);
#else
  (void)plan;
#endif
}

/* After the read and the preprocessing: attaches the planned backend; prints it on rank 0. */
const char *va_backend_attach(va_state_t *st, const va_config_t *cfg, const va_backend_plan_t *plan) {
  st->be = &va_backend_cpu;
#ifdef VECANNEAL_CUDA
  if (plan->cuda) {
    va_backend_cuda_attach(st, plan->device, cfg->precision, plan->chunk_rows); /* uploads st->X unless NULL */
    free(st->X); /* the rows live on the GPU now, or in the backend's pinned copy */
    st->X = NULL;
    char desc[384];
    va_cuda_describe((va_cuda_t *)st->be_ctx, desc, sizeof desc);
#ifdef VECANNEAL_NCCL
    /* One rank has nothing to reduce (every collective returns at once): no communicator, whose set-up
     * is costly (docs/performance.md). */
    int nccl = va_proc.nranks > 1 && cfg->gpu_collectives == VA_GPU_COLL_NCCL;
    if (nccl) va_comm_use_nccl(va_nccl_create(MPI_COMM_WORLD, plan->device));
    va_log0("backend cuda: %d rank(s), %s, NCCL %d.%d.%d%s, precision %s\n", va_proc.nranks, desc, NCCL_MAJOR,
            NCCL_MINOR, NCCL_PATCH,
            nccl                 ? ""
            : va_proc.nranks > 1 ? " (not used: gpu_collectives = mpi)"
                                 : " (not needed by one rank)",
            va_config_enum_name("precision", cfg->precision));
#else
    va_log0("backend cuda: %d rank(s), %s, MPI allreduce (no NCCL in this build), precision %s\n", va_proc.nranks, desc,
            va_config_enum_name("precision", cfg->precision));
#endif
    return "cuda";
  }
#else
  (void)plan;
#endif
  va_log0("backend cpu: %d rank(s), %d thread(s) per rank, assign kernel %s\n", va_proc.nranks, st->aopts.threads,
          st->aopts.kernel != VA_CPU_ASSIGN_FUSED ? "sgemm tiles (OpenBLAS)"
          : va_assign_fused_avx512_available()    ? "fused (AVX-512)"
                                                  : "fused (AVX2/FMA)");
  return "cpu";
}
