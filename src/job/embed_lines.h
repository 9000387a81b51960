/* embed_lines.h: a rank's block of an embed job's corpus, from the file to token ids. The block is the
 * lines whose first byte lies in the rank's share of the file's bytes (no rank scans the whole file). A
 * pool of threads tokenizes it a unit of 1024 consecutive lines at a time, the units taken in line order,
 * while the caller encodes the windows already tokenized (va_tok_pool_wait waits only for the lines it
 * asks for); the corpus' counts and bad lines are summed over the ranks by a non-blocking allreduce that
 * does not hold up the encoder (va_tok_totals_poll). */
#ifndef VECANNEAL_JOB_EMBED_LINES_H
#define VECANNEAL_JOB_EMBED_LINES_H
#include <mpi.h> /* MPI_Request */
#include <stddef.h>
#include <stdint.h>

#include "embed/tokenizer.h" /* va_tokenizer_t */

typedef struct {
  char *buf; /* the block's bytes */
  size_t len;
  char **line; /* starts within buf */
  size_t *line_len;
  int64_t n;
} va_lines_t;

/* Local: reads the lines whose first byte lies in [size*r/P, size*(r+1)/P) of path. 0, or 1 with the
 * reason in err. */
int va_lines_read(const char *path, va_lines_t *L, char *err, size_t elen);
/* Frees the block (once: L is zeroed). */
void va_lines_free(va_lines_t *L);

/* What the lines hold and how they are tokenized. */
typedef struct {
  const char *input;      /* the corpus' path, for messages */
  const char *vocab_path; /* vocab.txt, from which each thread but the first loads a tokenizer of its own */
  int jsonl;              /* each line a JSON object whose string field "text" is tokenized */
  int max_tokens;         /* ids a line at most, [CLS] and [SEP] included */
} va_tok_spec_t;

typedef struct va_tok_pool va_tok_pool_t;
/* Local: starts min(threads, units) threads tokenizing L (lines numbered from row0 in messages); line i's id
 * count goes to lens[i] and the offset of its ids within its unit to off[i]. tok, the caller's tokenizer,
 * serves the first thread; L, off, lens and tok must outlive the pool. */
va_tok_pool_t *va_tok_pool_start(const va_tok_spec_t *spec, const va_lines_t *L, int64_t row0, va_tokenizer_t *tok,
                                 int64_t *off, int *lens, int threads);
/* Waits until lines [0, upto) are tokenized: 0, or 1 when one of them cannot be (a bad line, or the pool
 * halted before them). */
int va_tok_pool_wait(va_tok_pool_t *p, int64_t upto);
/* The ids of line i, after a wait that covered it (lens[i] of them). */
const int32_t *va_tok_pool_ids(const va_tok_pool_t *p, int64_t i);
/* Takes no further unit (the job stops); the units taken are finished. */
void va_tok_pool_halt(va_tok_pool_t *p);
/* The wall time from the start until the last unit was finished (0 until then). */
double va_tok_pool_seconds(va_tok_pool_t *p);
/* Joins the threads and frees the pool: the units' ids back to back in line order (off[] made relative to
 * the result; the caller frees it), or NULL when keep_ids is 0. */
int32_t *va_tok_pool_free(va_tok_pool_t *p, int keep_ids);

/* The corpus' counts: this rank's (local) and the sums over the ranks (glob, once known). */
enum { VA_TT_BAD, VA_TT_TOKENS, VA_TT_TRUNCATED, VA_TT_INVALID, VA_TT_EMPTY, VA_TT_N };
typedef struct {
  int64_t local[VA_TT_N], glob[VA_TT_N]; /* VA_TT_BAD: lines that are not a JSON object with a string "text" */
  char err[600];                         /* the rank's first bad line */
  MPI_Request req;
  int posted, known; /* posted: the pool has joined (the lines are no longer read); known: glob holds the sums */
} va_tok_totals_t;
/* Collective over the calls of every rank (each rank posts exactly once; zero t first): posts the rank's
 * counts once its pool has finished (wait: whatever its state, joining it) and tests (wait: waits) for the
 * sums. 1 once they are known. */
int va_tok_totals_poll(va_tok_totals_t *t, va_tok_pool_t *p, int wait);

#endif
