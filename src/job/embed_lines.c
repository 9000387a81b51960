/* embed_lines.c: a rank's block of an embed job's corpus, read and tokenized (job/embed_lines.h). Each unit of
 * lines is tokenized by one thread with a tokenizer of its own (a tokenizer's scratch is per thread) into
 * its own id buffer; a unit with a bad line stops the pool from taking more, and since units are taken in
 * line order every unit before it is finished by the join, so the first bad line in line order is known
 * then. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <pthread.h> /* the tokenizer's threads */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embed/json.h" /* va_json_parse: JSONL lines */
#include "job/embed_lines.h"
#include "util/util.h" /* va_proc, va_now, va_malloc, VA_FATAL, VA_MPI */

/* --- input --------------------------------------------------------------------------------------- */
int va_lines_read(const char *path, va_lines_t *L, char *err, size_t elen) {
  memset(L, 0, sizeof *L);
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    snprintf(err, elen, "embed: cannot open input '%s': %s", path, strerror(errno));
    return 1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(err, elen, "embed: input '%s' is not a regular file", path);
    close(fd);
    return 1;
  }
  int64_t size = st.st_size, P = va_proc.nranks, r = va_proc.rank;
  int64_t b = size * r / P, e = size * (r + 1) / P;
  /* Move b to a line start: b itself if the byte before it is '\n', else past the next '\n'. */
  int64_t start = b;
  if (b > 0) {
    start = -1;
    char chunk[65536];
    for (int64_t pos = b - 1; pos < size && start < 0;) {
      ssize_t got = pread(fd, chunk, sizeof chunk, (off_t)pos);
      if (got <= 0) {
        if (got < 0) {
          snprintf(err, elen, "embed: cannot read '%s': %s", path, strerror(errno));
          close(fd);
          return 1;
        }
        break;
      }
      for (ssize_t k = 0; k < got; k++)
        if (chunk[k] == '\n') {
          start = pos + k + 1;
          break;
        }
      pos += got;
    }
    if (start < 0) start = size;
  }
  if (start >= e) {
    close(fd);
    return 0;
  } /* no line starts in this rank's range */
  /* Read [start, e) and on to the end of the last line starting before e: the first '\n' at or
   * after byte e-1 (or the end of the file). */
  size_t cap = (size_t)(e - start) + 65536, n = 0, scan = (size_t)(e - 1 - start);
  char *buf = malloc(cap + 1);
  if (!buf) {
    snprintf(err, elen, "embed: out of memory reading %lld bytes of '%s'", (long long)(e - start), path);
    close(fd);
    return 1;
  }
  for (;;) {
    if (n == cap) {
      char *nb = realloc(buf, 2 * cap + 1);
      if (!nb) {
        free(buf);
        snprintf(err, elen, "embed: out of memory reading '%s'", path);
        close(fd);
        return 1;
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t got = pread(fd, buf + n, cap - n, (off_t)(start + (int64_t)n));
    if (got < 0) {
      free(buf);
      snprintf(err, elen, "embed: cannot read '%s': %s", path, strerror(errno));
      close(fd);
      return 1;
    }
    if (got == 0) break;
    n += (size_t)got;
    while (scan < n && buf[scan] != '\n') scan++;
    if (scan < n) {
      n = scan + 1;
      break;
    }
  }
  close(fd);
  L->buf = buf;
  L->len = n;
  /* memchr: the C library's vectorised scan, several times a byte loop's rate on a corpus block */
  int64_t cnt = 0;
  for (const char *p = buf, *end = buf + n; (p = memchr(p, '\n', (size_t)(end - p))); p++) cnt++;
  if (n && buf[n - 1] != '\n') cnt++;
  L->n = cnt;
  L->line = malloc((size_t)(cnt ? cnt : 1) * sizeof *L->line);
  L->line_len = malloc((size_t)(cnt ? cnt : 1) * sizeof *L->line_len);
  if (!L->line || !L->line_len) {
    snprintf(err, elen, "embed: out of memory indexing %lld lines", (long long)cnt);
    return 1;
  }
  char *p = buf, *end = buf + n;
  for (int64_t k = 0; k < cnt; k++) {
    char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) nl = end; /* the last line without its newline */
    L->line[k] = p;
    L->line_len[k] = (size_t)(nl - p);
    p = nl + 1;
  }
  return 0;
}

