/* test_pq.c: residual product quantization (docs/codes.md).
 * Without arguments, the CPU kernels of cpu/pq.h against plain references on deterministic random data:
 * - the subspace split: consecutive column ranges covering d, the first d mod M one column wider;
 * - the encoder against the double reference: the same codes except at near-ties (a differing code's
 *   reference distance within 1e-5 (|x|^2 + |c|^2) of the reference's best), each row's error bitwise the
 *   reference's where every code agrees, and equal to the squared distance to the decoded residual;
 *   bitwise the same for 1 and 3 threads; ties to the lower code (duplicated centroids);
 * With --index INDEX.h5 --input FILE:DATASET (under mpirun, any rank count): an index that compress
 * --codes pq wrote, read back through io/index_read.h (codebooks, every rank's slice of /pq/codes): the
 * source rows put in the index's frame, less their anchors, encoded again give the stored codes exactly,
 * and their decoded error over every row matches the /pq error attribute (1e-9 relative).
 * Exits non-zero on any failure. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/pq.h"
#include "io/h5io.h"
#include "io/index_read.h"
#include "job/nearest.h" /* va_rows_to_frame */
#include "util/rng.h"
#include "util/util.h"

#include "../check.h" /* failures, CHECK */

static void test_split(void) {
  for (int64_t d = 1; d <= 40; d++)
    for (int64_t M = 1; M <= d; M++) {
      int64_t next = 0, widest = 0;
      for (int64_t m = 0; m < M; m++) {
        int64_t col0, width;
        va_pq_subspace(d, M, m, &col0, &width);
        CHECK(col0 == next, "d %lld M %lld: subspace %lld starts at %lld, not %lld", (long long)d, (long long)M,
              (long long)m, (long long)col0, (long long)next);
        CHECK(width == d / M + (m < d % M), "d %lld M %lld: subspace %lld is %lld wide", (long long)d, (long long)M,
              (long long)m, (long long)width);
        next = col0 + width;
        widest = width > widest ? width : widest;
      }
      CHECK(next == d && widest == va_pq_dsub_max(d, M), "d %lld M %lld: the subspaces cover %lld columns",
            (long long)d, (long long)M, (long long)next);
    }
}

/* Codebooks of the cpu/pq.h layout, each centroid near a residual row (so that near-ties occur), zero
 * past a subspace's width. */
static float *random_codebooks(const float *R, int64_t n, int64_t d, int64_t M, int64_t ksub, uint64_t seed) {
  const int64_t dmax = va_pq_dsub_max(d, M);
  float *C = calloc((size_t)(M * ksub * dmax), sizeof(float));
  for (int64_t m = 0; m < M; m++) {
    int64_t col0, width;
    va_pq_subspace(d, M, m, &col0, &width);
    for (int64_t j = 0; j < ksub; j++) {
      const int64_t row = (int64_t)(va_rand_u64(seed, 5, (uint64_t)(m * ksub + j), 0) % (uint64_t)n);
      for (int64_t t = 0; t < width; t++)
        C[(m * ksub + j) * dmax + t] =
            R[row * d + col0 + t] + (float)(0.05 * va_rand_normal(seed, 6, (uint64_t)(m * ksub + j), (uint64_t)t));
    }
  }
  return C;
}

static double ref_distance(const float *x, const float *c, int64_t width) {
  double s = 0;
  for (int64_t t = 0; t < width; t++) s += ((double)x[t] - c[t]) * ((double)x[t] - c[t]);
  return s;
}

