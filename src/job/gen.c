/* gen.c: `vecanneal gen`, synthetic datasets in the ann-benchmarks layout (/train, optional /test,
 * attributes distance and dimension). Every value is a function of (seed, global row, column), so the
 * file is the same for any rank count; each rank generates and writes only its own rows, in chunks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h" /* va_opt, va_opt_unknown */
#include "io/files.h"    /* va_files_prepare */
#include "io/h5io.h"
#include "util/rng.h"
#include "core/stop.h" /* va_stop_point */
#include "util/util.h"

typedef struct {
  const char *out, *kind, *dtype, *distance;
  int64_t n, d, clusters, test;
  double spread, outliers;
  uint64_t seed;
  int half;
} gen_args_t;

/* Row `id` (train rows 0..n-1, test rows n..n+test-1) into out[d]. */
static void gen_row(const gen_args_t *g, int64_t id, float *out) {
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

static hid_t create_rows_dataset(hid_t file, const char *name, int64_t rows, int64_t d, int half) {
  hsize_t dims[2] = {(hsize_t)rows, (hsize_t)d};
  hid_t space = VA_H5(H5Screate_simple(2, dims, NULL));
  hid_t type = half ? va_h5_half_type() : VA_H5(H5Tcopy(H5T_IEEE_F32LE));
  hid_t ds = VA_H5(H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  H5Tclose(type);
  H5Sclose(space);
  return ds;
}

static void gen_setup(hid_t file, void *ctx) {
  const gen_args_t *g = ctx;
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
}

static void write_block(hid_t file, const gen_args_t *g, const char *name, int64_t total, int64_t id0) {
  int64_t start, count;
  va_shard_range(total, va_proc.rank, va_proc.nranks, &start, &count);
  int64_t chunk = (16 << 20) / (g->d * 4);
  if (chunk < 1) chunk = 1;
  float *buf = va_malloc((size_t)(chunk * g->d) * sizeof(float), "gen buffer");
  uint16_t *hbuf = g->half ? va_malloc((size_t)(chunk * g->d) * sizeof(uint16_t), "gen half buffer") : NULL;
  hid_t ds = VA_H5(H5Dopen2(file, name, H5P_DEFAULT));
  hid_t mtype = g->half ? va_h5_half_type() : VA_H5(H5Tcopy(H5T_NATIVE_FLOAT));
  int64_t rounds = va_h5_row_rounds(count, chunk);
  for (int64_t r = 0; r < rounds; r++) {
    int64_t r0 = r * chunk, nr = count - r0 > chunk ? chunk : count - r0;
    if (nr < 0) nr = 0;
    for (int64_t i = 0; i < nr; i++) gen_row(g, id0 + start + r0 + i, buf + i * g->d);
    if (hbuf)
      for (int64_t i = 0; i < nr * g->d; i++) hbuf[i] = va_float_to_half(buf[i]);
    va_h5_write_rows(ds, mtype, start + r0, nr, g->d, hbuf ? (void *)hbuf : (void *)buf);
  }
  H5Tclose(mtype);
  H5Dclose(ds);
  free(hbuf);
  free(buf);
}

static void gen_rows(hid_t file, void *ctx) {
  const gen_args_t *g = ctx;
  write_block(file, g, "/train", g->n, 0);
  if (g->test > 0) write_block(file, g, "/test", g->test, g->n);
}

static void gen_usage(void) {
  va_log0(
      "usage: vecanneal gen --out FILE.h5 [options]\n"
      "Writes synthetic vectors to FILE.h5:/train (and /test), each rank writing its own rows.\n"
      "  --kind gauss|vlc-demo   Gaussian mixture, or the prototype's demo data (docs/algorithm.md section 3) [gauss]\n"
      "  --n N                   rows in /train [100000]\n"
      "  --d D                   dimensions [128]\n"
      "  --clusters C            gauss: mixture components [100]\n"
      "  --spread S              gauss: per-coordinate std of a component (centres are N(0,1)) [0.5]\n"
      "  --outliers F            gauss: fraction of rows drawn uniformly from [-4,4]^d [0]\n"
      "  --test N                rows in /test (same distribution) [0]\n"
      "  --seed S                seed [1]\n"
      "  --dtype float32|float16 storage type [float32]\n"
      "  --distance NAME         value of the 'distance' attribute [euclidean]\n"
      "  --io auto|collective|independent  HDF5 transfer mode [auto]\n");
}

static int parse_i64(const char *s, int64_t lo, int64_t *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || v < lo) return 1;
  *out = v;
  return 0;
}

int va_cmd_gen(int argc, char **argv) {
  gen_args_t g = {NULL, "gauss", "float32", "euclidean", 100000, 128, 100, 0, 0.5, 0.0, 1, 0};
  const char *v, *io = "auto";
  char err[512] = "";
  int bad = 0;
  for (int i = 0; i < argc && !bad; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      gen_usage();
      return 0;
    } else if ((v = va_opt(argc, argv, &i, "--out"))) g.out = v;
    else if ((v = va_opt(argc, argv, &i, "--kind"))) g.kind = v;
    else if ((v = va_opt(argc, argv, &i, "--dtype"))) g.dtype = v;
    else if ((v = va_opt(argc, argv, &i, "--distance"))) g.distance = v;
    else if ((v = va_opt(argc, argv, &i, "--io"))) io = v;
    else if ((v = va_opt(argc, argv, &i, "--n")))
      bad = parse_i64(v, 1, &g.n) ? snprintf(err, sizeof err, "--n: expected an integer >= 1, got '%s'", v) : 0;
    else if ((v = va_opt(argc, argv, &i, "--d")))
      bad = parse_i64(v, 1, &g.d) ? snprintf(err, sizeof err, "--d: expected an integer >= 1, got '%s'", v) : 0;
    else if ((v = va_opt(argc, argv, &i, "--clusters")))
      bad = parse_i64(v, 1, &g.clusters)
                ? snprintf(err, sizeof err, "--clusters: expected an integer >= 1, got '%s'", v)
                : 0;
    else if ((v = va_opt(argc, argv, &i, "--test")))
      bad = parse_i64(v, 0, &g.test) ? snprintf(err, sizeof err, "--test: expected an integer >= 0, got '%s'", v) : 0;
    else if ((v = va_opt(argc, argv, &i, "--seed"))) {
      int64_t s;
      bad = parse_i64(v, 0, &s) ? snprintf(err, sizeof err, "--seed: expected an integer >= 0, got '%s'", v) : 0;
      g.seed = (uint64_t)s;
    } else if ((v = va_opt(argc, argv, &i, "--spread"))) {
      char *e;
      g.spread = strtod(v, &e);
      bad = (*e || !(g.spread >= 0)) ? snprintf(err, sizeof err, "--spread: expected a number >= 0, got '%s'", v) : 0;
    } else if ((v = va_opt(argc, argv, &i, "--outliers"))) {
      char *e;
      g.outliers = strtod(v, &e);
      bad = (*e || !(g.outliers >= 0 && g.outliers <= 1))
                ? snprintf(err, sizeof err, "--outliers: expected a fraction in [0, 1], got '%s'", v)
                : 0;
    } else {
      va_opt_unknown("gen", argv[i], err, sizeof err);
      bad = 1;
    }
  }
  if (!bad && !g.out) {
    snprintf(err, sizeof err, "gen: --out FILE.h5 is required");
    bad = 1;
  }
  if (!bad && strcmp(g.kind, "gauss") && strcmp(g.kind, "vlc-demo")) {
    snprintf(err, sizeof err, "gen: --kind must be gauss or vlc-demo, got '%s'", g.kind);
    bad = 1;
  }
  if (!bad && strcmp(g.dtype, "float32") && strcmp(g.dtype, "float16")) {
    snprintf(err, sizeof err, "gen: --dtype must be float32 or float16, got '%s'", g.dtype);
    bad = 1;
  }
  int io_mode = !strcmp(io, "collective")    ? VA_IO_COLLECTIVE
                : !strcmp(io, "independent") ? VA_IO_INDEPENDENT
                                             : VA_IO_AUTO;
  if (!bad && strcmp(io, "auto") && io_mode == VA_IO_AUTO) {
    snprintf(err, sizeof err, "gen: --io must be auto, collective or independent");
    bad = 1;
  }
  if (va_agree(bad ? VA_EXIT_USAGE : 0, err)) return VA_EXIT_USAGE;
  g.half = !strcmp(g.dtype, "float16");
  const va_file_use_t out = {"output", g.out, 1};
  int rc = va_files_prepare(NULL, 0, &out, 1);
  if (rc) return rc;
  va_stop_point("set-up");
  double t0 = va_now();
  const double bytes = (double)(g.n + g.test) * (double)g.d * (g.half ? 2.0 : 4.0);
  rc = va_h5_write_file("output", g.out, bytes, io_mode, gen_setup, gen_rows, &g);
  if (rc) return rc;
  va_log0("gen: wrote %s:/train (%lld x %lld %s, %s)%s in %.2f s on %d rank(s)\n", g.out, (long long)g.n,
          (long long)g.d, g.dtype, g.kind, g.test ? " and /test" : "", va_now() - t0, va_proc.nranks);
  return 0;
}