void va_lines_free(va_lines_t *L) {
  free(L->buf);
  free(L->line);
  free(L->line_len);
  memset(L, 0, sizeof *L); /* freed once: the text goes as soon as the rank's tokenizing has ended */
}

/* One unit of a rank's lines, tokenized by one thread into its own id buffer (off[] relative to it). */
typedef struct {
  int64_t first, end; /* lines [first, end) of the block */
  int32_t *ids;
  int64_t used, cap;
  int64_t truncated, invalid, empty;
  int64_t bad; /* a line that is not a JSON object with a string "text" (then err says which), else -1 */
  char err[600];
} tok_slice_t;

static void tokenize_slice(va_tokenizer_t *tok, const va_tok_spec_t *a, const va_lines_t *L, int64_t row0, int64_t *off,
                           int *lens, tok_slice_t *sl) {
  sl->bad = -1;
  sl->cap = (sl->end - sl->first) * 32 + a->max_tokens;
  sl->ids = malloc((size_t)sl->cap * sizeof *sl->ids);
  if (!sl->ids) VA_FATAL("out of memory for the token ids of %lld lines", (long long)(sl->end - sl->first));
  for (int64_t i = sl->first; i < sl->end; i++) {
    if (sl->used + a->max_tokens > sl->cap) {
      sl->cap = 2 * sl->cap + a->max_tokens;
      int32_t *p = realloc(sl->ids, (size_t)sl->cap * sizeof *sl->ids);
      if (!p) VA_FATAL("out of memory for the token ids of %lld lines", (long long)(sl->end - sl->first));
      sl->ids = p;
    }
    const char *text = L->line[i];
    size_t tlen = L->line_len[i];
    va_json_t *j = NULL;
    if (a->jsonl) {
      char jerr[256];
      int64_t lone = 0;
      if (row0 + i == 0 && tlen >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) {
        text += 3;
        tlen -= 3;
      } /* byte-order mark */
      j = va_json_parse(text, tlen, jerr, sizeof jerr, &lone);
      const va_json_t *tf = va_json_get(j, "text");
      if (!j)
        snprintf(sl->err, sizeof sl->err, "embed: %s line %lld: not valid JSON (%s)", a->input,
                 (long long)(row0 + i + 1), jerr);
      else if (j->type != VA_JSON_OBJ)
        snprintf(sl->err, sizeof sl->err, "embed: %s line %lld: expected a JSON object with a \"text\" field", a->input,
                 (long long)(row0 + i + 1));
      else if (!tf || tf->type != VA_JSON_STR)
        snprintf(sl->err, sizeof sl->err, "embed: %s line %lld: no string field \"text\"", a->input,
                 (long long)(row0 + i + 1));
      if (!j || j->type != VA_JSON_OBJ || !tf || tf->type != VA_JSON_STR) {
        sl->bad = i;
        va_json_free(j);
        return;
      }
      text = tf->str;
      tlen = tf->len;
      sl->invalid += lone;
    }
    va_tok_info_t info;
    int k = va_tok_encode(tok, text, tlen, a->max_tokens, sl->ids + sl->used, &info);
    va_json_free(j);
    if (k < 0) VA_FATAL("out of memory tokenizing line %lld", (long long)(row0 + i + 1));
    off[i] = sl->used;
    lens[i] = k;
    sl->used += k;
    sl->truncated += info.truncated != 0;
    sl->invalid += info.invalid_utf8;
    sl->empty += k == 2 && !info.truncated; /* no word pieces at all (blank, spaces or control characters only) */
  }
}

/* --- the tokenizer's pool -------------------------------------------------------------------- */
#define TOK_UNIT_LINES 1024

