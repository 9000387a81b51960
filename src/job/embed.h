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
  /* FILE.h5[:/DATASET] for the token ids encoded (docs/embed.md); NULL: none. Without out_spec the
   * command only tokenizes (no weights, no encoder). Written by va_embed_job only: va_embed_rows
   * ignores it, as its caller checks its own outputs. */
  const char *token_ids_out;
  int batch, max_tokens, threads; /* batch 0: the backend's default */
  double progress;                /* seconds between rank 0's progress lines; 0 = none */
  /* derived by va_embed_options_resolve; ids_lengths and ids_offsets are the ids dataset's siblings */
  char out_file[VA_PATH_MAX], dataset[256], model_dir[VA_PATH_MAX];
  char ids_file[VA_PATH_MAX], ids_dataset[256], ids_lengths[272], ids_offsets[272];
  int jsonl, io_mode;
} va_embed_options_t;

/* The defaults of every option (weights fp32, format/io/backend/precision auto, 256 tokens, 10 s). */
void va_embed_options_default(va_embed_options_t *o);
/* Local: checks the options and derives the rest (output files and datasets, format, transfer mode,
 * model directory: --model, else $VECANNEAL_MODEL, else ./models/all-MiniLM-L6-v2, else the source
 * tree's). out_spec or token_ids_out is required. 0, or 1 with err set. */
int va_embed_options_resolve(va_embed_options_t *o, char *err, size_t elen);
/* Collective: the embed command with resolved options (the vectors, the token ids, or both); returns
 * the exit code every rank agreed on. */
int va_embed_job(const va_embed_options_t *o);

/* Collective: the embedding stage with resolved options; write_out = 0 skips writing out_spec. On
 * success (0) fills out with this rank's block of rows; otherwise returns the exit code every rank
 * agreed on (rank 0 printed the message). */
int va_embed_rows(const va_embed_options_t *o, int write_out, va_embedded_t *out);
#endif
