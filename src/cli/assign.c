/* assign.c (cli): `vecanneal assign`: its options from argv (cli/index_args.h), then the job
 * (job/assign.h). */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"   /* va_cmd_assign */
#include "cli/index_args.h" /* va_index_args_parse */
#include "job/assign.h"     /* va_assign_options_t, va_assign_job */
#include "util/util.h"      /* va_log0, va_agree */

static void assign_usage(void) {
  va_log0("usage: vecanneal assign --index INDEX.h5 --input FILE.h5:DATASET --out OUT.h5[:/DATASET]\n"
          "                        [--metrics FILE.json] [--set key=value ...]\n"
          "Places new vectors in an index (scikit-learn's predict): each rank reads its block of rows, puts them\n"
          "in the index's frame as compress did its own (l2: the index's /center subtracted; cosine: unit\n"
          "length) and finds each row's nearest anchor with the kernel of compress's final pass. On the index's\n"
          "own training rows the result is the index's /assignments.\n"
          "  --index INDEX.h5      the index (vecanneal compress or add)\n"
          "  --input SPEC          the vectors: FILE.h5:DATASET, or .fvecs/.bvecs/.ivecs/.npy (as compress)\n"
          "  --input-format F      auto|hdf5|fvecs|bvecs|ivecs|npy\n"
          "  --out OUT.h5[:/D]     anchor ids to /D (default /assign, uint32) and distances to /distance (float32:\n"
          "                        squared Euclidean for l2, 1 - x.a for cosine), in input row order\n"
          "  --metrics FILE.json   per-phase timings\n"
          "  --set key=value       execution keys of compress (threads, io, read_chunk_mb, backend, ...)\n"
          "Exit codes: 0 done, 2 bad usage or an output that is an input, 3 bad index or input (missing, other\n"
          "dimension, NaN/Inf), 4 output not writable, 5 not enough memory.\n");
}

int va_cmd_assign(int argc, char **argv) {
  va_index_args_t a;
  char err[2048] = "";
  int rc = va_index_args_parse("assign", argc, argv, &a, err, sizeof err);
  if (a.help) {
    assign_usage();
    return 0;
  }
  if (!rc && strrchr(a.out, ':')) {
    const char *d = strrchr(a.out, ':') + 1;
    if (d[0] != '/' || !d[1] || strchr(d + 1, '/') || !strcmp(d, "/distance")) {
      snprintf(err, sizeof err, "assign: --out %s: the dataset must be one name under the root other than /distance",
               a.out);
      rc = 1;
    }
  }
  if (va_agree(rc ? VA_EXIT_USAGE : 0, err)) return VA_EXIT_USAGE;
  va_assign_options_t o = {.cfg = a.cfg, .index = a.index, .out = a.out};
  return va_assign_job(&o);
}
