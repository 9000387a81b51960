/* embed.h: the embedding stage as a library call, so that `compress --embed` embeds and compresses
 * in one job with the vectors staying in memory (no intermediate file unless asked for). */
#ifndef VECANNEAL_EMBED_H
#define VECANNEAL_EMBED_H
#include <stdint.h>

typedef struct {
  float *emb; /* n_local x d, unit rows, input order; the caller frees; NULL when on the device */
  int64_t n, row0, n_local;
  int d;
  float *demb; /* the same rows in GPU memory of `device` instead (a GPU encoder and nothing to
                * write): the caller adopts them (va_cuda_adopt_rows) or takes them to the
                * host (va_embedded_to_host), and frees them with va_cuda_free_device */
  int device;
} va_embedded_t;

/* The rows to host memory (emb) if they are on the device; frees the device copy. */
void va_embedded_to_host(va_embedded_t *e);

/* Collective: runs `vecanneal embed` with these arguments (its CLI: --input, --out, --model, --batch,
 * ...); write_out = 0 skips writing --out. On success (0) fills out with this rank's block of rows;
 * otherwise returns the exit code every rank agreed on (rank 0 printed the message). */
int va_embed_rows(int argc, char **argv, int write_out, va_embedded_t *out);
#endif
