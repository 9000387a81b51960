/* compress.h: the compress job (`vecanneal compress`): from options to the index. Options come as a
 * struct; argv lives in cli/ alone (cli/compress.c). */
#ifndef VECANNEAL_JOB_COMPRESS_H
#define VECANNEAL_JOB_COMPRESS_H
#include "core/config.h" /* va_config_t */

typedef struct {
  va_config_t cfg;         /* resolved: defaults, preset, config file, --set, shorthands */
  const char *config_file; /* the config file read (an input the outputs are checked against), or NULL */
  const char *resume_path; /* --resume CKPT, or NULL */
  const char *embed_corpus, *embed_model, *embed_out; /* --embed, --embed-model, --embed-out, or NULL */
} va_compress_options_t;

/* Collective: runs the job; returns the exit code every rank agreed on (docs/architecture.md). */
int va_compress_job(const va_compress_options_t *o);
#endif
