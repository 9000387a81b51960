/* topk.c: gathers every rank's sorted top-k lists on rank 0 and merges them (topk.h). */
#include "comm/topk.h"

#include <stdlib.h>

#include "util/util.h"

void va_topk_merge_ranks(const va_neighbor_t *local, int64_t nq, int64_t k, va_neighbor_t *merged) {
  const int P = va_proc.nranks;
  const size_t bytes = (size_t)(nq * k) * sizeof(va_neighbor_t);
  if (bytes > (size_t)INT32_MAX)
    VA_FATAL("top-k batch of %lld x %lld entries is too large to gather", (long long)nq, (long long)k);
  va_neighbor_t *all = va_proc.rank == 0 ? va_malloc(bytes * (size_t)P + 1, "top-k merge") : NULL;
  VA_MPI(MPI_Gather(local, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD));
  if (va_proc.rank == 0) {
    /* Rank r's list for query q starts at all[(r * nq + q) * k]: stride nq * k between ranks. */
    for (int64_t q = 0; q < nq; q++) va_search_merge(all + q * k, P, nq * k, k, merged + q * k);
    free(all);
  }
}
