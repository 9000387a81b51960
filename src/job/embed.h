/* embed.h: the embedding job (`vecanneal embed`), and the same stage as a library call, so that
 * `compress --embed` embeds and compresses in one job with the vectors staying in memory (no
 * intermediate file unless asked for). Options come as a struct: argv lives in cli/ alone. */
#ifndef VECANNEAL_EMBED_H
#define VECANNEAL_EMBED_H
#include <stddef.h>
#include <stdint.h>

#include "backend/encoder.h" /* va_embedded_t */
#include "core/config.h"     /* VA_PATH_MAX */

typedef struct {
  const char *input, *out_spec, *metrics, *model, *weights, *format, *io, *backend, *precision;
  int batch, max_tokens, threads; /* batch 0: the backend's default */
  double progress;                /* seconds between rank 0's progress lines; 0 = none */
  /* derived by va_embed_options_resolve */
  char out_file[VA_PATH_MAX], dataset[256], model_dir[VA_PATH_MAX];
  int jsonl, io_mode;
} va_embed_options_t;

/* The defaults of every option (weights fp32, format/io/backend/precision auto, 256 tokens, 10 s). */
void va_embed_options_default(va_embed_options_t *o);
/* Local: checks the options and derives the rest (output file and dataset, format, transfer mode,
 * model directory: --model, else $VECANNEAL_MODEL, else ./models/all-MiniLM-L6-v2, else the source
 * tree's). 0, or 1 with err set. */
int va_embed_options_resolve(va_embed_options_t *o, char *err, size_t elen);
/* Collective: the embed command with resolved options; returns the exit code every rank agreed on. */
int va_embed_job(const va_embed_options_t *o);

/* Collective: the embedding stage with resolved options; write_out = 0 skips writing out_spec. On
 * success (0) fills out with this rank's block of rows; otherwise returns the exit code every rank
 * agreed on (rank 0 printed the message). */
int va_embed_rows(const va_embed_options_t *o, int write_out, va_embedded_t *out);
#endif
