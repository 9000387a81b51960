/* probe.cu: the test and benchmark hooks of cuda/probe.h, outside the library (vecanneal_cuda_probe).
 * Everything a hook times or checks goes through the library's own launchers (cuda/internal.cuh): the
 * same host code, kernels and launch configurations as a job's pass. The only kernels here are those no
 * job runs: the poisoning of a[] and r[] and the mma.sync ceiling. */
#include <algorithm>
#include <cstdio> /* snprintf */
#include <vector>

#include "cuda/internal.cuh"
#include "cuda/mma.cuh"
#include "cuda/probe.h"

extern "C" {
#include "core/config.h" /* VA_ROBUST_* */
}

/* --- kernel choice ---------------------------------------------------------------------------------- */
extern "C" void va_cuda_set_assign_variant(va_cuda_t *c, int v) { c->assign_variant = v; }
extern "C" void va_cuda_set_stats_variant(va_cuda_t *c, int v) { c->stats_variant = v; }
extern "C" void va_cuda_set_segment_way(va_cuda_t *c, int way) { c->seg_way = way; }

extern "C" int va_cuda_set_fused_config(va_cuda_t *c, int cfg) {
  c->fused_force = cfg;
  c->fused_cfg = va_cuda_fused_config(c);
  return c->fused_cfg;
}

extern "C" int va_cuda_set_tma_splits(va_cuda_t *c, int splits) {
  c->tma_splits_force = splits;
  return va_cuda_tma_splits(c, c->view_rows);
}

extern "C" void va_cuda_set_gemm_rows(va_cuda_t *c, int64_t rows) { c->gemm_rows = rows; }

extern "C" void va_cuda_pci_bus_id(const va_cuda_t *c, char *buf, size_t len) {
  snprintf(buf, len, "%08x:%02x:%02x.0", (unsigned)c->prop.pciDomainID, (unsigned)c->prop.pciBusID,
           (unsigned)c->prop.pciDeviceID);
}