static void test_encode(int64_t n, int64_t d, int64_t M, int64_t ksub, uint64_t seed) {
  const int64_t dmax = va_pq_dsub_max(d, M);
  float *R = malloc((size_t)(n * d) * sizeof(float)), *dec = malloc((size_t)d * sizeof(float));
  for (int64_t i = 0; i < n * d; i++) R[i] = (float)va_rand_normal(seed, 4, (uint64_t)i, 0);
  float *C = random_codebooks(R, n, d, M, ksub, seed);
  uint8_t *fast = malloc((size_t)(n * M)), *fast3 = malloc((size_t)(n * M)), *ref = malloc((size_t)(n * M));
  double *e_fast = malloc((size_t)n * sizeof(double)), *e_fast3 = malloc((size_t)n * sizeof(double)),
         *e_ref = malloc((size_t)n * sizeof(double));
  va_pq_encode(R, n, d, M, ksub, C, 1, fast, e_fast);
  va_pq_encode(R, n, d, M, ksub, C, 3, fast3, e_fast3);
  va_pq_encode_ref(R, n, d, M, ksub, C, ref, e_ref);
  CHECK(!memcmp(fast, fast3, (size_t)(n * M)) && !memcmp(e_fast, e_fast3, (size_t)n * sizeof(double)),
        "d %lld M %lld: 3 threads encode otherwise than 1", (long long)d, (long long)M);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; i++) {
    int row_agrees = 1;
    for (int64_t m = 0; m < M; m++) {
      if (fast[i * M + m] == ref[i * M + m]) continue;
      row_agrees = 0;
      differ++;
      int64_t col0, width;
      va_pq_subspace(d, M, m, &col0, &width);
      const float *x = R + i * d + col0, *cf = C + (m * ksub + fast[i * M + m]) * dmax,
                  *cr = C + (m * ksub + ref[i * M + m]) * dmax;
      const double df = ref_distance(x, cf, width), dr = ref_distance(x, cr, width);
      double x2 = 0, c2 = 0;
      for (int64_t t = 0; t < width; t++) {
        x2 += (double)x[t] * x[t];
        c2 += (double)cf[t] * cf[t];
      }
      CHECK(df - dr <= 1e-5 * (x2 + c2) && dr <= df,
            "d %lld M %lld row %lld subspace %lld: code %u (distance %.9g) where the reference has %u (%.9g)",
            (long long)d, (long long)M, (long long)i, (long long)m, fast[i * M + m], df, ref[i * M + m], dr);
    }
    if (row_agrees)
      CHECK(e_fast[i] == e_ref[i], "d %lld M %lld row %lld: error %.17g, reference %.17g", (long long)d, (long long)M,
            (long long)i, e_fast[i], e_ref[i]);
    va_pq_decode(fast + i * M, d, M, ksub, C, dec);
    double e = 0;
    for (int64_t m = 0; m < M; m++) {
      int64_t col0, width;
      va_pq_subspace(d, M, m, &col0, &width);
      e += ref_distance(R + i * d + col0, dec + col0, width);
    }
    CHECK(fabs(e - e_fast[i]) <= 1e-12 * (e + 1e-30), "d %lld M %lld row %lld: error %.17g, decoded %.17g",
          (long long)d, (long long)M, (long long)i, e_fast[i], e);
  }
  CHECK(differ * 100 <= n * M, "d %lld M %lld: %lld of %lld codes differ from the reference", (long long)d,
        (long long)M, (long long)differ, (long long)(n * M));
  printf("encode n %lld d %lld M %lld ksub %lld: %lld of %lld codes differ from the reference (near-ties)\n",
         (long long)n, (long long)d, (long long)M, (long long)ksub, (long long)differ, (long long)(n * M));
  /* Ties: every centroid of subspace 0 a copy of centroid 5 from code 5 on; code 5 must win over 6.. */
  for (int64_t j = 0; j < ksub; j++) memcpy(C + j * dmax, C + (j < 5 ? j : 5) * dmax, (size_t)dmax * sizeof(float));
  for (int64_t j = 0; j < 5; j++)
    for (int64_t t = 0; t < dmax; t++) C[j * dmax + t] = 1e3f; /* far from every row */
  va_pq_encode(R, n, d, M, ksub, C, 2, fast, NULL);
  va_pq_encode_ref(R, n, d, M, ksub, C, ref, NULL);
  for (int64_t i = 0; i < n; i++)
    CHECK(fast[i * M] == 5 && ref[i * M] == 5, "d %lld M %lld row %lld: tie went to %u (reference %u), not 5",
          (long long)d, (long long)M, (long long)i, fast[i * M], ref[i * M]);
  free(R);
  free(dec);
  free(C);
  free(fast);
  free(fast3);
  free(ref);
  free(e_fast);
  free(e_fast3);
  free(e_ref);
}

