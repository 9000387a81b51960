/* topk.h: the merge over ranks of per-rank top-k results (search, gen's /neighbors). Every rank holds,
 * for each of nq queries, its k best entries over its own rows, sorted (cpu/search.h's order); rank 0
 * gets the k best over all rows. The order is total and each row lives on one rank, so the merged
 * answer is the same for any rank count. */
#ifndef VECANNEAL_COMM_TOPK_H
#define VECANNEAL_COMM_TOPK_H
#include <stdint.h>

#include "cpu/search.h" /* va_neighbor_t */

/* Collective: local (nq x k, every rank) -> merged (nq x k, rank 0; may be NULL elsewhere). Gathers
 * nranks x nq x k entries on rank 0: callers pass batches of queries. */
void va_topk_merge_ranks(const va_neighbor_t *local, int64_t nq, int64_t k, va_neighbor_t *merged);
#endif