/* --- state for tests -------------------------------------------------------------------------------- */
extern "C" int va_cuda_debug_segment_rows(va_cuda_t *c, const uint32_t *keys, int64_t n, int64_t nseg, int way,
                                          uint32_t *rows, int32_t *start, int32_t *end) {
  va_cuda_enter(c);
  if (n > c->view_rows) return 0;
  va_cuda_ensure_segments(c, nseg);
  VA_CUDA(cudaMemcpyAsync(c->keys, keys, (size_t)n * 4, cudaMemcpyHostToDevice, c->stream));
  const int took = va_cuda_segment_rows(c, c->keys, n, nseg, way);
  VA_CUDA(cudaMemcpyAsync(rows, c->vals_sorted, (size_t)n * 4, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaMemcpyAsync(start, c->seg_start, (size_t)nseg * 4, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaMemcpyAsync(end, c->seg_end, (size_t)nseg * 4, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  return took;
}
__global__ void poison_kernel(uint32_t *a, float *r, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    a[i] = 0xFFFFFFFEu;
    r[i] = __int_as_float(0x7fc00000);
  }
}

extern "C" void va_cuda_debug_poison(va_cuda_t *c) {
  if (c->n <= 0) return;
  va_cuda_enter(c);
  /* a grid-stride loop: any grid covers every row; at most 65535 x 16 blocks */
  const int blocks = (int)std::min<int64_t>((c->n + 255) / 256, 65535 * 16);
  poison_kernel<<<blocks, 256, 0, c->stream>>>(c->assign, c->r, c->n);
  VA_LAUNCHED();
  VA_CUDA(cudaStreamSynchronize(c->stream));
}

extern "C" void va_cuda_debug_anchor_norms(va_cuda_t *c, float *out) {
  va_cuda_enter(c);
  VA_CUDA(cudaMemcpyAsync(out, c->bias_l2, (size_t)c->k * 4, cudaMemcpyDeviceToHost, c->stream));
  VA_CUDA(cudaStreamSynchronize(c->stream));
  for (int64_t j = 0; j < c->k; j++) out[j] *= 2.0f;
}

/* --- device times ----------------------------------------------------------------------------------- */
static const int PEAK_THREADS = 256;

/* The tensor-core ceiling of mma.sync here: registers only, 8 independent accumulators per warp; the
 * instruction is the fused kernels' own (cuda/mma.cuh). */
template <typename T>
__global__ void __launch_bounds__(PEAK_THREADS) mma_peak_kernel(float *out, int iters, uint32_t one) {
  uint32_t a[4] = {one, one, one, one}, b[2] = {one, one};
  float acc[8][4];
#pragma unroll
  for (int q = 0; q < 8; q++)
#pragma unroll
    for (int e = 0; e < 4; e++) acc[q][e] = 0;
  for (int it = 0; it < iters; it++)
#pragma unroll
    for (int q = 0; q < 8; q++) Mma<T>::run(acc[q], a, b);
  float s = 0;
#pragma unroll
  for (int q = 0; q < 8; q++) s += acc[q][0] + acc[q][1] + acc[q][2] + acc[q][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

extern "C" double va_cuda_bench_mma_peak(va_cuda_t *c, int precision, int blocks_per_sm) {
  va_cuda_enter(c);
  int blocks = c->prop.multiProcessorCount * blocks_per_sm, iters = 4096;
  float *out = NULL;
  VA_CUDA(cudaMalloc((void **)&out, (size_t)blocks * PEAK_THREADS * 4));
  double flop_per = precision == VA_CUDA_TF32 ? 2.0 * 16 * 8 * 8 : 2.0 * 16 * 8 * 16;
  float best = 1e30f;
  for (int rep = 0; rep < 6; rep++) {
    VA_CUDA(cudaEventRecord(c->ev0, c->stream));
    if (precision == VA_CUDA_TF32)
      mma_peak_kernel<float><<<blocks, PEAK_THREADS, 0, c->stream>>>(out, iters, 0x3F800000u);
    else if (precision == VA_CUDA_BF16)
      mma_peak_kernel<__nv_bfloat16><<<blocks, PEAK_THREADS, 0, c->stream>>>(out, iters, 0x3F803F80u);
    else mma_peak_kernel<__half><<<blocks, PEAK_THREADS, 0, c->stream>>>(out, iters, 0x3C003C00u);
    VA_LAUNCHED();
    VA_CUDA(cudaEventRecord(c->ev1, c->stream));
    VA_CUDA(cudaEventSynchronize(c->ev1));
    float ms = 0;
    VA_CUDA(cudaEventElapsedTime(&ms, c->ev0, c->ev1));
    if (rep > 0 && ms < best) best = ms;
  }
  VA_CUDA(cudaFree(out));
  double flops = (double)blocks * (PEAK_THREADS / 32) * iters * 8 * flop_per;
  return flops / (best * 1e-3) / 1e12;
}

static double median_ms(std::vector<float> &v, double *min_ms) {
  std::sort(v.begin(), v.end());
  if (min_ms) *min_ms = v.empty() ? 0 : v[0];
  return v.empty() ? 0 : v[v.size() / 2];
}

/* gemm_only: VA_ASSIGN_PART_* (0 the whole pass; 1 the GEMM path's cuBLAS products alone; 2 / 3 the
 * fused path's argmin kernel alone / r kernel alone) */
extern "C" double va_cuda_bench_assign(va_cuda_t *c, int cosine, int warmup, int reps, int gemm_only, double *min_ms) {
  if (c->n <= 0) return 0;
  va_cuda_enter(c);
  va_cuda_check_ready(c);
  assign_args a = {cosine, gemm_only == VA_ASSIGN_PART_PRODUCTS ? VA_CUDA_ASSIGN_GEMM : va_cuda_assign_variant(c),
                   gemm_only};
  for (int w = 0; w < warmup; w++) va_cuda_each_rows(c, va_cuda_assign_rows, &a);
  std::vector<float> t;
  for (int rep = 0; rep < reps; rep++) {
    VA_CUDA(cudaEventRecord(c->ev0, c->stream));
    va_cuda_each_rows(c, va_cuda_assign_rows, &a); /* streamed: the copies of the chunks included */
    VA_CUDA(cudaEventRecord(c->ev1, c->stream));
    VA_CUDA(cudaEventSynchronize(c->ev1));
    float ms = 0;
    VA_CUDA(cudaEventElapsedTime(&ms, c->ev0, c->ev1));
    t.push_back(ms);
  }
  return median_ms(t, min_ms);
}

/* The median (and min) over reps of body()'s device time, CUDA events around it, after warmup runs. */
template <typename Body>
static double time_reps(va_cuda_t *c, int warmup, int reps, double *min_ms, Body body) {
  std::vector<float> t;
  for (int rep = 0; rep < warmup + reps; rep++) {
    VA_CUDA(cudaStreamSynchronize(c->stream));
    VA_CUDA(cudaEventRecord(c->ev0, c->stream));
    body();
    VA_CUDA(cudaEventRecord(c->ev1, c->stream));
    VA_CUDA(cudaEventSynchronize(c->ev1));
    float ms = 0;
    VA_CUDA(cudaEventElapsedTime(&ms, c->ev0, c->ev1));
    if (rep >= warmup) t.push_back(ms);
  }
  return median_ms(t, min_ms);
}

extern "C" double va_cuda_bench_stats(va_cuda_t *c, const va_stats_rule_t *rule, int compute_r, int warmup, int reps,
                                      double *min_ms) {
  if (c->n <= 0) return 0;
  va_cuda_enter(c);
  va_cuda_ensure_r(c);
  VA_CUDA(cudaEventSynchronize(c->up_done));
  rule_dev ru = va_cuda_upload_rule(c, rule);
  VA_CUDA(cudaEventRecord(c->up_done, c->stream));
  return time_reps(c, warmup, reps, min_ms, [&] {
    c->r_pending = compute_r; /* as a deferred pass leaves it (the rows' a[] and r[] stay valid) */
    va_cuda_stats_launch(c, ru, 0);
  });
}

extern "C" double va_cuda_bench_iteration(va_cuda_t *c, const va_stats_rule_t *rule, int cosine, int warmup, int reps,
                                          double *min_ms) {
  if (c->n <= 0) return 0;
  va_cuda_enter(c);
  const double x[2] = {-1.0, 0.0};
  return time_reps(c, warmup, reps, min_ms, [&] {
    va_cuda_assign_deferred(c, cosine, rule && rule->mode == VA_ROBUST_TRIM);
    va_cuda_queue_scalars(c, va_cuda_stats_device(c, rule, x, 2), 2);
    va_cuda_update_anchors(c, 0.5, 0.0, 0.0, cosine);
  });
}

extern "C" double va_cuda_bench_farthest_hist(va_cuda_t *c, const float *rmax_host, int64_t bins, int warmup, int reps,
                                              double *min_ms) {
  if (c->n <= 0) return 0;
  va_cuda_enter(c);
  va_cuda_ensure_r(c);
  return time_reps(c, warmup, reps, min_ms, [&] {
    va_cuda_farthest_launch(c);
    if (bins > 0) va_cuda_hist_launch(c, rmax_host, bins);
  });
}
