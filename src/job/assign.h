/* assign.h: the assign job (`vecanneal assign`): new vectors to their nearest anchors of an index,
 * sharded over ranks, written to HDF5. Options come as a struct; argv lives in cli/assign.c. */
#ifndef VECANNEAL_JOB_ASSIGN_H
#define VECANNEAL_JOB_ASSIGN_H
#include "core/config.h" /* va_config_t */

typedef struct {
  va_config_t cfg;   /* input, input_format, metrics and the execution keys (threads, io, read_chunk_mb, backend) */
  const char *index; /* --index */
  const char *out;   /* --out FILE.h5[:/DATASET] (DATASET defaults to /assign) */
} va_assign_options_t;

/* Collective: runs the job; returns the exit code every rank agreed on (docs/architecture.md). */
int va_assign_job(const va_assign_options_t *o);
#endif
