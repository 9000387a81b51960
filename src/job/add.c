/* add.c: `vecanneal add`, the job: the new rows placed in the index (job/nearest.h) and, when the index
 * has codes, encoded against its codebooks as compress encodes its own rows (job/codes.h), the per-anchor
 * statistics and the codes' errors brought up to date from the old ones and the new rows', and a new
 * index written (io/index_add.h) holding the old assignment and codes followed by the new rows'. The
 * anchors and the codebooks do not move. */
#include "job/add.h"

#include <stdlib.h>
#include <string.h>

#include "comm/comm.h" /* va_allreduce_sum_* */
#include "core/metrics.h"
#include "io/h5io.h"
#include "io/index.h" /* va_index_payload_bytes, va_index_resolve_source */
#include "io/index_add.h"
#include "io/index_read.h"
#include "job/codes.h" /* va_codes_encode */
#include "job/nearest.h"
#include "util/util.h"

/* The new rows' codes (index with /pq): this rank's, and its sums of va_codes_encode (d + 3). */
typedef struct {
  const va_index_data_t *ix;
  uint8_t *codes;
  double *sums;
} new_codes_t;

/* va_nearest_then_fn: this rank's new rows, in the index's frame less their anchors, encoded; nothing for an
 * index without codes. */
static void encode_new_rows(va_state_t *st, void *ctx) {
  new_codes_t *c = ctx;
  const va_index_data_t *ix = c->ix;
  if (ix->pq_m == 0) return;
  c->codes = va_malloc((size_t)((st->n_local > 0 ? st->n_local : 1) * ix->pq_m), "new rows' codes");
  c->sums = va_calloc((size_t)(st->d + 3), sizeof(double), "new rows' code sums");
  va_codes_encode(st, ix->pq_m, ix->pq_ksub, ix->pq_codebooks, c->codes, c->sums);
}

