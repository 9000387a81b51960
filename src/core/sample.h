/* sample.h: evenly spread samples of the rows: `compress --train-sample N` (the loop's rows) and
 * kmeans||'s rows (core/init.c, kmeans_sample). Sample row i (0 <= i < N) is source row floor(i n / N),
 * N rows spread evenly over the whole input. The choice depends on (n, N) alone, so every
 * rank count trains on the same rows, and a sample row's number i plays the part of the global row in
 * the loop's counter-based draws (util/rng.h): with N = n the sample is the input. */
#ifndef VECANNEAL_CORE_SAMPLE_H
#define VECANNEAL_CORE_SAMPLE_H
#include <stdint.h>

/* The sample rows inside the source rows [row0, row0 + count): sample numbers [*s0, *s0 + *scount). */
void va_sample_range(int64_t n, int64_t N, int64_t row0, int64_t count, int64_t *s0, int64_t *scount);
/* The source row of sample row i. */
int64_t va_sample_row(int64_t n, int64_t N, int64_t i);
/* Copies the sample rows of a block (rows [row0, ..) of X, d floats each) to out, in order: sample row
 * s0 + q to row q of out (scount rows, from va_sample_range). */
void va_sample_gather(float *out, const float *X, int64_t d, int64_t n, int64_t N, int64_t row0, int64_t s0,
                      int64_t scount);
#endif
