/* calib.c: machine constants for docs/memory.md, measured the way vecanneal uses the machine.
 *
 *   mpirun -n 1 calib compute --rows R --k K --d D [--seconds S]
 *       single-threaded sgemm of one assign tile (R x d times d x k, as cpu_assign.c calls it),
 *       plus the streaming read rate of a large float array (the O(n d) passes)
 *   mpirun -n P calib allreduce [--max-bytes B] [--seconds S]
 *       MPI_Allreduce(MPI_DOUBLE, MPI_SUM) time per call for 8 B .. B, for the alpha-beta fit
 *
 * Prints one JSON object on stdout (rank 0). Build (bench/scaling/run.py does it):
 *   mpicc -O2 -o calib calib.c -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas
 */
#include <cblas.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void openblas_set_num_threads(int);

static double now(void) { return MPI_Wtime(); }

static long arg_long(int argc, char **argv, const char *name, long def) {
  for (int i = 2; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return atol(argv[i + 1]);
  return def;
}
static double arg_double(int argc, char **argv, const char *name, double def) {
  for (int i = 2; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return atof(argv[i + 1]);
  return def;
}

static int compute(int argc, char **argv) {
  long rows = arg_long(argc, argv, "--rows", 512), k = arg_long(argc, argv, "--k", 256),
       d = arg_long(argc, argv, "--d", 128);
  double budget = arg_double(argc, argv, "--seconds", 1.0);
  openblas_set_num_threads(1);
  /* Several tiles of X so the sgemm streams X as the assign pass does; A stays in cache. */
  long tiles = 64;
  float *X = malloc(sizeof(float) * (size_t)(tiles * rows * d)), *A = malloc(sizeof(float) * (size_t)(k * d)),
        *C = malloc(sizeof(float) * (size_t)(rows * k));
  for (long i = 0; i < tiles * rows * d; i++) X[i] = (float)((i * 7919) % 1000) * 1e-3f;
  for (long i = 0; i < k * d; i++) A[i] = (float)((i * 104729) % 1000) * 1e-3f;
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    long calls = 0;
    double t0 = now(), t;
    do {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)k, (int)d, -2.0f,
                  X + (calls % tiles) * rows * d, (int)d, A, (int)d, 0.0f, C, (int)k);
      calls++;
      t = now() - t0;
    } while (t < budget / 5);
    double rate = 2.0 * rows * k * d * calls / t;
    if (rate > best) best = rate;
  }
  /* Streaming read: sum of a 256 MiB float array (out of cache), best of 5. */
  size_t m = (size_t)64 << 20;
  float *big = malloc(sizeof(float) * m);
  for (size_t i = 0; i < m; i++) big[i] = (float)(i & 1023);
  double bw = 0, sink = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now(), s[8] = {0};
    for (size_t i = 0; i < m; i += 8)
      for (int l = 0; l < 8; l++) s[l] += big[i + l]; /* 8 independent sums: bandwidth, not add latency */
    double t = now() - t0;
    for (int l = 0; l < 8; l++) sink += s[l];
    if (m * sizeof(float) / t > bw) bw = m * sizeof(float) / t;
  }
  printf(
      "{\"sgemm_flops_per_s\": %.6g, \"sgemm_shape\": [%ld, %ld, %ld], \"read_bytes_per_s\": %.6g, \"_sink\": %.1f}\n",
      best, rows, k, d, bw, sink > 0 ? 1.0 : 0.0);
  free(X);
  free(A);
  free(C);
  free(big);
  return 0;
}

static int allreduce(int argc, char **argv) {
  int rank, P;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  long max_bytes = arg_long(argc, argv, "--max-bytes", 4 << 20);
  double budget = arg_double(argc, argv, "--seconds", 0.2); /* per size */
  double *buf = calloc((size_t)max_bytes / 8 + 1, sizeof(double));
  if (rank == 0) printf("{\"ranks\": %d, \"allreduce\": [", P);
  int first = 1;
  for (long bytes = 8; bytes <= max_bytes; bytes *= 4) {
    int count = (int)(bytes / 8);
    for (int w = 0; w < 3; w++) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    /* Fixed call count agreed by all ranks: estimate from one timed call on rank 0. */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double one = now() - t0;
    MPI_Bcast(&one, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int calls = one > 0 ? (int)(budget / one) : 1000;
    if (calls < 5) calls = 5;
    if (calls > 20000) calls = 20000;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now();
    for (int c = 0; c < calls; c++) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double t = (now() - t0) / calls, tmax;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      printf("%s[%ld, %.6g]", first ? "" : ", ", bytes, tmax);
      first = 0;
    }
  }
  if (rank == 0) printf("], \"columns\": [\"bytes\", \"seconds_per_call\"]}\n");
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, rc = 2;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc >= 2 && !strcmp(argv[1], "compute")) rc = rank == 0 ? compute(argc, argv) : 0;
  else if (argc >= 2 && !strcmp(argv[1], "allreduce")) rc = allreduce(argc, argv);
  else if (rank == 0) fprintf(stderr, "usage: calib compute [--rows R --k K --d D] | allreduce [--max-bytes B]\n");
  fflush(stdout);
  MPI_Finalize();
  return rc;
}
