/* stats.h: per-anchor robust statistics over a rank's rows (docs/algorithm.md section 2.2).
 * The accumulator holds, per anchor j, one row of VA_STATS_W(d) doubles:
 *   [ weighted sum of members (d values), weight total, member count, sum of r ]
 * so that one allreduce of k x (d + 3) values combines every rank's contribution. */
#ifndef VECANNEAL_STATS_H
#define VECANNEAL_STATS_H
#include <stdint.h>

#define VA_STATS_W(d)   ((d) + 3)
#define VA_ST_WEIGHT(d) (d)
#define VA_ST_COUNT(d)  ((d) + 1)
#define VA_ST_RSUM(d)   ((d) + 2)

typedef struct {
  int mode; /* VA_ROBUST_NONE / TRIM / HUBER */
  /* trim: members whose histogram bin lies in [bin_lo[j], bin_hi[j]] are kept */
  const int32_t *bin_lo, *bin_hi;
  const float *rmax; /* trim: per-anchor histogram range [0, rmax[j]] */
  int64_t bins;
  const double *huber_delta; /* huber: per-anchor delta (<= 0: weight 1) */
} va_stats_rule_t;

/* Histogram bin of r within [0, rmax], the same in every pass. */
static inline int64_t va_hist_bin(float r, float rmax, int64_t bins) {
  if (!(rmax > 0)) return 0;
  int64_t b = (int64_t)((double)r / (double)rmax * (double)bins);
  return b < 0 ? 0 : b >= bins ? bins - 1 : b;
}

/* Local farthest member per anchor: rmax[j] (0 when none) and its local row (-1 when none). */
void va_farthest_local(const uint32_t *assign, const float *r, int64_t n, int64_t k, float *rmax, int64_t *rarg);
/* hist (k x bins, zeroed by the caller) += member counts per bin. */
void va_hist_accumulate(const uint32_t *assign, const float *r, int64_t n, int64_t k, const float *rmax, int64_t bins,
                        double *hist);
/* From the global histogram: the kept bin range per anchor, dropping about trim_near of the members
 * nearest and trim_far farthest (exact to one bin: whole bins are dropped, never more than asked). */
void va_trim_bins(const double *hist, int64_t k, int64_t bins, double trim_near, double trim_far, int32_t *bin_lo,
                  int32_t *bin_hi);
/* acc (k x VA_STATS_W(d), zeroed by the caller) += this rank's contributions. */
void va_stats_accumulate(const float *X, int64_t n, int64_t d, const uint32_t *assign, const float *r, int64_t k,
                         const va_stats_rule_t *rule, double *acc);
/* The same over `threads` contiguous row blocks, each into its own buffer, added in block order: the
 * result depends on the thread count (summation order), never on scheduling. */
void va_stats_accumulate_mt(const float *X, int64_t n, int64_t d, const uint32_t *assign, const float *r, int64_t k,
                            const va_stats_rule_t *rule, double *acc, int threads);
/* Plain references for the tests: the exact trimmed mean (sort by r, drop floor(frac * count) at each
 * end) and the Huber-weighted mean, for one anchor's members. */
void va_trimmed_mean_ref(const float *X, const float *r, const int64_t *members, int64_t m, int64_t d, double trim_near,
                         double trim_far, double *mean);
void va_huber_mean_ref(const float *X, const float *r, const int64_t *members, int64_t m, int64_t d, double delta,
                       double *mean);
#endif