typedef struct {
  va_tok_pool_t *pool;
  int index;
} tok_worker_t;
struct va_tok_pool {
  va_tok_spec_t spec;
  const va_lines_t *L;
  int64_t row0;
  va_tokenizer_t *tok; /* the caller's tokenizer, the first thread's */
  int64_t *off;
  int *lens;
  tok_slice_t *unit;
  int64_t nlines, nunits;
  int nthreads, joined;
  pthread_t *thread;
  tok_worker_t *worker;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu: the next unit to take; units [0, done_upto) are finished; the lowest finished unit with
   * a bad line (nunits: none); no unit is taken once halt is set; threads that have returned */
  int64_t next, done_upto, first_bad;
  unsigned char *done;
  int halt, exited;
  double t0, seconds; /* the start, and the wall time until the last unit was finished (under mu) */
};

static void *tok_worker_main(void *arg) {
  const tok_worker_t *w = arg;
  va_tok_pool_t *p = w->pool;
  char terr[512];
  va_tokenizer_t *tk = w->index == 0 ? p->tok : va_tok_load(p->spec.vocab_path, terr, sizeof terr); /* scratch each */
  if (!tk) VA_FATAL("cannot load the vocabulary again for tokenizer thread %d: %s", w->index, terr);
  for (;;) {
    pthread_mutex_lock(&p->mu);
    const int64_t u = p->halt || p->next >= p->nunits ? -1 : p->next++;
    pthread_mutex_unlock(&p->mu);
    if (u < 0) break;
    tokenize_slice(tk, &p->spec, p->L, p->row0, p->off, p->lens, &p->unit[u]);
    pthread_mutex_lock(&p->mu);
    p->done[u] = 1;
    if (p->unit[u].bad >= 0) {
      p->halt = 1;
      if (u < p->first_bad) p->first_bad = u;
    }
    while (p->done_upto < p->nunits && p->done[p->done_upto]) p->done_upto++;
    if (p->done_upto == p->nunits) p->seconds = va_now() - p->t0;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
  if (w->index) va_tok_free(tk);
  pthread_mutex_lock(&p->mu);
  p->exited++;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

va_tok_pool_t *va_tok_pool_start(const va_tok_spec_t *spec, const va_lines_t *L, int64_t row0, va_tokenizer_t *tok,
                                 int64_t *off, int *lens, int threads) {
  va_tok_pool_t *p = va_malloc(sizeof *p, "the tokenizer's pool");
  *p = (va_tok_pool_t){.spec = *spec, .L = L, .row0 = row0, .tok = tok, .off = off, .lens = lens};
  p->nlines = L->n;
  p->nunits = (L->n + TOK_UNIT_LINES - 1) / TOK_UNIT_LINES;
  p->first_bad = p->nunits;
  p->nthreads = (int64_t)threads < p->nunits ? threads : (int)(p->nunits > 0 ? p->nunits : 1);
  p->unit = calloc((size_t)(p->nunits > 0 ? p->nunits : 1), sizeof *p->unit);
  p->done = calloc((size_t)(p->nunits > 0 ? p->nunits : 1), 1);
  p->thread = calloc((size_t)p->nthreads, sizeof *p->thread);
  p->worker = calloc((size_t)p->nthreads, sizeof *p->worker);
  if (!p->unit || !p->done || !p->thread || !p->worker)
    VA_FATAL("out of memory for the tokenizer's %lld units of lines", (long long)p->nunits);
  for (int64_t u = 0; u < p->nunits; u++) {
    p->unit[u].first = u * TOK_UNIT_LINES;
    p->unit[u].end = u + 1 < p->nunits ? (u + 1) * TOK_UNIT_LINES : L->n;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  p->t0 = va_now();
  if (p->nunits == 0) p->seconds = 0;
  int started = 0;
  for (int i = 0; i < p->nthreads; i++) {
    p->worker[i] = (tok_worker_t){p, i};
    if (pthread_create(&p->thread[i], NULL, tok_worker_main, &p->worker[i]) != 0) break;
    started++;
  }
  if (started == p->nthreads) return p;
  /* fewer threads to be had: those that started share the units; with none, this thread takes them all */
  pthread_mutex_lock(&p->mu);
  p->nthreads = started;
  pthread_mutex_unlock(&p->mu);
  if (started == 0) {
    p->nthreads = 1;
    p->joined = 1; /* nothing to join */
    tok_worker_main(&p->worker[0]);
  }
  return p;
}

int va_tok_pool_wait(va_tok_pool_t *p, int64_t upto) {
  const int64_t need = (upto + TOK_UNIT_LINES - 1) / TOK_UNIT_LINES;
  pthread_mutex_lock(&p->mu);
  while (p->done_upto < need && p->first_bad >= need && p->exited < p->nthreads) pthread_cond_wait(&p->cv, &p->mu);
  const int failed = p->first_bad < need || p->done_upto < need;
  pthread_mutex_unlock(&p->mu);
  return failed;
}

/* Whether every thread has returned: all units finished, or the pool halted. */
static int tok_pool_finished(va_tok_pool_t *p) {
  pthread_mutex_lock(&p->mu);
  const int f = p->exited == p->nthreads;
  pthread_mutex_unlock(&p->mu);
  return f;
}

void va_tok_pool_halt(va_tok_pool_t *p) {
  pthread_mutex_lock(&p->mu);
  p->halt = 1;
  pthread_mutex_unlock(&p->mu);
}

static void tok_pool_join(va_tok_pool_t *p) {
  if (p->joined) return;
  for (int i = 0; i < p->nthreads; i++)
    if (pthread_join(p->thread[i], NULL) != 0) VA_FATAL("cannot join tokenizer thread %d", i);
  p->joined = 1;
}

const int32_t *va_tok_pool_ids(const va_tok_pool_t *p, int64_t i) {
  return p->unit[i / TOK_UNIT_LINES].ids + p->off[i];
}

int32_t *va_tok_pool_free(va_tok_pool_t *p, int keep_ids) {
  tok_pool_join(p);
  int32_t *ids = NULL;
  if (keep_ids) {
    int64_t used = 0;
    for (int64_t u = 0; u < p->nunits; u++) used += p->unit[u].used;
    ids = malloc((size_t)(used ? used : 1) * sizeof *ids);
    if (!ids) VA_FATAL("out of memory for the %lld token ids of %lld lines", (long long)used, (long long)p->nlines);
    for (int64_t u = 0, base = 0; u < p->nunits; u++) {
      memcpy(ids + base, p->unit[u].ids, (size_t)p->unit[u].used * sizeof *ids);
      for (int64_t i = p->unit[u].first; i < p->unit[u].end; i++) p->off[i] += base;
      base += p->unit[u].used;
    }
  }
  for (int64_t u = 0; u < p->nunits; u++) free(p->unit[u].ids);
  free(p->unit);
  free(p->done);
  free(p->thread);
  free(p->worker);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
  return ids;
}

static void tok_totals_post(va_tok_totals_t *t, va_tok_pool_t *p) {
  tok_pool_join(p);
  memset(t->local, 0, sizeof t->local);
  for (int64_t u = 0; u < p->nunits; u++) {
    const tok_slice_t *s = &p->unit[u];
    if (s->bad >= 0) t->local[VA_TT_BAD]++;
    t->local[VA_TT_TOKENS] += s->used;
    t->local[VA_TT_TRUNCATED] += s->truncated;
    t->local[VA_TT_INVALID] += s->invalid;
    t->local[VA_TT_EMPTY] += s->empty;
  }
  if (p->first_bad < p->nunits) snprintf(t->err, sizeof t->err, "%s", p->unit[p->first_bad].err);
  VA_MPI(MPI_Iallreduce(t->local, t->glob, VA_TT_N, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &t->req));
  t->posted = 1;
}

int va_tok_totals_poll(va_tok_totals_t *t, va_tok_pool_t *p, int wait) {
  if (t->known) return 1;
  if (!t->posted && (wait || tok_pool_finished(p))) tok_totals_post(t, p);
  if (!t->posted) return 0;
  int flag = 0;
  if (wait) {
    VA_MPI(MPI_Wait(&t->req, MPI_STATUS_IGNORE));
    flag = 1;
  } else VA_MPI(MPI_Test(&t->req, &flag, MPI_STATUS_IGNORE));
  t->known = flag;
  return flag;
}

double va_tok_pool_seconds(va_tok_pool_t *p) {
  pthread_mutex_lock(&p->mu);
  const double s = p->seconds;
  pthread_mutex_unlock(&p->mu);
  return s;
}
