/* gen.c: `vecanneal gen`, synthetic datasets in the ann-benchmarks layout (/train, optional /test,
 * attributes distance and dimension). Every value is a function of (seed, global row, column), so the
 * file is the same for any rank count; each rank generates and writes only its own rows, in chunks, on
 * its share of the node's cores. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* sysconf */

#include "job/gen.h"
#include "comm/topk.h"  /* va_topk_merge_ranks */
#include "cpu/search.h" /* va_search_scan: the exact neighbours of /test */
#include "io/files.h"   /* va_files_prepare */
#include "io/h5io.h"
#include "util/rng.h"
#include "core/stop.h"      /* va_stop_point */
#include "util/heartbeat.h" /* va_heartbeat_start, va_heartbeat_stop */
#include "util/util.h"

/* Row `id` (train rows 0..n-1, test rows n..n+test-1) into out[d]. */
static void gen_row(const va_gen_options_t *g, int64_t id, float *out) {
  if (!strcmp(g->kind, "vlc-demo")) {
    /* docs/algorithm.md section 3: c + 0.5 sin(0.1 (i d + j)), c = 0, 5, 10 for i mod 3 = 0, 1, 2. */
    double c = 5.0 * (double)(id % 3);
    for (int64_t j = 0; j < g->d; j++) out[j] = (float)(c + 0.5 * sin(0.1 * (double)(id * g->d + j)));
    return;
  }
  if (va_rand_unit(g->seed, VA_RNG_GEN_OUTLIER, (uint64_t)id, 0) < g->outliers) {
    for (int64_t j = 0; j < g->d; j++)
      out[j] = (float)(8.0 * va_rand_unit(g->seed, VA_RNG_GEN_OUTLIER, (uint64_t)id, (uint64_t)j + 1) - 4.0);
    return;
  }
  uint64_t c = va_rand_u64(g->seed, VA_RNG_GEN_CLUSTER, (uint64_t)id, 0) % (uint64_t)g->clusters;
  for (int64_t j = 0; j < g->d; j++)
    out[j] = (float)(va_rand_normal(g->seed, VA_RNG_GEN_CENTER, c, (uint64_t)j) +
                     g->spread * va_rand_normal(g->seed, VA_RNG_GEN_NOISE, (uint64_t)id, (uint64_t)j));
}

static int gen_threads(void) {
  int mine = va_cpu_count();
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int t = (online > 0 && mine < online) ? mine : mine / (va_proc.local_nranks > 0 ? va_proc.local_nranks : 1);
  return t > 0 ? t : 1;
}

/* Rows a chunk of generation holds: 16 MiB of float32 values (at least one row). */
static int64_t gen_chunk_rows(int64_t d) { return (16 << 20) / (d * 4) > 0 ? (16 << 20) / (d * 4) : 1; }

/* Rows ids [id0, id0 + m) into out (m x d floats), or into half as binary16 when half is not NULL. */
static void gen_rows_into(const va_gen_options_t *g, int64_t id0, int64_t m, float *out, uint16_t *half, int threads) {
#pragma omp parallel for num_threads(threads > 1 && m * g->d >= (1 << 16) ? threads : 1) schedule(static)
  for (int64_t i = 0; i < m; i++) {
    gen_row(g, id0 + i, out + i * g->d);
    if (half)
      for (int64_t j = 0; j < g->d; j++) half[i * g->d + j] = va_float_to_half(out[i * g->d + j]);
  }
}

static hid_t create_rows_dataset(hid_t file, const char *name, int64_t rows, int64_t d, int half) {
  hsize_t dims[2] = {(hsize_t)rows, (hsize_t)d};
  hid_t space = VA_H5(H5Screate_simple(2, dims, NULL));
  hid_t type = half ? va_h5_half_type() : VA_H5(H5Tcopy(H5T_IEEE_F32LE));
  hid_t ds = va_h5_create_dataset(file, name, type, space, H5P_DEFAULT);
  H5Tclose(type);
  H5Sclose(space);
  return ds;
}

