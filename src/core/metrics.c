/* metrics.c: phase timers and the --metrics JSON file (written by rank 0, atomically). */
#include "core/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/files.h" /* va_temp_name */
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

static void json_cfg(const char *key, const char *value, void *ctx) {
  FILE *f = ctx;
  fprintf(f, ",\n    \"%s\": \"", key);
  for (const char *p = value; *p; p++) {
    if (*p == '"' || *p == '\\') fputc('\\', f);
    fputc(*p, f);
  }
  fputc('"', f);
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
  const double gpu_mem[2] = {s->gpu_memory_loop_bytes, s->gpu_memory_peak_bytes};
  double gmin[2], gmax[2], gsum[2];
  VA_MPI(MPI_Reduce(gpu_mem, gmin, 2, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(gpu_mem, gmax, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(gpu_mem, gsum, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
  if (!path || !path[0]) {
    free(all_rss);
    return 0;
  }
  FILE *f = va_proc.rank == 0 ? va_text_open(path) : NULL;
  if (!f) {
    free(all_rss);
    return va_text_commit(NULL, "metrics file", path);
  }
  int P = va_proc.nranks;
  double rmin = all_rss[0], rmax = all_rss[0], rsum = 0;
  for (int i = 0; i < P; i++) {
    rsum += all_rss[i];
    if (all_rss[i] < rmin) rmin = all_rss[i];
    if (all_rss[i] > rmax) rmax = all_rss[i];
  }
  fprintf(f, "{\n  \"version\": \"%s\",\n  \"backend\": \"%s\",\n  \"ranks\": %d,\n", VECANNEAL_VERSION, s->backend, P);
  fprintf(f, "  \"n\": %lld,\n  \"d\": %lld,\n  \"k_initial\": %lld,\n  \"k_final\": %lld,\n  \"iterations\": %lld,\n",
          (long long)s->n, (long long)s->d, (long long)s->k_initial, (long long)s->k_final, (long long)s->iterations);
  fprintf(f, "  \"final_energy\": %.17g,\n  \"loop_seconds\": %.6f,\n  \"total_seconds\": %.6f,\n", s->final_energy,
          s->loop_seconds, s->total_seconds);
  double ms_iter = s->iterations > 0 ? 1e3 * s->loop_seconds / (double)s->iterations : 0;
  double rows_s = s->loop_seconds > 0 ? (double)s->n * (double)s->iterations / s->loop_seconds : 0;
  fprintf(f, "  \"ms_per_iteration\": %.6f,\n  \"rows_per_second\": %.1f,\n  \"allreduce_bytes_per_rank\": %.0f,\n",
          ms_iter, rows_s, bytes);
  if (s->stream_chunk_bytes > 0)
    fprintf(f, "  \"gpu_stream\": {\"chunk_bytes\": %.0f, \"copied_bytes_per_rank\": %.0f},\n", s->stream_chunk_bytes,
            streamed);
  if (gmax[1] > 0)
    fprintf(f,
            "  \"gpu_memory_bytes\": {\"loop\": {\"min\": %.0f, \"mean\": %.0f, \"max\": %.0f}, \"peak\": {\"min\": "
            "%.0f, \"mean\": %.0f, "
            "\"max\": %.0f}},\n",
            gmin[0], gsum[0] / P, gmax[0], gmin[1], gsum[1] / P, gmax[1]);
  fprintf(f, "  \"phases_seconds\": {\n");
  for (int p = 0; p < VA_NPHASE; p++)
    fprintf(f, "    \"%s\": {\"min\": %.6f, \"mean\": %.6f, \"max\": %.6f}%s\n", va_phase_names[p], mn[p], sum[p] / P,
            mx[p], p + 1 < VA_NPHASE ? "," : "");
  fprintf(f, "  },\n  \"peak_rss_bytes\": {\"min\": %.0f, \"mean\": %.0f, \"max\": %.0f, \"per_rank\": [", rmin,
          rsum / P, rmax);
  for (int i = 0; i < P; i++) fprintf(f, "%s%.0f", i ? ", " : "", all_rss[i]);
  fprintf(f, "]},\n  \"config\": {\n    \"_\": \"resolved keys\"");
  va_config_visit(cfg, json_cfg, f);
  fprintf(f, "\n  }\n}\n");
  free(all_rss);
  return va_text_commit(f, "metrics file", path);
}
