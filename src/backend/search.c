/* search.c (backend): the CPU search engine of backend/search.h: the list scan and the exact scan on
 * the kernels of cpu/search.h. */
#include "backend/search.h"

#include <stdlib.h>

#include "util/util.h"

/* Query-major: each thread takes whole queries and walks their probed lists, so a query's heap is one
 * thread's and the answer does not depend on the thread count (the heap keeps the k smallest entries
 * under a total order, whatever the order it sees them in). */
static void cpu_scan_lists(const va_search_engine_t *e, const va_search_lists_t *L, const float *Q, int64_t nq,
                           const int64_t *probes, int64_t nprobe, int cosine, int64_t k, va_neighbor_t *out) {
  (void)e;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(e->threads > 0 ? e->threads : 1) schedule(dynamic, 1) if (nq > 1)
#endif
  for (int64_t q = 0; q < nq; q++) {
    va_topk_t h;
    va_topk_init(&h, out + q * k, k);
    for (int64_t p = 0; p < nprobe; p++) {
      const int64_t j = probes[q * nprobe + p], r0 = L->offset[j], m = L->offset[j + 1] - r0;
      if (m > 0) va_search_scan(Q + q * L->d, 1, L->d, L->rows + r0 * L->d, m, L->ids + r0, 0, cosine, 1, &h);
    }
    va_topk_sorted(&h, out + q * k);
  }
}

static void cpu_scan_all(const va_search_engine_t *e, const va_search_lists_t *L, const float *Q, int64_t nq,
                         int cosine, int64_t k, va_neighbor_t *out) {
  va_topk_t *heaps = va_malloc((size_t)(nq > 0 ? nq : 1) * sizeof *heaps, "exact search heaps");
  for (int64_t q = 0; q < nq; q++) va_topk_init(&heaps[q], out + q * k, k);
  va_search_scan(Q, nq, L->d, L->rows, L->nrows, L->ids, 0, cosine, e->threads, heaps);
  for (int64_t q = 0; q < nq; q++) va_topk_sorted(&heaps[q], out + q * k);
  free(heaps);
}

va_search_engine_t va_search_engine_cpu(int threads) {
  return (va_search_engine_t){"cpu", "fp32", threads > 0 ? threads : 1, cpu_scan_lists, cpu_scan_all};
}