int va_add_job(const va_add_options_t *o) {
  const double t_start = va_now();
  const va_config_t *cfg = &o->cfg;
  va_index_data_t ix;
  va_input_t in;
  va_nearest_t near;
  /* The hook runs once ix is read: it sees whether the index has codes. */
  new_codes_t enc = {.ix = &ix};
  int rc = va_nearest_job(o->index, "new index", o->out, cfg, &ix, &in, &near, encode_new_rows, &enc);
  if (rc) return rc;
  /* Counts are exact (integers). The members' distance sums: old mse x old count (the sum compress
   * reduced, up to the rounding of its mean) plus the new rows' distances, summed in double. */
  const int64_t k = ix.k;
  int64_t *cnt = va_calloc((size_t)k, sizeof(int64_t), "new counts");
  double *rsum = va_calloc((size_t)k, sizeof(double), "new distance sums");
  for (int64_t i = 0; i < near.n_local; i++) {
    cnt[near.assign[i]]++;
    rsum[near.assign[i]] += near.dist[i];
  }
  va_allreduce_sum_i64(cnt, k);
  va_allreduce_sum_f64(rsum, k);
  uint64_t *counts = va_malloc((size_t)k * sizeof(uint64_t), "counts");
  double *mse = va_malloc((size_t)k * sizeof(double), "mse"), esum = 0;
  for (int64_t j = 0; j < k; j++) {
    const double s = ix.mse[j] * (double)ix.counts[j] + rsum[j];
    counts[j] = ix.counts[j] + (uint64_t)cnt[j];
    mse[j] = counts[j] ? s / (double)counts[j] : 0;
    esum += s;
  }
  const int64_t n_total = ix.n + in.n;
  /* This rank's block of the old assignment, copied into the new file. */
  int64_t old_row0, old_n;
  va_shard_range(ix.n, va_proc.rank, va_proc.nranks, &old_row0, &old_n);
  uint32_t *old_assign = va_malloc((size_t)(old_n > 0 ? old_n : 1) * sizeof(uint32_t), "old assignments");
  uint8_t *old_codes = NULL;
  if ((rc = va_index_read_assignments(o->index, &ix, old_row0, old_n, old_assign))) goto out;
  /* Codes: this rank's block of the old ones, copied too. The /pq errors are sums over the rows / n /
   * variance: the old rows' sums are taken back from them (up to rounding) and the new rows' added. The
   * variance stays that of the rows compress encoded: their column sums, which its mean needs, are not
   * stored. */
  va_index_code_errors_t fig = {0};
  if (ix.pq_m > 0) {
    old_codes = va_malloc((size_t)((old_n > 0 ? old_n : 1) * ix.pq_m), "old codes");
    if ((rc = va_index_read_codes(o->index, &ix, old_row0, old_n, old_codes))) goto out;
    if ((rc = va_index_read_code_errors(o->index, &fig))) goto out;
    va_allreduce_sum_f64(enc.sums, ix.d + 3);
  }
  va_index_add_t a = {.old_path = o->index,
                      .n_old = ix.n,
                      .n_new = in.n,
                      .k = k,
                      .old_row0 = old_row0,
                      .old_n_local = old_n,
                      .new_row0 = near.row0,
                      .new_n_local = near.n_local,
                      .old_assign = old_assign,
                      .new_assign = near.assign,
                      .counts = counts,
                      .mse = mse,
                      .final_energy = esum / (double)n_total,
                      .bytes = va_index_payload_bytes(n_total, ix.d, k) + 8.0 * (double)(k * ix.d) + 1048576.0,
                      .pq_m = ix.pq_m,
                      .old_codes = old_codes,
                      .new_codes = enc.codes};
  if (ix.pq_m > 0) {
    const double var = fig.variance, n_old = (double)ix.n;
    a.pq_anchor_error = var > 0 ? (fig.anchor_error * n_old * var + enc.sums[ix.d + 1]) / (double)n_total / var : 0;
    a.pq_error = var > 0 ? (fig.error * n_old * var + enc.sums[ix.d + 2]) / (double)n_total / var : 0;
    a.bytes += va_index_codes_bytes(n_total, ix.d, ix.pq_m, ix.pq_ksub);
  }
  a.distortion = ix.total_variance > 0 ? a.final_energy / ix.total_variance : 0;
  /* The bytes of every input: the old ones from the old ratio, plus the added rows'. */
  const double old_input = ix.compression_ratio > 0 ? va_index_payload_bytes(ix.n, ix.d, k) / ix.compression_ratio : 0;
  a.ratio = va_index_payload_bytes(n_total, ix.d, k) / (old_input + (double)in.n * (double)in.d * in.elem_size);
  if (va_proc.rank == 0) va_index_resolve_source(in.file, a.source.file, sizeof a.source.file, &a.source.size);
  VA_MPI(MPI_Bcast(a.source.file, (int)sizeof a.source.file, MPI_CHAR, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Bcast(&a.source.size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
  snprintf(a.source.dataset, sizeof a.source.dataset, "%s", in.dataset);
  snprintf(a.source.dtype, sizeof a.source.dtype, "%s", va_dtype_name(in.dtype));
  a.source.checksum = in.checksum;
  va_tick_t t = va_tick();
  rc = va_index_write_added(o->out, &a, cfg->io);
  va_tock(VA_PH_WRITE, t);
  if (!rc) {
    va_log0("added %lld rows of %s to %s (%lld rows, k %lld): %s holds %lld rows, energy %.8g, %.2f s\n",
            (long long)in.n, cfg->input, o->index, (long long)ix.n, (long long)k, o->out, (long long)n_total,
            a.final_energy, va_now() - t_start);
    if (ix.pq_m > 0)
      va_log0("codes pq: %lld new rows encoded (%lld codes each); reconstruction error %.6g of the variance over "
              "every row (anchors alone %.6g)\n",
              (long long)in.n, (long long)ix.pq_m, a.pq_error, a.pq_anchor_error);
    va_run_summary_t sum = {.n = n_total,
                            .d = ix.d,
                            .k_initial = k,
                            .k_final = k,
                            .total_seconds = va_now() - t_start,
                            .final_energy = a.final_energy,
                            .backend = near.backend,
                            .device = near.backend};
    rc = va_metrics_write(cfg->metrics, &sum, cfg);
  }
out:
  free(old_assign);
  free(old_codes);
  free(enc.codes);
  free(enc.sums);
  free(cnt);
  free(rsum);
  free(counts);
  free(mse);
  va_nearest_free(&near);
  va_index_data_free(&ix);
  return rc;
}
