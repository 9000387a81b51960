/* metrics.c: phase timers and the --metrics JSON file (written by rank 0, atomically). */
#include "core/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/files.h"  /* va_text_open, va_text_commit */
#include "util/json.h" /* va_json_* */
#include "util/util.h"

const char *const va_phase_names[VA_NPHASE] = {"read",      "init",   "assign",      "reduce",
                                               "allreduce", "update", "maintenance", "write"};
static double phase_seconds[VA_NPHASE];
static double comm_bytes;

double va_comm_seconds(void) { return phase_seconds[VA_PH_ALLREDUCE]; }
va_tick_t va_tick(void) { return (va_tick_t){va_now(), va_comm_seconds()}; }
void va_tock(int phase, va_tick_t t) { phase_seconds[phase] += (va_now() - t.t0) - (va_comm_seconds() - t.comm0); }
void va_phase_add(int phase, double seconds) { phase_seconds[phase] += seconds; }
double va_phase_total(int phase) { return phase_seconds[phase]; }
void va_metrics_add_bytes(double bytes) { comm_bytes += bytes; }

/* One config key as a typed member: numbers as numbers (their text reads back exactly), the rest as text. */
static void json_cfg(const char *key, const char *value, void *ctx) {
  va_json_writer_t *j = ctx;
  int kind = va_config_key_kind(key);
  errno = 0;
  char *end = NULL;
  if (kind == VA_CONFIG_INTEGER) {
    long long v = strtoll(value, &end, 10);
    if (!errno && end && !*end) {
      va_json_int(j, key, v);
      return;
    }
  } else if (kind == VA_CONFIG_REAL) {
    double v = strtod(value, &end);
    if (!errno && end && !*end) {
      va_json_number(j, key, v);
      return;
    }
  }
  va_json_string(j, key, value);
}

static void json_min_mean_max(va_json_writer_t *j, const char *key, double mn, double mean, double mx) {
  va_json_object(j, key);
  va_json_number(j, "min", mn);
  va_json_number(j, "mean", mean);
  va_json_number(j, "max", mx);
  va_json_end(j);
}

int va_metrics_write(const char *path, const va_run_summary_t *s, const va_config_t *cfg) {
  double mn[VA_NPHASE], mx[VA_NPHASE], sum[VA_NPHASE];
  VA_MPI(MPI_Reduce(phase_seconds, mn, VA_NPHASE, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(phase_seconds, mx, VA_NPHASE, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(phase_seconds, sum, VA_NPHASE, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
  double rss = (double)va_peak_rss();
  double *all_rss = va_proc.rank == 0 ? va_malloc((size_t)va_proc.nranks * sizeof(double), "rss gather") : NULL;
  VA_MPI(MPI_Gather(&rss, 1, MPI_DOUBLE, all_rss, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  double bytes = 0, streamed = 0;
  VA_MPI(MPI_Reduce(&comm_bytes, &bytes, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(&s->stream_copied_bytes, &streamed, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  /* per-rank figures reduced together: GPU memory at the loop's end and at its peak, the loop's collectives */
  const double per_rank[3] = {s->gpu_memory_loop_bytes, s->gpu_memory_peak_bytes, s->loop_allreduce_seconds};
  double gmin[3], gmax[3], gsum[3];
  VA_MPI(MPI_Reduce(per_rank, gmin, 3, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(per_rank, gmax, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(per_rank, gsum, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
  char *layout = va_json_gather_layout(s->device);
  if (!path || !path[0]) {
    free(all_rss);
    free(layout);
    return 0;
  }
  FILE *f = va_proc.rank == 0 ? va_text_open(path) : NULL;
  if (!f) {
    free(all_rss);
    free(layout);
    return va_text_commit(NULL, "metrics file", path);
  }
  int P = va_proc.nranks;
  double rmin = all_rss[0], rmax = all_rss[0], rsum = 0;
  for (int i = 0; i < P; i++) {
    rsum += all_rss[i];
    if (all_rss[i] < rmin) rmin = all_rss[i];
    if (all_rss[i] > rmax) rmax = all_rss[i];
  }
  va_json_writer_t j;
  va_json_start(&j, f);
  va_json_run_header(&j, "compress", layout);
  va_json_string(&j, "backend", s->backend);
  va_json_int(&j, "n", s->n);
  va_json_int(&j, "d", s->d);
  va_json_int(&j, "k_initial", s->k_initial);
  va_json_int(&j, "k_final", s->k_final);
  va_json_int(&j, "iterations", s->iterations);
  va_json_number(&j, "final_energy", s->final_energy);
  va_json_number(&j, "loop_seconds", s->loop_seconds);
  va_json_number(&j, "total_seconds", s->total_seconds);
  va_json_number(&j, "ms_per_iteration", s->iterations > 0 ? 1e3 * s->loop_seconds / (double)s->iterations : 0);
  va_json_number(&j, "rows_per_second",
                 s->loop_seconds > 0 ? (double)s->n * (double)s->iterations / s->loop_seconds : 0);
  va_json_number(&j, "allreduce_bytes_per_rank", bytes);
  json_min_mean_max(&j, "loop_allreduce_seconds", gmin[2], gsum[2] / P, gmax[2]);
  if (s->stream_chunk_bytes > 0) {
    va_json_object(&j, "gpu_stream");
    va_json_number(&j, "chunk_bytes", s->stream_chunk_bytes);
    va_json_number(&j, "copied_bytes_per_rank", streamed);
    va_json_end(&j);
  }
  if (gmax[1] > 0) {
    va_json_object(&j, "gpu_memory_bytes");
    json_min_mean_max(&j, "loop", gmin[0], gsum[0] / P, gmax[0]);
    json_min_mean_max(&j, "peak", gmin[1], gsum[1] / P, gmax[1]);
    va_json_end(&j);
  }
  if (s->codes_m > 0) {
    va_json_object(&j, "codes");
    va_json_string(&j, "kind", "pq");
    va_json_int(&j, "m", s->codes_m);
    va_json_int(&j, "bits", s->codes_bits);
    va_json_number(&j, "bytes_per_vector", s->codes_bytes_per_vector);
    va_json_number(&j, "compression_ratio", s->codes_compression_ratio);
    va_json_number(&j, "error", s->codes_error);
    va_json_number(&j, "anchor_error", s->codes_anchor_error);
    va_json_number(&j, "train_seconds", s->codes_train_seconds);
    va_json_number(&j, "encode_seconds", s->codes_encode_seconds);
    va_json_end(&j);
  }
  va_json_object(&j, "phases_seconds");
  for (int p = 0; p < VA_NPHASE; p++) json_min_mean_max(&j, va_phase_names[p], mn[p], sum[p] / P, mx[p]);
  va_json_end(&j);
  va_json_object(&j, "peak_rss_bytes");
  va_json_number(&j, "min", rmin);
  va_json_number(&j, "mean", rsum / P);
  va_json_number(&j, "max", rmax);
  va_json_array(&j, "per_rank");
  for (int i = 0; i < P; i++) va_json_number(&j, NULL, all_rss[i]);
  va_json_end(&j);
  va_json_end(&j);
  va_json_object(&j, "config");
  va_config_visit(cfg, json_cfg, &j);
  va_json_finish(&j);
  free(all_rss);
  free(layout);
  return va_text_commit(f, "metrics file", path);
}