/* What the file's writer needs: the options and rank 0's exact neighbours (test x neighbors) or NULL. */
typedef struct {
  const va_gen_options_t *g;
  const va_neighbor_t *nbr;
} gen_write_t;

/* /neighbors (int32 as ann-benchmarks writes them, int64 past 2^31 rows) and /distances (float32, squared
 * l2 or 1 - cos: docs/search.md), test x neighbors, from rank 0's buffer. */
static void write_neighbors(hid_t file, const gen_write_t *w) {
  const va_gen_options_t *g = w->g;
  const int64_t count = g->test * g->neighbors;
  const int wide = g->n > INT32_MAX;
  void *ids = va_malloc((size_t)count * (wide ? 8 : 4), "neighbour ids");
  float *dist = va_malloc((size_t)count * sizeof(float), "neighbour distances");
  for (int64_t i = 0; w->nbr && i < count; i++) {
    if (wide) ((int64_t *)ids)[i] = w->nbr[i].id;
    else ((int32_t *)ids)[i] = (int32_t)w->nbr[i].id;
    dist[i] = w->nbr[i].dist;
  }
  hsize_t dims[2] = {(hsize_t)g->test, (hsize_t)g->neighbors};
  hid_t space = VA_H5(H5Screate_simple(2, dims, NULL));
  hid_t ds = va_h5_create_dataset(file, "/neighbors", wide ? H5T_STD_I64LE : H5T_STD_I32LE, space, H5P_DEFAULT);
  va_h5_write_whole(ds, wide ? H5T_NATIVE_INT64 : H5T_NATIVE_INT32, ids);
  VA_H5(H5Dclose(ds));
  ds = va_h5_create_dataset(file, "/distances", H5T_IEEE_F32LE, space, H5P_DEFAULT);
  va_h5_write_whole(ds, H5T_NATIVE_FLOAT, dist);
  VA_H5(H5Dclose(ds));
  VA_H5(H5Sclose(space));
  free(ids);
  free(dist);
}

static void gen_setup(hid_t file, void *ctx) {
  const va_gen_options_t *g = ((const gen_write_t *)ctx)->g;
  hid_t ds = create_rows_dataset(file, "/train", g->n, g->d, g->half);
  H5Dclose(ds);
  if (g->test > 0) H5Dclose(create_rows_dataset(file, "/test", g->test, g->d, g->half));
  va_h5_attr_str(file, "distance", g->distance);
  va_h5_attr_i64(file, "dimension", g->d);
  va_h5_attr_str(file, "generator", g->kind);
  va_h5_attr_i64(file, "seed", (int64_t)g->seed);
  if (!strcmp(g->kind, "gauss")) {
    va_h5_attr_i64(file, "clusters", g->clusters);
    va_h5_attr_f64(file, "spread", g->spread);
    va_h5_attr_f64(file, "outlier_fraction", g->outliers);
  }
  if (g->neighbors > 0) write_neighbors(file, ctx);
}

/* The rows of `name` (total rows, global ids from id0) that this rank owns, generated and written in
 * chunks (every rank at once: va_h5_write_file). */
