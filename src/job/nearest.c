/* nearest.c: new rows placed in an existing index (job/nearest.h): the files checked, the index read,
 * sharded read, the index's frame, one assign pass through the backend table (the same kernels as
 * compress's final pass). */
#include "job/nearest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/plan.h" /* va_backend_plan, va_backend_attach */
#include "core/anneal.h"  /* va_state_t */
#include "core/metrics.h" /* va_tick, va_tock */
#include "io/files.h"     /* va_files_prepare */
#include "util/util.h"

/* Threads per rank as compress takes them: the key, else the cores the launcher bound the rank to, else
 * the node's cores shared among its ranks. */
static int choose_threads(const va_config_t *cfg) {
  if (cfg->threads > 0) return (int)cfg->threads;
  int mine = va_cpu_count();
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int t = (online > 0 && mine < online) ? mine : mine / (va_proc.local_nranks > 0 ? va_proc.local_nranks : 1);
  return t > 0 ? t : 1;
}

void va_rows_to_frame(float *X, int64_t n, int64_t d, int cosine, const double *center, int threads) {
  (void)threads;
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
  for (int64_t i = 0; i < n; i++) {
    float *x = X + i * d;
    if (cosine) {
      double s = 0;
      for (int64_t t = 0; t < d; t++) s += (double)x[t] * x[t];
      if (s > 0)
        for (int64_t t = 0; t < d; t++) x[t] = (float)(x[t] / sqrt(s));
    } else {
      for (int64_t t = 0; t < d; t++) x[t] = (float)(x[t] - center[t]);
    }
  }
}

/* This rank's block of in placed in ix (va_nearest_job's last stage), then(st, ctx) when given; 0 or the
 * agreed exit code. */
static int nearest_rows(const va_index_data_t *ix, va_input_t *in, const va_config_t *cfg, va_nearest_t *out,
                        va_nearest_then_fn then, void *ctx) {
  memset(out, 0, sizeof *out);
  char label[VA_PATH_MAX + 300], err[VA_PATH_MAX + 600] = "";
  va_input_label(in, label, sizeof label);
  if (in->d != ix->d) {
    snprintf(err, sizeof err, "input '%s' has %lld dimensions but the index's anchors have %lld", label,
             (long long)in->d, (long long)ix->d);
    return va_agree(va_proc.rank == 0 ? VA_EXIT_INPUT : 0, err);
  }
  va_state_t st;
  memset(&st, 0, sizeof st);
  st.cfg = cfg;
  st.n = in->n;
  st.d = in->d;
  st.k = st.k_initial = ix->k;
  st.cosine = ix->cosine;
  va_shard_range(in->n, va_proc.rank, va_proc.nranks, &st.row0, &st.n_local);
  const int threads = choose_threads(cfg);
  st.aopts.threads = threads;
  st.aopts.tile_rows = cfg->tile_rows;
  /* The final pass's kernel: the two kernels may part on near-ties (cpu/assign.h). A processor without
   * the fused kernel takes sgemm tiles. */
  st.aopts.kernel =
      ix->cpu_assign == VA_CPU_ASSIGN_SGEMM || !va_assign_fused_available() ? VA_CPU_ASSIGN_SGEMM : VA_CPU_ASSIGN_FUSED;
#ifdef VECANNEAL_OPENMP
  va_blas_threads(1);
#else
  va_blas_threads(threads);
#endif
  va_backend_plan_t plan = va_backend_plan(&st, cfg);
  const double bytes = (double)st.n_local * (double)st.d * 4.0;
  st.X = malloc(bytes > 0 ? (size_t)bytes : 1);
  if (!st.X)
    snprintf(err, sizeof err, "rank %d on %s cannot allocate %.2f GiB for its %lld rows; use more ranks", va_proc.rank,
             va_proc.host, bytes / 1073741824.0, (long long)st.n_local);
  VA_AGREE_OR_EXIT(st.X ? 0 : VA_EXIT_RESOURCE, err);
  va_read_result_t read = {-1, 0};
  va_input_read(in, st.row0, st.n_local, st.X, (size_t)(cfg->read_chunk_mb * 1048576.0), cfg->io, threads, &read);
  int64_t first_bad = read.bad_row < 0 ? INT64_MAX : read.bad_row;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD));
  if (first_bad != INT64_MAX) {
    snprintf(err, sizeof err, "input '%s' row %lld holds NaN or Inf; clean the data first", label,
             (long long)first_bad);
    free(st.X);
    return va_agree(va_proc.rank == 0 ? VA_EXIT_INPUT : 0, err);
  }
  in->checksum = read.checksum;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &in->checksum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
  va_rows_to_frame(st.X, st.n_local, st.d, ix->cosine, ix->center, threads);
  st.center = va_malloc((size_t)st.d * sizeof(double), "centre");
  memcpy(st.center, ix->center, (size_t)st.d * sizeof(double));
  va_state_alloc(&st);
  memcpy(st.A, ix->frame, (size_t)(ix->k * ix->d) * sizeof(float));
  out->backend = va_backend_attach(&st, cfg, &plan);
  va_state_anchor_norms(&st);
  st.be->assign(&st);
  st.be->sync_host(&st);
  if (then) then(&st, ctx);
  out->row0 = st.row0;
  out->n_local = st.n_local;
  out->assign = st.assign;
  out->dist = st.r;
  st.assign = NULL;
  st.r = NULL;
  va_state_free(&st);
  return 0;
}

int va_nearest_job(const char *index, const char *out_role, const char *out_file, const va_config_t *cfg,
                   va_index_data_t *ix, va_input_t *in, va_nearest_t *out, va_nearest_then_fn then, void *ctx) {
  char input_file[VA_PATH_MAX];
  va_input_file(cfg->input, cfg->input_format, input_file, sizeof input_file);
  /* The index is an input: an output naming it (or a link to it) is a usage error, never an overwrite. */
  const va_file_use_t inputs[] = {{"index", index, 0}, {"input", input_file, 0}};
  const va_file_use_t outputs[] = {{out_role, out_file, 1}, {"metrics file", cfg->metrics, 1}};
  int rc = va_files_prepare(inputs, 2, outputs, 2);
  if (rc) return rc;
  if ((rc = va_index_read(index, VA_INDEX_FRAME, ix))) return rc;
  va_input_open_as(cfg->input, cfg->input_format, in);
  va_tick_t t = va_tick();
  if ((rc = nearest_rows(ix, in, cfg, out, then, ctx))) {
    va_index_data_free(ix);
    return rc;
  }
  va_tock(VA_PH_ASSIGN, t);
  return 0;
}

void va_nearest_free(va_nearest_t *out) {
  free(out->assign);
  free(out->dist);
  memset(out, 0, sizeof *out);
}
