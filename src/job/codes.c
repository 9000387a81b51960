/* codes.c: `compress --codes pq` after the final pass (job/codes.h). The rows come through the backend's
 * get_rows in chunks (in the job's frame, wherever they live), so a CUDA job's rows stay where they are,
 * and a backend that encodes where the rows live (encode_codes: the CUDA backend) does the encoding pass;
 * the codebooks' loops run on the CPU backend over the residual columns, a subspace at a time, so the
 * stage holds one subspace's training columns besides the codes. The encoding pass (va_codes_encode) is also
 * how `add` encodes its new rows against the index's codebooks. */
#include "job/codes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h" /* va_backend_cpu */
#include "comm/comm.h"       /* va_allreduce_sum_f64 */
#include "core/metrics.h"    /* va_tick, va_tock */
#include "core/pq.h"
#include "cpu/pq.h"
#include "core/sample.h" /* va_sample_range, va_sample_row */
#include "util/util.h"

/* Rows gathered per step: CHUNK_ROWS x d floats of residuals. */
#define CHUNK_ROWS         16384
/* Rows a backend encodes per step where they live (encode_codes): their codes and three figures each. */
#define BACKEND_CHUNK_ROWS ((int64_t)1 << 20)

int64_t va_codes_train_rows(const va_config_t *cfg, int64_t train_rows) {
  return cfg->pq_train_sample > 0 && cfg->pq_train_sample < train_rows ? cfg->pq_train_sample : train_rows;
}

void va_codes_check(const va_config_t *cfg, int64_t d, int64_t train_rows, const char *input_label) {
  if (cfg->codes != VA_CODES_PQ) return;
  train_rows = va_codes_train_rows(cfg, train_rows);
  char err[VA_PATH_MAX + 600] = "";
  const int64_t ksub = (int64_t)1 << cfg->pq_bits;
  if (cfg->pq_m > d)
    snprintf(err, sizeof err,
             "pq_m = %lld subspaces is more than the %lld columns of '%s': a subspace needs at least one column; set "
             "pq_m (--pq-m) to 1..%lld",
             (long long)cfg->pq_m, (long long)d, input_label, (long long)d);
  else if (train_rows < ksub)
    snprintf(err, sizeof err,
             "codes = pq trains %lld centroids per subspace (pq_bits = %lld), more than the %lld rows of '%s' they "
             "would be trained on%s; compress more rows, or without --codes",
             (long long)ksub, (long long)cfg->pq_bits, (long long)train_rows, input_label,
             cfg->pq_train_sample > 0 && cfg->pq_train_sample == train_rows ? " (pq_train_sample)"
             : cfg->train_sample > 0                                        ? " (train_sample)"
                                                                            : "");
  VA_AGREE_OR_EXIT(err[0] && va_proc.rank == 0 ? VA_EXIT_USAGE : 0, err);
}

double va_codes_host_bytes(const va_config_t *cfg, int64_t n_local, int64_t train_local, int64_t d) {
  if (cfg->codes != VA_CODES_PQ) return 0;
  const double M = (double)cfg->pq_m, ksub = (double)((int64_t)1 << cfg->pq_bits),
               dmax = (double)va_pq_dsub_max(d, cfg->pq_m);
  return (double)n_local * M                          /* codes */
         + (double)train_local * (dmax * 4 + 12)      /* one subspace's columns; its loop's assign, prev, r */
         + CHUNK_ROWS * ((double)d * 4 + 16)          /* a chunk of residuals, its row numbers and errors */
         + M * ksub * dmax * 4 + (double)d * ksub * 4 /* codebooks, and the encoder's transposed copy */
         + ksub * (dmax * 16 + 64);                   /* the loop's anchors, momentum and statistics */
}

/* Rows local[0..m) of this rank (the job's frame) less their anchors into R (m x d, float32). With sums
 * (d + 2 doubles), adds each row's values to sums[0..d), its squared norm to sums[d] and its residual's
 * to sums[d + 1], row by row in order. */
static void residual_rows(va_state_t *st, const int64_t *local, int64_t m, float *R, double *sums) {
  const int64_t d = st->d;
  st->be->get_rows(st, local, m, R);
  for (int64_t q = 0; q < m; q++) {
    float *x = R + q * d;
    const float *a = st->A + (int64_t)st->assign[local[q]] * d;
    double x2 = 0, r2 = 0;
    for (int64_t t = 0; t < d; t++) {
      if (sums) {
        sums[t] += x[t];
        x2 += (double)x[t] * x[t];
      }
      x[t] = x[t] - a[t];
      r2 += (double)x[t] * x[t];
    }
    if (sums) {
      sums[d] += x2;
      sums[d + 1] += r2;
    }
  }
}

