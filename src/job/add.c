/* add.c: `vecanneal add`, the job: the new rows placed in the index (job/nearest.h), the per-anchor
 * statistics brought up to date from the old ones and the new rows' distances, and a new index written
 * (io/index_add.h) holding the old assignment followed by the new rows'. The anchors do not move. */
#include "job/add.h"

#include <stdlib.h>
#include <string.h>

#include "comm/comm.h" /* va_allreduce_sum_* */
#include "core/metrics.h"
#include "io/h5io.h"
#include "io/index.h" /* va_index_payload_bytes, va_index_resolve_source */
#include "io/index_add.h"
#include "io/index_read.h"
#include "job/nearest.h"
#include "util/util.h"

int va_add_job(const va_add_options_t *o) {
  const double t_start = va_now();
  const va_config_t *cfg = &o->cfg;
  va_index_data_t ix;
  va_input_t in;
  va_nearest_t near;
  int rc = va_nearest_job(o->index, "new index", o->out, cfg, &ix, &in, &near);
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
  if ((rc = va_index_read_assignments(o->index, &ix, old_row0, old_n, old_assign))) goto out;
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
                      .bytes = va_index_payload_bytes(n_total, ix.d, k) + 8.0 * (double)(k * ix.d) + 1048576.0};
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
  free(cnt);
  free(rsum);
  free(counts);
  free(mse);
  va_nearest_free(&near);
  va_index_data_free(&ix);
  return rc;
}
