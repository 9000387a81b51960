/* gen.c (cli): `vecanneal gen`: its options from argv, then the job (job/gen.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h" /* va_cmd_gen */
#include "cli/options.h"  /* va_opt, va_opt_i64, va_opt_unknown */
#include "job/gen.h"      /* va_gen_options_t, va_gen_job */
#include "util/util.h"    /* va_log0, va_agree */

static void gen_usage(void) {
  va_log0(
      "usage: vecanneal gen --out FILE.h5 [options]\n"
      "Writes synthetic vectors to FILE.h5:/train (and /test, /neighbors), each rank writing its own rows.\n"
      "  --kind gauss|vlc-demo   Gaussian mixture, or the prototype's demo data (docs/algorithm.md section 3) [gauss]\n"
      "  --n N                   rows in /train [100000]\n"
      "  --d D                   dimensions [128]\n"
      "  --clusters C            gauss: mixture components [100]\n"
      "  --spread S              gauss: per-coordinate std of a component (centres are N(0,1)) [0.5]\n"
      "  --outliers F            gauss: fraction of rows drawn uniformly from [-4,4]^d [0]\n"
      "  --test N                rows in /test (same distribution) [0]\n"
      "  --neighbors K           with --test: /neighbors and /distances, the exact K nearest /train rows of every\n"
      "                          /test row (squared l2, or 1 - cos for --distance angular), as vecanneal search\n"
      "                          --exact finds them; costs test x n distances (about 26 ns each at d 128 on\n"
      "                          one core: 1000 x 1M rows ~30 core-seconds, shared by ranks and threads) and\n"
      "                          one more pass generating /train [100 when --test is given]\n"
      "  --no-neighbors          no /neighbors (a large --test stays fast)\n"
      "  --seed S                seed [1]\n"
      "  --dtype float32|float16 storage type [float32]\n"
      "  --distance NAME         value of the 'distance' attribute [euclidean]\n"
      "  --io auto|collective|independent  HDF5 transfer mode [auto]\n");
}

int va_cmd_gen(int argc, char **argv) {
  va_gen_options_t g;
  va_gen_options_default(&g);
  const char *v;
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
    else if ((v = va_opt(argc, argv, &i, "--io"))) g.io = v;
    else if ((v = va_opt(argc, argv, &i, "--n"))) bad = va_opt_i64("--n", v, 1, INT64_MAX, &g.n, err, sizeof err);
    else if ((v = va_opt(argc, argv, &i, "--d"))) bad = va_opt_i64("--d", v, 1, INT64_MAX, &g.d, err, sizeof err);
    else if ((v = va_opt(argc, argv, &i, "--clusters")))
      bad = va_opt_i64("--clusters", v, 1, INT64_MAX, &g.clusters, err, sizeof err);
    else if (!strcmp(argv[i], "--no-neighbors")) g.neighbors = 0;
    else if ((v = va_opt(argc, argv, &i, "--neighbors")))
      bad = va_opt_i64("--neighbors", v, 1, INT64_MAX, &g.neighbors, err, sizeof err);
    else if ((v = va_opt(argc, argv, &i, "--test")))
      bad = va_opt_i64("--test", v, 0, INT64_MAX, &g.test, err, sizeof err);
    else if ((v = va_opt(argc, argv, &i, "--seed"))) {
      int64_t s;
      bad = va_opt_i64("--seed", v, 0, INT64_MAX, &s, err, sizeof err);
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
  if (!bad) bad = va_gen_options_resolve(&g, err, sizeof err);
  if (va_agree(bad ? VA_EXIT_USAGE : 0, err)) return VA_EXIT_USAGE;
  return va_gen_job(&g);
}