/* Collective: subspace m's codebook from the training rows local[0..count), sample row numbers from s0 (the
 * source rows' own numbers when every row trains) of train_rows. */
static void train_subspace(va_state_t *st, int64_t m, const int64_t *local, int64_t count, int64_t s0,
                           int64_t train_rows, float *R, va_index_codes_t *out) {
  const va_config_t *cfg = st->cfg;
  const int64_t d = st->d;
  int64_t col0, width;
  va_pq_subspace(d, out->m, m, &col0, &width);
  double t0 = va_now();
  va_tick_t t = va_tick();
  float *X = va_malloc((size_t)((count > 0 ? count : 1) * width) * sizeof(float), "pq subspace rows");
  for (int64_t c0 = 0; c0 < count; c0 += CHUNK_ROWS) {
    const int64_t c = count - c0 < CHUNK_ROWS ? count - c0 : CHUNK_ROWS;
    residual_rows(st, local + c0, c, R, NULL);
    for (int64_t q = 0; q < c; q++) memcpy(X + (c0 + q) * width, R + q * d + col0, (size_t)width * sizeof(float));
  }
  va_tock(VA_PH_ASSIGN, t);
  va_config_t sub;
  va_pq_config(cfg, m, &sub);
  va_pq_trained_t tr;
  va_pq_train_codebook(&sub, &va_backend_cpu, &st->aopts, X, train_rows, s0, count, width, out->dsub_max,
                       out->codebooks + m * out->ksub * out->dsub_max, &tr);
  out->iterations[m] = tr.iterations;
  va_log0("codes pq: subspace %lld of %lld, columns %lld..%lld: %lld iterations (%s), energy %.6g, %.2f s\n",
          (long long)m + 1, (long long)out->m, (long long)col0, (long long)(col0 + width - 1), (long long)tr.iterations,
          tr.converged ? "converged" : "pq_iters", tr.energy, va_now() - t0);
}

/* va_codes_encode where the backend encodes its rows itself: 1, or 0 having done nothing. */
static int encode_on_backend(va_state_t *st, int64_t M, int64_t ksub, const float *codebooks, uint8_t *codes,
                             double *sums) {
  if (!st->be->encode_codes) return 0;
  const int64_t d = st->d, chunk = st->n_local < BACKEND_CHUNK_ROWS ? st->n_local : BACKEND_CHUNK_ROWS;
  double *fig = va_malloc((size_t)(3 * (chunk > 0 ? chunk : 1)) * sizeof(double), "pq row figures");
  int done = 1;
  for (int64_t c0 = 0; c0 < st->n_local && done; c0 += chunk) {
    const int64_t c = st->n_local - c0 < chunk ? st->n_local - c0 : chunk;
    double *err = fig, *x2 = fig + chunk, *r2 = fig + 2 * chunk;
    done = st->be->encode_codes(st, c0, c, M, ksub, codebooks, codes + c0 * M, err, x2, r2, sums);
    if (c0 > 0 && !done) VA_FATAL("the %s backend encoded some rows' codes but not all", st->be->name);
    for (int64_t q = 0; done && q < c; q++) { /* each sum in row order, as the host path adds them */
      sums[d] += x2[q];
      sums[d + 1] += r2[q];
      sums[d + 2] += err[q];
    }
  }
  free(fig);
  return done;
}

void va_codes_encode(va_state_t *st, int64_t M, int64_t ksub, const float *codebooks, uint8_t *codes, double *sums) {
  if (encode_on_backend(st, M, ksub, codebooks, codes, sums)) return;
  const int64_t d = st->d;
  int64_t *local = va_malloc(CHUNK_ROWS * sizeof(int64_t), "pq rows");
  float *R = va_malloc((size_t)(CHUNK_ROWS * d) * sizeof(float), "pq residuals");
  double *err = va_malloc(CHUNK_ROWS * sizeof(double), "pq errors");
  for (int64_t c0 = 0; c0 < st->n_local; c0 += CHUNK_ROWS) {
    const int64_t c = st->n_local - c0 < CHUNK_ROWS ? st->n_local - c0 : CHUNK_ROWS;
    for (int64_t q = 0; q < c; q++) local[q] = c0 + q;
    residual_rows(st, local, c, R, sums);
    va_pq_encode(R, c, d, M, ksub, codebooks, st->aopts.threads, codes + c0 * M, err);
    for (int64_t q = 0; q < c; q++) sums[d + 2] += err[q];
  }
  free(err);
  free(R);
  free(local);
}

