/* search_codes.c: the search job's scan on codes (job/search_codes.h): the codes of this rank's rows in
 * list order, and a batch through the search engine's scan on codes, re-ranked with the rows on request. */
#include "job/search_codes.h"

#include <stdlib.h>
#include <string.h>

#include "comm/topk.h"     /* va_topk_merge_ranks */
#include "cpu/pq.h"        /* va_pq_transpose */
#include "cpu/pq_search.h" /* va_pq_list_terms */
#include "util/util.h"

int va_search_codes_lists(const char *index, va_search_codes_t *c, const int64_t *pos) {
  const va_index_data_t *ix = c->ix;
  const int64_t M = ix->pq_m, nloc = c->nloc;
  uint8_t *slice = va_malloc((size_t)((nloc > 0 ? nloc : 1) * M), "pq codes slice");
  int rc = va_index_read_codes(index, ix, c->row0, nloc, slice);
  if (rc) {
    free(slice);
    return rc;
  }
  c->codes = va_malloc((size_t)((nloc > 0 ? nloc : 1) * M), "pq codes in list order");
  for (int64_t i = 0; i < nloc; i++) memcpy(c->codes + pos[i] * M, slice + i * M, (size_t)M);
  free(slice);
  c->T = va_pq_transpose(ix->pq_codebooks, ix->d, M, ix->pq_ksub);
  if (!ix->cosine) c->terms = va_pq_list_terms(ix->frame, ix->k, ix->d, M, ix->pq_ksub, c->T, c->threads);
  return 0;
}

void va_search_codes_free(va_search_codes_t *c) {
  free(c->codes);
  free(c->T);
  free(c->terms);
  c->codes = NULL;
  c->T = NULL;
  c->terms = NULL;
}

void va_search_codes_batch(const va_search_codes_t *c, const va_search_engine_t *engine, const va_search_lists_t *lists,
                           const float *Qf, const float *Q, int64_t nb, const int64_t *probes, int64_t nprobe,
                           va_neighbor_t *local) {
  const int cosine = c->ix->cosine;
  if (c->rerank == 0) {
    engine->scan_codes(engine, lists, Qf, nb, probes, nprobe, cosine, c->k, local);
    return;
  }
  /* The best R over all ranks by (code distance, id): rank 0 merges, every rank gets them. */
  const int64_t R = c->rerank, d = c->ix->d, k = c->k;
  va_neighbor_t *mine = va_malloc((size_t)(nb * R) * sizeof *mine, "rerank candidates");
  va_neighbor_t *best = va_malloc((size_t)(nb * R) * sizeof *best, "rerank candidates");
  engine->scan_codes(engine, lists, Qf, nb, probes, nprobe, cosine, R, mine);
  va_topk_merge_ranks(mine, nb, R, va_proc.rank == 0 ? best : NULL);
  const size_t bytes = (size_t)(nb * R) * sizeof *best;
  if (bytes > (size_t)INT32_MAX)
    VA_FATAL("rerank batch of %lld x %lld candidates is too large to broadcast", (long long)nb, (long long)R);
  VA_MPI(MPI_Bcast(best, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD));
  free(mine);
  /* Each candidate is re-scored by the rank that holds its row: the exact distance of the row scan. */
  const int64_t row0 = c->row0, row1 = c->row0 + c->nloc;
  (void)c->threads;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(c->threads > 0 ? c->threads : 1) schedule(static) if (c->threads > 1 && nb > 1)
#endif
  for (int64_t q = 0; q < nb; q++) {
    va_topk_t h;
    va_topk_init(&h, local + q * k, k);
    for (int64_t i = 0; i < R; i++) {
      const int64_t id = best[q * R + i].id;
      if (id < row0 || id >= row1) continue; /* another rank's row, or a filler (-1) */
      const float dist = va_search_distance(Q + q * d, c->rows + (id - row0) * d, d, cosine);
      if (dist <= va_topk_bound(&h)) va_topk_push(&h, dist, id);
    }
    va_topk_sorted(&h, local + q * k);
  }
  free(best);
}
