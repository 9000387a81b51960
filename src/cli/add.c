/* add.c (cli): `vecanneal add`: its options from argv (cli/index_args.h), then the job (job/add.h). */
#include <stdio.h>

#include "cli/commands.h"   /* va_cmd_add */
#include "cli/index_args.h" /* va_index_args_parse */
#include "job/add.h"        /* va_add_options_t, va_add_job */
#include "util/util.h"      /* va_log0, va_agree */

static void add_usage(void) {
  va_log0("usage: vecanneal add --index INDEX.h5 --input FILE.h5:DATASET --out NEW.h5\n"
          "                     [--metrics FILE.json] [--set key=value ...]\n"
          "Adds rows to an index without retraining: places them as `vecanneal assign` does and writes a new\n"
          "index NEW.h5 with the same anchors, the old assignment followed by the new rows', the anchor counts\n"
          "and mean squared distances brought up to date, and every input listed in /sources\n"
          "(docs/index-format.md). An index with codes (compress --codes pq) keeps its codebooks, and its codes\n"
          "are followed by the new rows', encoded as compress encodes its own (docs/codes.md). INDEX.h5 is\n"
          "never written: --out naming it is a usage error (exit 2).\n"
          "  --index INDEX.h5      the index (vecanneal compress or add)\n"
          "  --input SPEC          the rows to add: FILE.h5:DATASET, or .fvecs/.bvecs/.ivecs/.npy (as compress)\n"
          "  --input-format F      auto|hdf5|fvecs|bvecs|ivecs|npy\n"
          "  --out NEW.h5          the new index (written to NEW.h5.partial, renamed when complete)\n"
          "  --metrics FILE.json   per-phase timings\n"
          "  --set key=value       execution keys of compress (threads, io, read_chunk_mb, backend, ...)\n"
          "Exit codes: 0 done, 2 bad usage or an output that is an input, 3 bad index or input (missing, other\n"
          "dimension, NaN/Inf), 4 output not writable, 5 not enough memory.\n");
}

int va_cmd_add(int argc, char **argv) {
  va_index_args_t a;
  char err[2048] = "";
  int rc = va_index_args_parse("add", argc, argv, &a, err, sizeof err);
  if (a.help) {
    add_usage();
    return 0;
  }
  if (va_agree(rc ? VA_EXIT_USAGE : 0, err)) return VA_EXIT_USAGE;
  va_add_options_t o = {.cfg = a.cfg, .index = a.index, .out = a.out};
  return va_add_job(&o);
}
