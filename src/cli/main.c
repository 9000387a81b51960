/* main.c: the vecanneal command line: MPI start-up, subcommand dispatch, collective exit. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "util/memlimit.h" /* va_mem_room_address */
#include "core/stop.h"
#include "util/util.h"

static void usage(void) {
  va_log0("vecanneal %s: distributed annealed-anchor compression of vector datasets (MPI + HDF5)\n\n"
          "usage: mpirun -n P vecanneal COMMAND [options]\n"
          "commands:\n"
          "  gen       write a synthetic dataset (Gaussian mixture or the prototype's demo data) to HDF5\n"
          "  compress  compress FILE.h5:DATASET into an HDF5 index of anchors + per-row assignments\n"
          "  info      summarise an index file\n"
          "  assign    the nearest anchor of an index for every row of new vectors (HDF5 out)\n"
          "  add       append new rows to an index (a new index file), without retraining\n"
          "  embed     embed a text corpus (one text per line) with all-MiniLM-L6-v2 into HDF5 (distance angular)\n"
          "  search    the k nearest rows of each query through an index's inverted lists (or exact), recall, QPS\n"
          "  help, --help, --version\n"
          "Run 'vecanneal COMMAND --help' for a command's options; README.md has examples.\n",
          VECANNEAL_VERSION);
}

/* Started without a launcher (no mpirun, srun or other PMI environment), the process is a singleton: it
 * will only ever talk to itself. Open MPI then still starts a helper daemon, probes every network
 * transport (UCX, OFI) and has hwloc list the machine's I/O devices, OpenCL and OpenGL ones included
 * (which starts the GPU driver's OpenCL stack): most of a singleton's start-up (docs/performance.md). So a
 * singleton asks for no daemon, the in-process transport alone and no GPU discovery by hwloc (vecanneal
 * picks GPUs itself); settings the user made (already in the environment) win, and launched ranks are
 * untouched. */
static void singleton_fast_start(void) {
#ifdef OPEN_MPI
  static const char *const launched[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID"};
  for (size_t q = 0; q < sizeof launched / sizeof *launched; q++)
    if (getenv(launched[q])) return;
  setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
  setenv("OMPI_MCA_pml", "ob1", 0);
  setenv("OMPI_MCA_btl", "self", 0);
  setenv("HWLOC_COMPONENTS", "-opencl,-gl,-cuda,-nvml,-rsmi,-levelzero", 0);
#endif
}

/* Collective: an address-space or data limit (ulimit -v, -d) that leaves a started process less than
 * the libraries need to open a file and start their threads (HDF5 can crash in its first call, or inside
 * H5Fopen, when an allocation fails) stops every rank with VA_EXIT_RESOURCE before anything else; the
 * per-job memory check (compress) comes later, when the job's size is known. */
static void check_start_room(void) {
  const double least = 128.0 * 1048576.0;
  const va_mem_room_t room = va_mem_room_address();
  char err[512];
  snprintf(err, sizeof err,
           "%s of %.0f MB leaves rank %d on %s %.0f MB after start-up; vecanneal needs at least %.0f MB more than "
           "its libraries map: raise the limit",
           room.source, room.limit_bytes / 1048576.0, va_proc.rank, va_proc.host, room.bytes / 1048576.0,
           least / 1048576.0);
  const int code = va_agree(room.bytes >= 0 && room.bytes < least ? VA_EXIT_RESOURCE : 0, err);
  if (code) va_exit_all_at_start(code);
}

int main(int argc, char **argv) {
  va_stop_install(); /* a stop request is honoured from here on (stop.h) */
  singleton_fast_start();
  /* Not done on purpose: starting the CUDA driver (cuInit) on a thread beside MPI_Init. Open MPI rewrites
   * memory functions (munmap and others) in place during MPI_Init while the driver would call them: a
   * race that can crash the process, for a small saving (docs/performance.md). */
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    fprintf(stderr, "vecanneal: MPI_Init failed\n");
    return VA_EXIT_INTERNAL;
  }
  /* for tests: a failure after this line is vecanneal's own, one before it the loader's or MPI_Init's */
  if (getenv("VECANNEAL_TRACE_START")) fprintf(stderr, "vecanneal: MPI started\n");
  /* Errors come back to us (we print them with context and abort ourselves). */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  va_proc_init_mpi();
  va_proc_set_command_line(argc, argv);
  check_start_room();
  va_proc_init_hdf5(); /* HDF5's first call: only with the room checked (check_start_room says why) */
  int rc;
  const char *cmd = argc > 1 ? argv[1] : "help";
  if (!strcmp(cmd, "gen")) rc = va_cmd_gen(argc - 2, argv + 2);
  else if (!strcmp(cmd, "compress")) rc = va_cmd_compress(argc - 2, argv + 2);
  else if (!strcmp(cmd, "info")) rc = va_cmd_info(argc - 2, argv + 2);
  else if (!strcmp(cmd, "embed")) rc = va_cmd_embed(argc - 2, argv + 2);
  else if (!strcmp(cmd, "assign")) rc = va_cmd_assign(argc - 2, argv + 2);
  else if (!strcmp(cmd, "add")) rc = va_cmd_add(argc - 2, argv + 2);
  else if (!strcmp(cmd, "search")) rc = va_cmd_search(argc - 2, argv + 2);
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
  } else if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    usage();
    rc = 0;
  } else {
    char err[256];
    snprintf(err, sizeof err, "unknown command '%s' (try vecanneal --help)", cmd);
    rc = va_agree(VA_EXIT_USAGE, err);
  }
  va_exit_all(rc);
}
