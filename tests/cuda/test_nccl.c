/* test_nccl.c: the NCCL wrapper on one GPU per rank. Run with mpirun -n P; exits 77 ("SKIP: ...") on
 * every rank when the node has fewer GPUs than ranks (or none). Checks a sum of doubles, a sum and a
 * max of floats over device buffers against the values every rank can compute, an allreduce ordered
 * within another stream (both ways) and its device time, and the async-error poll. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm/nccl.h"
#include "util/util.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  va_proc_init();
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0;
  int need = va_proc.local_nranks;
  int ok_local = ndev >= need, ok = 0;
  MPI_Allreduce(&ok_local, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!ok) {
    if (va_proc.rank == 0)
      printf("SKIP: no CUDA device for each rank (%d device(s), %d rank(s) on the node)\n", ndev, need);
    MPI_Finalize();
    return 77;
  }
  int P = va_proc.nranks, me = va_proc.rank, fails = 0;
  va_nccl_t *c = va_nccl_create(MPI_COMM_WORLD, -1);
  const int64_t n = (1 << 20) + 3;
  double *hd = malloc((size_t)n * 8), *dd;
  float *hf = malloc((size_t)n * 4), *df, *dm;
  for (int64_t i = 0; i < n; i++) {
    hd[i] = (double)(me + 1) * (double)i + 0.25;
    hf[i] = (float)((me + 1) * (i % 1000));
  }
  if (cudaMalloc((void **)&dd, (size_t)n * 8) || cudaMalloc((void **)&df, (size_t)n * 4) ||
      cudaMalloc((void **)&dm, (size_t)n * 4))
    VA_FATAL("cudaMalloc failed");
  cudaMemcpy(dd, hd, (size_t)n * 8, cudaMemcpyHostToDevice);
  cudaMemcpy(df, hf, (size_t)n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dm, hf, (size_t)n * 4, cudaMemcpyHostToDevice);
  va_nccl_allreduce_sum_f64(c, dd, n);
  va_nccl_allreduce_sum_f32(c, df, n);
  va_nccl_allreduce_max_f32(c, dm, n);
  double *gd = malloc((size_t)n * 8);
  float *gf = malloc((size_t)n * 4), *gm = malloc((size_t)n * 4);
  cudaMemcpy(gd, dd, (size_t)n * 8, cudaMemcpyDeviceToHost);
  cudaMemcpy(gf, df, (size_t)n * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(gm, dm, (size_t)n * 4, cudaMemcpyDeviceToHost);
  double tri = (double)P * (P + 1) / 2;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    bad += gd[i] != tri * (double)i + 0.25 * P;
    bad += gf[i] != (float)(tri * (double)(i % 1000));
    bad += gm[i] != (float)(P * (i % 1000));
  }
  if (bad) {
    printf("rank %d: %lld wrong elements\n", me, (long long)bad);
    fails++;
  }
  /* ordered within another stream: the rows copied in there, the sum, then the copy back queued there
   * too, read with no wait on the communicator's stream */
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaMemsetAsync(dd, 0, (size_t)n * 8, s);
  cudaMemcpyAsync(dd, hd, (size_t)n * 8, cudaMemcpyHostToDevice, s);
  va_nccl_allreduce(c, dd, n, VA_NCCL_F64, VA_NCCL_SUM, s);
  cudaMemcpyAsync(gd, dd, (size_t)n * 8, cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  va_nccl_wait(c);
  bad = 0;
  for (int64_t i = 0; i < n; i++) bad += gd[i] != tri * (double)i + 0.25 * P;
  if (bad) {
    printf("rank %d: allreduce ordered within a stream: %lld wrong elements\n", me, (long long)bad);
    fails++;
  }
  double secs = va_nccl_last_seconds(c);
  if (!(secs > 0 && secs < 60)) {
    printf("rank %d: the ordered allreduce's device time is %g s\n", me, secs);
    fails++;
  }
  va_nccl_check_async(c);
  int all = 0;
  MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0)
    printf("%s: NCCL allreduce over %d rank(s), %lld elements\n", all ? "FAILED" : "PASSED", P, (long long)n);
  va_nccl_destroy(c);
  cudaStreamDestroy(s);
  cudaFree(dd);
  cudaFree(df);
  cudaFree(dm);
  free(hd);
  free(hf);
  free(gd);
  free(gf);
  free(gm);
  MPI_Finalize();
  return all ? 1 : 0;
}
