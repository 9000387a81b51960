/* compress.c (cli): `vecanneal compress`: the configuration from --config, --set and the shorthands
 * (applied in that order), the other options, --help and --print-config; then the job. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h" /* va_cmd_compress */
#include "cli/options.h"  /* va_opt, va_opt_unknown */
#include "core/config.h"  /* va_config_src_*, va_config_print_* */
#include "job/compress.h" /* va_compress_options_t, va_compress_job */
#include "util/util.h"    /* va_proc, va_agree */

static void compress_usage(void) {
  if (va_proc.rank != 0) return;
  printf("usage: vecanneal compress --input FILE.h5:DATASET --anchors K --out INDEX.h5\n"
         "                          [--config FILE.ini] [--set key=value ...] [--metrics FILE.json]\n"
         "Compresses the rows of an HDF5 dataset into K anchors plus one anchor id per row, with the\n"
         "annealed-anchor algorithm, on every MPI rank (each rank reads and owns a contiguous row block).\n"
         "Options:\n"
         "  --input FILE:DATASET  input vectors (ann-benchmarks: file.h5:/train); float32/64/16, uint8, int8\n"
         "  --input FILE.fvecs|.bvecs|.ivecs|.npy  a TEXMEX or NumPy file (no DATASET part)\n"
         "  --input-format F      auto|hdf5|fvecs|bvecs|ivecs|npy (config key input_format; auto: by extension)\n"
         "  --anchors K           number of anchors (config key k)\n"
         "  --train-sample N      train the anchors on N rows spread over the input, then assign every row\n"
         "                        (config key train_sample; 0 = all rows)\n"
         "  --codes none|pq       after the anchors, also encode every row's residual in M codes of --pq-bits\n"
         "                        bits (config keys codes, pq_m, pq_bits; docs/codes.md)\n"
         "  --pq-m M              pq subspaces (1..d); --pq-bits 8 (the only width supported)\n"
         "  --out INDEX.h5        output index (written to INDEX.h5.partial, renamed when complete)\n"
         "  --config FILE         INI file of 'key = value' lines (see configs/)\n"
         "  --set key=value       override one key (repeatable; applied after --config)\n"
         "  --preset vlc          the prototype's parity settings (same as --set preset=vlc)\n"
         "  --backend auto|cpu|cuda  (same as --set backend=...)\n"
         "  --metrics FILE.json   per-phase timings (min/mean/max over ranks), rows/s, peak memory\n"
         "  --print-config        print the resolved configuration as an INI file and exit\n"
         "  --resume CKPT         continue from a checkpoint (same input and configuration)\n"
         "  --embed CORPUS        embed a text corpus (one line per row, or .jsonl with \"text\") with\n"
         "                        all-MiniLM-L6-v2 and compress the vectors in the same job (cosine)\n"
         "  --embed-model DIR     model directory for --embed (default as vecanneal embed)\n"
         "  --embed-out F.h5:/D   also write the embedded vectors there\n"
         "SIGTERM or SIGUSR1 (Slurm's warning before the time limit) writes a checkpoint at the end of the\n"
         "current iteration and exits with 75; before the first iteration (read, initialisation) the job\n"
         "stops at once with 75 and no checkpoint. checkpoint_every = N also writes one every N iterations.\n"
         "Every output is claimed (OUT.partial) and checked against the inputs before anything is read.\n"
         "Exit codes: 0 done, 1 internal/library failure, 2 bad usage/config, 3 bad input, 4 output not\n"
         "writable (full disk, claimed by another job), 5 not enough memory, 75 stopped by a signal.\n\n");
  va_config_print_keys(stdout);
}

static int parse_args(int argc, char **argv, va_compress_options_t *o, char *err, size_t errlen, int *help,
                      int *print) {
  va_config_t *cfg = &o->cfg;
  va_config_src_t *src = va_config_src_new();
  const char *v;
  int rc = 0;
  for (int i = 0; i < argc; i++)
    if ((v = va_opt(argc, argv, &i, "--config"))) o->config_file = v;
  if (o->config_file) rc = va_config_src_load_file(src, o->config_file, err, errlen);
  static const char *const shorthand[][2] = {{"--input", "input"},
                                             {"--input-format", "input_format"},
                                             {"--anchors", "k"},
                                             {"--out", "out"},
                                             {"--metrics", "metrics"},
                                             {"--preset", "preset"},
                                             {"--backend", "backend"},
                                             {"--seed", "seed"},
                                             {"--train-sample", "train_sample"},
                                             {"--codes", "codes"},
                                             {"--pq-m", "pq_m"},
                                             {"--pq-bits", "pq_bits"}};
  for (int i = 0; i < argc && !rc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      *help = 1;
      break;
    }
    if (!strcmp(argv[i], "--print-config")) {
      *print = 1;
      continue;
    }
    if ((v = va_opt(argc, argv, &i, "--resume"))) {
      o->resume_path = v;
      continue;
    }
    if ((v = va_opt(argc, argv, &i, "--embed"))) {
      o->embed_corpus = v;
      continue;
    }
    if ((v = va_opt(argc, argv, &i, "--embed-model"))) {
      o->embed_model = v;
      continue;
    }
    if ((v = va_opt(argc, argv, &i, "--embed-out"))) {
      o->embed_out = v;
      continue;
    }
    if ((v = va_opt(argc, argv, &i, "--config"))) continue;
    if ((v = va_opt(argc, argv, &i, "--set"))) {
      rc = va_config_src_add_kv(src, v, "--set", err, errlen);
      continue;
    }
    int matched = 0;
    for (size_t s = 0; s < sizeof shorthand / sizeof shorthand[0] && !matched; s++)
      if ((v = va_opt(argc, argv, &i, shorthand[s][0]))) {
        rc = va_config_src_add(src, shorthand[s][1], v, shorthand[s][0], err, errlen);
        matched = 1;
      }
    if (!matched) {
      va_opt_unknown("compress", argv[i], err, errlen);
      rc = 1;
    }
  }
  if (!rc && !*help) rc = va_config_resolve(src, cfg, err, errlen);
  va_config_src_free(src);
  if (*print) return rc;
  if (!rc && !*help && !cfg->input[0] && !o->embed_corpus) {
    snprintf(err, errlen, "compress: no input given (--input FILE.h5:DATASET or config key 'input')");
    rc = 1;
  }
  if (!rc && !*help && !cfg->out[0]) {
    snprintf(err, errlen, "compress: no output given (--out INDEX.h5 or config key 'out')");
    rc = 1;
  }
  return rc;
}

int va_cmd_compress(int argc, char **argv) {
  va_compress_options_t o;
  memset(&o, 0, sizeof o);
  char err[2048] = "";
  int help = 0, print = 0;
  int rc = parse_args(argc, argv, &o, err, sizeof err, &help, &print);
  if (help) {
    compress_usage();
    return 0;
  }
  if (print && !rc) {
    if (va_proc.rank == 0) va_config_print_ini(&o.cfg, stdout);
    return 0;
  }
  if (va_agree(rc ? VA_EXIT_USAGE : 0, err)) return VA_EXIT_USAGE;
  return va_compress_job(&o);
}