static void write_block(hid_t file, const va_gen_options_t *g, const char *name, int64_t total, int64_t id0) {
  int64_t start, count;
  va_shard_range(total, va_proc.rank, va_proc.nranks, &start, &count);
  const int64_t chunk = gen_chunk_rows(g->d);
  const int threads = gen_threads();
  float *buf = va_malloc((size_t)(chunk * g->d) * sizeof(float), "gen buffer");
  uint16_t *hbuf = g->half ? va_malloc((size_t)(chunk * g->d) * sizeof(uint16_t), "gen half buffer") : NULL;
  hid_t ds = VA_H5(H5Dopen2(file, name, H5P_DEFAULT));
  hid_t mtype = g->half ? va_h5_half_type() : VA_H5(H5Tcopy(H5T_NATIVE_FLOAT));
  int64_t rounds = va_h5_row_rounds(count, chunk);
  double t0 = va_now(), last = t0;
  for (int64_t r = 0; r < rounds; r++) {
    int64_t r0 = r * chunk, nr = count - r0 > chunk ? chunk : count - r0;
    if (nr < 0) nr = 0;
    if (va_now() - last >= va_progress_seconds() && r0 > 0 && r0 < count) {
      char eta[32];
      last = va_now();
      va_format_seconds((last - t0) * (double)(count - r0) / (double)r0, eta, sizeof eta);
      va_log0("gen: %s: rank 0 wrote %lld of its %lld rows, ETA %s\n", name, (long long)r0, (long long)count, eta);
    }
    gen_rows_into(g, id0 + start + r0, nr, buf, hbuf, threads);
    va_h5_write_rows(ds, mtype, start + r0, nr, g->d, hbuf ? (const void *)hbuf : (const void *)buf);
  }
  H5Tclose(mtype);
  H5Dclose(ds);
  free(hbuf);
  free(buf);
}

static void gen_rows(hid_t file, void *ctx) {
  const gen_write_t *w = ctx;
  write_block(file, w->g, "/train", w->g->n, 0);
  if (w->g->test > 0) write_block(file, w->g, "/test", w->g->test, w->g->n);
}

void va_gen_options_default(va_gen_options_t *g) {
  *g = (va_gen_options_t){.kind = "gauss",
                          .dtype = "float32",
                          .distance = "euclidean",
                          .io = "auto",
                          .n = 100000,
                          .d = 128,
                          .clusters = 100,
                          .neighbors = -1,
                          .spread = 0.5,
                          .seed = 1,
                          .io_mode = VA_IO_AUTO};
}

int va_gen_options_resolve(va_gen_options_t *g, char *err, size_t len) {
  if (!g->out) return snprintf(err, len, "gen: --out FILE.h5 is required"), 1;
  if (strcmp(g->kind, "gauss") && strcmp(g->kind, "vlc-demo"))
    return snprintf(err, len, "gen: --kind must be gauss or vlc-demo, got '%s'", g->kind), 1;
  if (strcmp(g->dtype, "float32") && strcmp(g->dtype, "float16"))
    return snprintf(err, len, "gen: --dtype must be float32 or float16, got '%s'", g->dtype), 1;
  g->io_mode = !strcmp(g->io, "collective")    ? VA_IO_COLLECTIVE
               : !strcmp(g->io, "independent") ? VA_IO_INDEPENDENT
                                               : VA_IO_AUTO;
  if (strcmp(g->io, "auto") && g->io_mode == VA_IO_AUTO)
    return snprintf(err, len, "gen: --io must be auto, collective or independent"), 1;
  g->half = !strcmp(g->dtype, "float16");
  if (g->neighbors > 0 && g->test == 0)
    return snprintf(err, len, "gen: --neighbors needs --test N (the queries whose neighbours are written)"), 1;
  if (g->neighbors > g->n)
    return snprintf(err, len, "gen: --neighbors %lld is more than the %lld rows of /train", (long long)g->neighbors,
                    (long long)g->n),
           1;
  if (g->neighbors < 0) g->neighbors = g->test > 0 ? (g->n < 100 ? g->n : 100) : 0;
  g->cosine = !strcmp(g->distance, "angular") || !strcmp(g->distance, "cosine");
  return 0;
}

/* Rows ids [id0, id0 + m) as the file will hold them and a search will read them: rounded to binary16
 * and back for --dtype float16, unit length (as search and compress make them) for a cosine distance. */
static void stored_rows(const va_gen_options_t *g, int64_t id0, int64_t m, float *out, int threads) {
  gen_rows_into(g, id0, m, out, NULL, threads);
  if (g->half)
    for (int64_t i = 0; i < m * g->d; i++) out[i] = va_half_to_float(va_float_to_half(out[i]));
  if (g->cosine) va_search_unit_rows(out, m, g->d, threads);
}

