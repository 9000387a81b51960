/* main.c: the vecanneal command line: MPI start-up, subcommand dispatch, collective exit. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "util.h"

const char *va_opt(int argc, char **argv, int *i, const char *name) {
  size_t len = strlen(name);
  if (strncmp(argv[*i], name, len)) return NULL;
  if (argv[*i][len] == '=') return argv[*i] + len + 1;
  if (argv[*i][len] != 0) return NULL;
  if (*i + 1 >= argc) return NULL;
  return argv[++*i];
}

static void usage(void) {
  va_log0(
      "vecanneal %s: distributed annealed-anchor compression of vector datasets (MPI + HDF5)\n\n"
      "usage: mpirun -n P vecanneal COMMAND [options]\n"
      "commands:\n"
      "  gen       write a synthetic dataset (Gaussian mixture or the prototype's demo data) to HDF5\n"
      "  compress  compress FILE.h5:DATASET into an HDF5 index of anchors + per-row assignments\n"
      "  info      summarise an index file\n"
      "  embed     embed a text corpus (one text per line) with all-MiniLM-L6-v2 into HDF5 (distance angular)\n"
      "  help, --help, --version\n"
      "Run 'vecanneal COMMAND --help' for a command's options; README.md has examples.\n",
      VECANNEAL_VERSION);
}

int main(int argc, char **argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    fprintf(stderr, "vecanneal: MPI_Init failed\n");
    return VA_EXIT_INTERNAL;
  }
  /* Errors come back to us (we print them with context and abort ourselves). */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  va_proc_init();
  int rc;
  const char *cmd = argc > 1 ? argv[1] : "help";
  if (!strcmp(cmd, "gen")) rc = va_cmd_gen(argc - 2, argv + 2);
  else if (!strcmp(cmd, "compress")) rc = va_cmd_compress(argc - 2, argv + 2);
  else if (!strcmp(cmd, "info")) rc = va_cmd_info(argc - 2, argv + 2);
  else if (!strcmp(cmd, "embed")) rc = va_cmd_embed(argc - 2, argv + 2);
  else if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
    va_log0("vecanneal %s (cuda %s, nccl %s, hdf5 %s, openmp %s)\n", VECANNEAL_VERSION,
#ifdef VECANNEAL_CUDA
            "yes",
#else
            "no",
#endif
#ifdef VECANNEAL_NCCL
            "yes",
#else
            "no",
#endif
#ifdef VECANNEAL_PARALLEL_HDF5
            "parallel",
#else
            "serial",
#endif
#ifdef VECANNEAL_OPENMP
            "yes");
#else
            "no");
#endif
    rc = 0;
  }
  else if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { usage(); rc = 0; }
  else {
    char err[256];
    snprintf(err, sizeof err, "unknown command '%s' (try vecanneal --help)", cmd);
    rc = va_agree(VA_EXIT_USAGE, err);
  }
  va_exit_all(rc);
}
