/* cuda_set_assign.cu: loading a previous-pass assignment from the host into a device context (resume
 * from a checkpoint; undoing a side pass of the initialisation), so the next assign pass counts
 * changed rows against it. Declared in backend_cuda.h. */
#include "cuda/internal.cuh"

extern "C" void va_cuda_set_assign(va_cuda_t *ctx, const uint32_t *assign_host) {
  va_cuda_enter(ctx);
  if (ctx->n > 0)
    VA_CUDA(cudaMemcpyAsync(ctx->assign, assign_host, (size_t)ctx->n * sizeof(uint32_t), cudaMemcpyHostToDevice,
                            ctx->stream));
  VA_CUDA(cudaStreamSynchronize(ctx->stream));
}