/* Collective: the exact top-neighbors of every /test row among the /train rows, with search's kernel
 * (cpu/search.h) and merge (comm/topk.h), so `vecanneal search --exact` finds the same ids and distances.
 * Every rank regenerates the test rows and its own block of train rows, chunk by chunk (the shard is
 * never whole in memory). Returns rank 0's test x neighbors entries, NULL elsewhere. */
static va_neighbor_t *exact_neighbors(const va_gen_options_t *g) {
  const int64_t d = g->d, nq = g->test, K = g->neighbors;
  const int threads = gen_threads();
  float *Q = va_malloc((size_t)(nq * d) * sizeof(float), "test rows");
  stored_rows(g, g->n, nq, Q, threads);
  va_neighbor_t *local = va_malloc((size_t)(nq * K) * sizeof(va_neighbor_t), "neighbour heaps");
  va_topk_t *heaps = va_malloc((size_t)nq * sizeof(va_topk_t), "neighbour heaps");
  for (int64_t q = 0; q < nq; q++) va_topk_init(&heaps[q], local + q * K, K);
  int64_t start, count;
  va_shard_range(g->n, va_proc.rank, va_proc.nranks, &start, &count);
  const int64_t chunk = gen_chunk_rows(d);
  float *rows = va_malloc((size_t)(chunk * d) * sizeof(float), "train rows");
  for (int64_t r0 = 0; r0 < count; r0 += chunk) {
    const int64_t m = count - r0 < chunk ? count - r0 : chunk;
    stored_rows(g, start + r0, m, rows, threads);
    va_search_scan(Q, nq, d, rows, m, NULL, start + r0, g->cosine, threads, heaps);
  }
  for (int64_t q = 0; q < nq; q++) va_topk_sorted(&heaps[q], local + q * K);
  va_neighbor_t *merged = va_proc.rank == 0 ? va_malloc((size_t)(nq * K) * sizeof(va_neighbor_t), "neighbours") : NULL;
  const int64_t batch = 1024; /* queries per gather: nranks x batch x K entries on rank 0 */
  for (int64_t b0 = 0; b0 < nq; b0 += batch)
    va_topk_merge_ranks(local + b0 * K, nq - b0 < batch ? nq - b0 : batch, K, merged ? merged + b0 * K : NULL);
  free(rows);
  free(heaps);
  free(local);
  free(Q);
  return merged;
}

static int gen_job(const va_gen_options_t *opts) {
  va_gen_options_t g = *opts;
  const va_file_use_t out = {"output", g.out, 1};
  int rc = va_files_prepare(NULL, 0, &out, 1);
  if (rc) return rc;
  va_stop_point("set-up");
  double t0 = va_now();
  const double bytes = (double)(g.n + g.test) * (double)g.d * (g.half ? 2.0 : 4.0);
  gen_write_t w = {&g, NULL};
  double t_nbr = 0;
  if (g.neighbors > 0) {
    t_nbr = va_now();
    w.nbr = exact_neighbors(&g);
    t_nbr = va_now() - t_nbr;
    va_stop_point("neighbours");
  }
  rc = va_h5_write_file("output", g.out, bytes + (double)(g.test * g.neighbors) * 8.0, g.io_mode, gen_setup, gen_rows,
                        &w);
  free((void *)w.nbr);
  if (rc) return rc;
  char nbr[96] = "";
  if (g.neighbors > 0)
    snprintf(nbr, sizeof nbr, " and /neighbors (exact top %lld of each test row, %s, %.2f s)", (long long)g.neighbors,
             g.cosine ? "cosine" : "l2", t_nbr);
  va_log0("gen: wrote %s:/train (%lld x %lld %s, %s)%s%s in %.2f s on %d rank(s)\n", g.out, (long long)g.n,
          (long long)g.d, g.dtype, g.kind, g.test ? " and /test" : "", nbr, va_now() - t0, va_proc.nranks);
  return 0;
}

int va_gen_job(const va_gen_options_t *opts) {
  va_heartbeat_start(); /* no quiet stretch on rank 0 (heartbeat.h) */
  int rc = gen_job(opts);
  va_heartbeat_stop();
  return rc;
}
