/* gen.h: the gen job (`vecanneal gen`): synthetic datasets in the ann-benchmarks layout. Options come
 * as a struct; argv lives in cli/ alone (cli/gen.c). */
#ifndef VECANNEAL_JOB_GEN_H
#define VECANNEAL_JOB_GEN_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
  const char *out, *kind, *dtype, *distance, *io;
  int64_t n, d, clusters, test;
  int64_t neighbors; /* exact neighbours of each /test row in /train to write (/neighbors, /distances); 0: none */
  double spread, outliers;
  uint64_t seed;
  int half, io_mode, cosine; /* derived by va_gen_options_resolve (cosine: distance angular or cosine) */
} va_gen_options_t;

/* gauss, float32, euclidean, io auto, n 100000, d 128, 100 clusters, no /test, spread 0.5, seed 1;
 * neighbors -1: 100 (at most n) when there is a /test, resolved by va_gen_options_resolve. */
void va_gen_options_default(va_gen_options_t *g);
/* Local: checks the options and derives the rest; 0, or 1 with err set. */
int va_gen_options_resolve(va_gen_options_t *g, char *err, size_t len);
/* Collective: writes the file; returns the exit code every rank agreed on. */
int va_gen_job(const va_gen_options_t *g);
#endif