void va_codes_pq(va_state_t *st, int64_t train_rows, va_index_codes_t *out) {
  const va_config_t *cfg = st->cfg;
  const int64_t n = st->n, d = st->d, M = cfg->pq_m, ksub = (int64_t)1 << cfg->pq_bits;
  memset(out, 0, sizeof *out);
  out->m = M;
  out->bits = cfg->pq_bits;
  out->ksub = ksub;
  out->dsub_max = va_pq_dsub_max(d, M);
  out->train_rows = train_rows;
  out->codebooks = va_malloc((size_t)(M * ksub * out->dsub_max) * sizeof(float), "pq codebooks");
  out->codes = va_malloc((size_t)((st->n_local > 0 ? st->n_local : 1) * M), "pq codes");
  out->iterations = va_malloc((size_t)M * sizeof(int64_t), "pq iterations");
  out->bytes_per_vector = va_pq_bytes_per_vector(M, cfg->pq_bits);
  out->compression_ratio = out->bytes_per_vector / (4.0 * (double)d);
  /* This rank's training rows: the sample's (core/sample.h), or every row. */
  const int sampled = train_rows < n;
  int64_t s0 = st->row0, count = st->n_local;
  if (sampled) va_sample_range(n, train_rows, st->row0, st->n_local, &s0, &count);
  int64_t *local = va_malloc((size_t)(count > 0 ? count : 1) * sizeof(int64_t), "pq rows");
  for (int64_t q = 0; q < count; q++) local[q] = sampled ? va_sample_row(n, train_rows, s0 + q) - st->row0 : q;
  int64_t col0, narrow, wide;
  va_pq_subspace(d, M, M - 1, &col0, &narrow);
  va_pq_subspace(d, M, 0, &col0, &wide);
  char widths[64];
  if (narrow == wide) snprintf(widths, sizeof widths, "%lld", (long long)wide);
  else snprintf(widths, sizeof widths, "%lld-%lld", (long long)narrow, (long long)wide);
  va_log0("codes pq: %lld subspaces of %s columns, %lld centroids each, trained on %lld rows\n", (long long)M, widths,
          (long long)ksub, (long long)train_rows);
  float *R = va_malloc((size_t)(CHUNK_ROWS * d) * sizeof(float), "pq residuals");
  double t0 = va_now();
  for (int64_t m = 0; m < M; m++) train_subspace(st, m, local, count, s0, train_rows, R, out);
  out->train_seconds = va_now() - t0;
  free(R);
  free(local);

  /* Every row encoded; the sums for the variance and both errors. */
  t0 = va_now();
  va_tick_t t = va_tick();
  double *sums = va_calloc((size_t)(d + 3), sizeof(double), "pq sums");
  va_codes_encode(st, M, ksub, out->codebooks, out->codes, sums);
  va_tock(VA_PH_ASSIGN, t);
  va_allreduce_sum_f64(sums, d + 3);
  double mean2 = 0;
  for (int64_t q = 0; q < d; q++) mean2 += (sums[q] / (double)n) * (sums[q] / (double)n);
  out->variance = sums[d] / (double)n - mean2;
  out->anchor_error = out->variance > 0 ? sums[d + 1] / (double)n / out->variance : 0;
  out->error = out->variance > 0 ? sums[d + 2] / (double)n / out->variance : 0;
  out->encode_seconds = va_now() - t0;
  va_log0("codes pq: %lld codes x %lld bits + a 4-byte anchor id = %.6g bytes per vector, %.4g%% of the raw float32 "
          "rows (%.4g x smaller); reconstruction error %.6g of the variance (anchors alone %.6g); codebooks %.2f s, "
          "encoding %.2f s\n",
          (long long)M, (long long)cfg->pq_bits, out->bytes_per_vector, 100.0 * out->compression_ratio,
          1.0 / out->compression_ratio, out->error, out->anchor_error, out->train_seconds, out->encode_seconds);
  free(sums);
}

void va_codes_free(va_index_codes_t *c) {
  free(c->codebooks);
  free(c->codes);
  free(c->iterations);
  memset(c, 0, sizeof *c);
}
