/* pq.h: the CPU kernels of residual product quantization (docs/codes.md): how d columns split into M
 * subspaces, and each row's code per subspace, the nearest of ksub centroids (ties to the lower code),
 * with the squared error of the decoded residual. Codebooks are laid out M x ksub x dsub_max (float32):
 * centroid c of subspace m starts at codebooks + (m ksub + c) dsub_max, and its values past the
 * subspace's own width are zero. */
#ifndef VECANNEAL_CPU_PQ_H
#define VECANNEAL_CPU_PQ_H
#include <stdint.h>

/* Subspace m of M over d columns: columns [*col0, *col0 + *width). Every subspace has d / M columns but
 * the first d mod M, which have one more; 1 <= M <= d. */
void va_pq_subspace(int64_t d, int64_t M, int64_t m, int64_t *col0, int64_t *width);
/* The widest subspace: ceil(d / M). */
int64_t va_pq_dsub_max(int64_t d, int64_t M);

/* The codebooks transposed into d x ksub (malloc'ed): column t of the subspace holding column t, one value
 * per centroid, at + t ksub; the encoder's and the search tables' inner loops run over the centroids. */
float *va_pq_transpose(const float *codebooks, int64_t d, int64_t M, int64_t ksub);
/* Codes of n residual rows R (n x d, row-major) into codes (n x M, one byte each: ksub <= 256). Each
 * code is the nearest centroid, its distance summed in float32 over the subspace's columns in order
 * and the lowest code kept on ties; the rows are spread over `threads` threads, and the result does not
 * depend on their number. err, when not NULL, receives each row's squared error ||r - decoded||^2 summed
 * in double over the columns in order. */
void va_pq_encode(const float *R, int64_t n, int64_t d, int64_t M, int64_t ksub, const float *codebooks, int threads,
                  uint8_t *codes, double *err);
/* Plain reference: every distance in double, ties to the lowest code; err as va_pq_encode's. */
void va_pq_encode_ref(const float *R, int64_t n, int64_t d, int64_t M, int64_t ksub, const float *codebooks,
                      uint8_t *codes, double *err);
/* The decoded residual of one row: out (d) <- the centroids its M codes name. */
void va_pq_decode(const uint8_t *code, int64_t d, int64_t M, int64_t ksub, const float *codebooks, float *out);
#endif