/* A float64 attribute of /pq (rank 0 reads, every rank gets it). */
static double pq_attr(const char *path, const char *name) {
  double v = NAN;
  if (va_proc.rank == 0) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = f >= 0 ? H5Aopen_by_name(f, "/pq", name, H5P_DEFAULT, H5P_DEFAULT) : -1;
    if (a < 0 || H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0) v = NAN;
    if (a >= 0) H5Aclose(a);
    if (f >= 0) H5Fclose(f);
  }
  MPI_Bcast(&v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return v;
}

static void check_index(const char *index, const char *input) {
  va_index_data_t ix;
  if (va_index_read(index, VA_INDEX_FRAME, &ix)) {
    failures++;
    return;
  }
  CHECK(ix.pq_m > 0, "%s has no codes", index);
  if (ix.pq_m <= 0) return;
  va_input_t in;
  va_input_open(input, &in);
  int64_t row0, count;
  va_shard_range(ix.n, va_proc.rank, va_proc.nranks, &row0, &count);
  const int64_t d = ix.d, M = ix.pq_m;
  float *X = malloc((size_t)((count > 0 ? count : 1) * d) * sizeof(float));
  va_read_result_t res = {-1, 0};
  va_input_read(&in, row0, count, X, (size_t)64 << 20, VA_IO_AUTO, 1, &res);
  va_rows_to_frame(X, count, d, ix.cosine, ix.center, 1);
  uint32_t *assign = malloc((size_t)(count > 0 ? count : 1) * sizeof(uint32_t));
  uint8_t *stored = malloc((size_t)((count > 0 ? count : 1) * M)),
          *again = malloc((size_t)((count > 0 ? count : 1) * M));
  double *err = malloc((size_t)(count > 0 ? count : 1) * sizeof(double));
  if (va_index_read_assignments(index, &ix, row0, count, assign) ||
      va_index_read_codes(index, &ix, row0, count, stored)) {
    failures++;
    return;
  }
  for (int64_t i = 0; i < count; i++)
    for (int64_t t = 0; t < d; t++) X[i * d + t] = X[i * d + t] - ix.frame[(int64_t)assign[i] * d + t];
  va_pq_encode(X, count, d, M, ix.pq_ksub, ix.pq_codebooks, 1, again, err);
  int64_t differ = 0;
  for (int64_t e = 0; e < count * M; e++) differ += stored[e] != again[e];
  double sum = 0;
  for (int64_t i = 0; i < count; i++) sum += err[i];
  MPI_Allreduce(MPI_IN_PLACE, &differ, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double error = pq_attr(index, "error"), variance = pq_attr(index, "variance");
  const double mine = sum / (double)ix.n / variance;
  CHECK(differ == 0, "%s: %lld codes differ from the rows encoded again", index, (long long)differ);
  CHECK(fabs(mine - error) <= 1e-9 * error, "%s: the rows' decoded error is %.17g of the variance, /pq error %.17g",
        index, mine, error);
  if (va_proc.rank == 0)
    printf("index %s on %d rank(s): %lld x %lld codes encoded again alike, error %.6g of the variance (stored %.6g)\n",
           index, va_proc.nranks, (long long)ix.n, (long long)M, mine, error);
  free(X);
  free(assign);
  free(stored);
  free(again);
  free(err);
  va_index_data_free(&ix);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  va_proc_init();
  if (argc == 5 && !strcmp(argv[1], "--index") && !strcmp(argv[3], "--input")) {
    check_index(argv[2], argv[4]);
  } else {
    test_split();
    test_encode(3000, 30, 8, 256, 1);   /* d not a multiple of M: 6 subspaces of 4 columns, 2 of 3 */
    test_encode(2000, 128, 16, 256, 2); /* 8 columns each */
    test_encode(1500, 7, 7, 256, 3);    /* one column each */
    test_encode(1000, 5, 1, 256, 4);    /* one subspace of every column */
    test_encode(1000, 12, 3, 16, 5);    /* fewer centroids than 256 */
  }
  int any = failures;
  MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (va_proc.rank == 0) printf("%s: %d failure(s)\n", any ? "FAILED" : "OK", any);
  MPI_Finalize();
  return any ? 1 : 0;
}
