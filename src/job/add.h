/* add.h: the add job (`vecanneal add`): rows appended to an index without retraining, into a new index
 * file. Options come as a struct; argv lives in cli/add.c. */
#ifndef VECANNEAL_JOB_ADD_H
#define VECANNEAL_JOB_ADD_H
#include "core/config.h" /* va_config_t */

typedef struct {
  va_config_t cfg;   /* input, input_format, metrics and the execution keys */
  const char *index; /* --index: read, never written */
  const char *out;   /* --out: the new index */
} va_add_options_t;

/* Collective: runs the job; returns the exit code every rank agreed on (docs/architecture.md). */
int va_add_job(const va_add_options_t *o);
#endif
