// pin_probe.cu (throw-away): the time to get B bytes of pinned host memory, cudaMallocHost vs
// malloc + page faults taken on T threads + cudaHostRegister, and H2D bandwidth from each.
#include <cuda_runtime.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)
static double h2d(void *h, size_t bytes, void *d) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  size_t chunk = 256ull << 20; float ms = 0;
  cudaEventRecord(a);
  for (size_t o = 0; o < bytes; o += chunk) CK(cudaMemcpyAsync(d, (char *)h + o, bytes - o < chunk ? bytes - o : chunk, cudaMemcpyHostToDevice));
  cudaEventRecord(b); cudaEventSynchronize(b); cudaEventElapsedTime(&ms, a, b);
  return bytes / (ms * 1e-3) / 1e9;
}
int main(int argc, char **argv) {
  size_t gb = argc > 1 ? atoll(argv[1]) : 2; int T = argc > 2 ? atoi(argv[2]) : 16;
  size_t bytes = gb << 30; void *d; CK(cudaFree(0)); CK(cudaMalloc(&d, 256ull << 20));
  for (int rep = 0; rep < 2; rep++) {
    double t0 = now(); void *h; CK(cudaMallocHost(&h, bytes)); double t1 = now();
    memset(h, 1, 4096);
    printf("%zu GiB cudaMallocHost: %.3f s, H2D %.1f GB/s", gb, t1 - t0, h2d(h, bytes, d));
    t0 = now(); CK(cudaFreeHost(h)); printf(", free %.3f s\n", now() - t0);
    t0 = now(); void *p = NULL; if (posix_memalign(&p, 2 << 20, bytes)) return 1;
    size_t page = sysconf(_SC_PAGESIZE), pages = bytes / page;
#pragma omp parallel for num_threads(T) schedule(static)
    for (size_t i = 0; i < pages; i++) ((volatile char *)p)[i * page] = 0;
    t1 = now(); CK(cudaHostRegister(p, bytes, cudaHostRegisterDefault)); double t2 = now();
    printf("%zu GiB malloc + faults on %d threads %.3f s + cudaHostRegister %.3f s = %.3f s, H2D %.1f GB/s", gb, T, t1 - t0, t2 - t1, t2 - t0, h2d(p, bytes, d));
    t0 = now(); CK(cudaHostUnregister(p)); free(p); printf(", free %.3f s\n", now() - t0);
  }
  return 0;
}
