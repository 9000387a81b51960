/* comm.c: MPI allreduce wrappers, timed and chunked below the int count limit of MPI. */
#include "dist/comm.h"

#include "metrics.h"
#include "util.h"

static void allreduce(void *buf, int64_t count, MPI_Datatype type, size_t elem, MPI_Op op) {
  double t0 = va_now();
  const int64_t max_chunk = (int64_t)1 << 30;
  for (int64_t off = 0; off < count; off += max_chunk) {
    int64_t c = count - off < max_chunk ? count - off : max_chunk;
    VA_MPI(MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * (int64_t)elem, (int)c, type, op, MPI_COMM_WORLD));
  }
  va_metrics_add_bytes((double)count * (double)elem);
  va_phase_add(VA_PH_ALLREDUCE, va_now() - t0);
}

void va_allreduce_sum_f64(double *buf, int64_t count) { allreduce(buf, count, MPI_DOUBLE, sizeof(double), MPI_SUM); }
void va_allreduce_sum_f32(float *buf, int64_t count) { allreduce(buf, count, MPI_FLOAT, sizeof(float), MPI_SUM); }
void va_allreduce_max_f32(float *buf, int64_t count) { allreduce(buf, count, MPI_FLOAT, sizeof(float), MPI_MAX); }
void va_allreduce_min_i64(int64_t *buf, int64_t count) { allreduce(buf, count, MPI_INT64_T, sizeof(int64_t), MPI_MIN); }
void va_allreduce_sum_i64(int64_t *buf, int64_t count) { allreduce(buf, count, MPI_INT64_T, sizeof(int64_t), MPI_SUM); }
