/* metrics.h: per-phase wall-clock accounting and the --metrics JSON (min/mean/max over ranks).
 * Collectives time themselves into VA_PH_ALLREDUCE; a phase bracket (va_tick/va_tock) subtracts the
 * collective time spent inside it, so the phases add up without double counting. */
#ifndef VECANNEAL_METRICS_H
#define VECANNEAL_METRICS_H
#include <stdint.h>

#include "core/config.h"

enum {
  VA_PH_READ,
  VA_PH_INIT,
  VA_PH_ASSIGN,
  VA_PH_REDUCE,
  VA_PH_ALLREDUCE,
  VA_PH_UPDATE,
  VA_PH_MAINT,
  VA_PH_WRITE,
  VA_NPHASE
};
extern const char *const va_phase_names[VA_NPHASE];

typedef struct {
  double t0, comm0;
} va_tick_t;
va_tick_t va_tick(void);
void va_tock(int phase, va_tick_t t);
void va_phase_add(int phase, double seconds);
double va_phase_total(int phase);
/* Seconds spent in collectives so far (used by va_tock). */
double va_comm_seconds(void);
void va_metrics_add_bytes(double bytes);

typedef struct {
  int64_t n, d, k_initial, k_final, iterations;
  double loop_seconds, total_seconds, final_energy;
  /* this rank's seconds in collectives during the loop (the allreduce phase less the initialisation's
   * and the final pass's) */
  double loop_allreduce_seconds;
  const char *backend;
  const char *device; /* this rank's device for the layout: "cpu", or the GPU (va_backend_device_name) */
  /* CUDA backend with out-of-core rows: bytes per chunk and rows copied host to device (this rank);
   * 0 otherwise */
  double stream_chunk_bytes, stream_copied_bytes;
  /* CUDA backend: the GPU memory this rank's job held at the loop's end and at its fullest (compress.c
   * gpu_memory_used); 0 otherwise */
  double gpu_memory_loop_bytes, gpu_memory_peak_bytes;
  /* codes = pq (job/codes.h): subspaces (0: no codes), bits, bytes per vector, its share of the raw
   * float32 rows, the reconstruction error with the codes and with the anchors alone (relative to the
   * variance), the codebooks' and the encoding's seconds (rank 0) */
  int64_t codes_m, codes_bits;
  double codes_bytes_per_vector, codes_compression_ratio, codes_error, codes_anchor_error, codes_train_seconds,
      codes_encode_seconds;
} va_run_summary_t;
/* Collective: reduces phase times and peak memory over ranks; rank 0 writes path (if non-empty) through
 * its temporary file (files.h). Returns 0, or VA_EXIT_OUTPUT agreed on every rank with the system's
 * reason printed once. */
int va_metrics_write(const char *path, const va_run_summary_t *s, const va_config_t *cfg);
#endif
