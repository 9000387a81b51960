/* test_idcheck.c: checks the token ids file of `vecanneal embed --token-ids-out` against the reference
 * ids of Hugging Face's fast tokenizer (tests/data/embed_corpus_ids.bin.gz, the ids embed_tokenizer
 * compares with), for a sample of the committed corpus: every STEP-th line (lines 0, STEP, 2 STEP, ...).
 *   test_idcheck lines DATA_DIR STEP OUT.txt
 *       writes the sample's lines to OUT.txt (one per line, bytes as in the corpus) and prints their count
 *   test_idcheck check IDS.h5 DATASET DATA_DIR STEP MAX_TOKENS
 *       DATASET is int32 and 1-D, its siblings 'lengths' (int32) and 'offsets' (int64) hold one entry per
 *       sample line, offsets run back to back from 0 over all of DATASET, the file's attributes say
 *       lines, tokens and max_tokens, and line i's ids equal the reference's truncated to MAX_TOKENS
 *       (<= 256, the reference's truncation): [CLS], the first MAX_TOKENS - 2 word pieces, [SEP].
 * Exits 0 when all holds, 1 naming the first differences, 2 on bad usage. */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

/* The sample: every step-th line of the corpus and its reference ids (little-endian uint16 each). */
typedef struct {
  size_t n;
  char **line;
  size_t *len;
  const unsigned char **ref; /* per sample line: its ids */
  unsigned *nref;
  char *corpus, *idsbuf; /* owners of the memory above */
} sample_t;

static int load_sample(const char *data, long step, sample_t *s) {
  char path[4096];
  size_t clen, ilen;
  snprintf(path, sizeof path, "%s/embed_corpus.txt.gz", data);
  s->corpus = fx_read(path, &clen);
  snprintf(path, sizeof path, "%s/embed_corpus_ids.bin.gz", data);
  s->idsbuf = fx_read(path, &ilen);
  char **line;
  size_t *len;
  size_t n = fx_lines(s->corpus, clen, &line, &len);
  uint32_t nref;
  if (ilen < 12 || memcmp(s->idsbuf, "VATOKID1", 8)) {
    fprintf(stderr, "FAIL: bad ids fixture %s\n", path);
    return 1;
  }
  memcpy(&nref, s->idsbuf + 8, 4);
  if (nref != n) {
    fprintf(stderr, "FAIL: corpus has %zu lines, reference ids %u\n", n, nref);
    return 1;
  }
  s->n = (n + (size_t)step - 1) / (size_t)step;
  s->line = malloc(s->n * sizeof *s->line);
  s->len = malloc(s->n * sizeof *s->len);
  s->ref = malloc(s->n * sizeof *s->ref);
  s->nref = malloc(s->n * sizeof *s->nref);
  if (!s->line || !s->len || !s->ref || !s->nref) {
    fprintf(stderr, "FAIL: out of memory\n");
    return 1;
  }
  const unsigned char *p = (const unsigned char *)s->idsbuf + 12, *end = (const unsigned char *)s->idsbuf + ilen;
  for (size_t i = 0; i < n; i++) {
    if (p + 2 > end) {
      fprintf(stderr, "FAIL: reference ids end early\n");
      return 1;
    }
    unsigned m = p[0] | p[1] << 8;
    if (i % (size_t)step == 0) {
      size_t j = i / (size_t)step;
      s->line[j] = line[i];
      s->len[j] = len[i];
      s->ref[j] = p + 2;
      s->nref[j] = m;
    }
    p += 2 + 2 * m;
  }
  free(line);
  free(len);
  return 0;
}

/* A whole 1-D dataset as memtype (elem bytes each), its length in *n; NULL after a message. */
static void *read_1d(hid_t f, const char *name, hid_t memtype, size_t elem, H5T_class_t cls, size_t fsize, hsize_t *n) {
  hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
  if (ds < 0) {
    fprintf(stderr, "FAIL: dataset %s missing\n", name);
    return NULL;
  }
  hid_t sp = H5Dget_space(ds), ty = H5Dget_type(ds);
  void *buf = NULL;
  if (H5Sget_simple_extent_ndims(sp) != 1 || H5Sget_simple_extent_dims(sp, n, NULL) < 0)
    fprintf(stderr, "FAIL: %s is not 1-D\n", name);
  else if (H5Tget_class(ty) != cls || H5Tget_size(ty) != fsize)
    fprintf(stderr, "FAIL: %s is not a %zu-byte integer\n", name, fsize);
  else if (!(buf = malloc(*n * elem + 1))) fprintf(stderr, "FAIL: out of memory for %s\n", name);
  else if (H5Dread(ds, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
    fprintf(stderr, "FAIL: cannot read %s\n", name);
    free(buf);
    buf = NULL;
  }
  H5Tclose(ty);
  H5Sclose(sp);
  H5Dclose(ds);
  return buf;
}

static long long attr_i64(hid_t f, const char *name) {
  long long v = -1;
  hid_t a = H5Aopen(f, name, H5P_DEFAULT);
  if (a < 0 || H5Aread(a, H5T_NATIVE_LLONG, &v) < 0) v = -1;
  if (a >= 0) H5Aclose(a);
  return v;
}

static int check(const char *file, const char *dataset, const sample_t *s, int max_tokens) {
  char lname[512], oname[512];
  const char *slash = strrchr(dataset, '/');
  int group = slash ? (int)(slash + 1 - dataset) : 0;
  snprintf(lname, sizeof lname, "%.*slengths", group, dataset);
  snprintf(oname, sizeof oname, "%.*soffsets", group, dataset);
  hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    fprintf(stderr, "FAIL: cannot open %s\n", file);
    return 1;
  }
  hsize_t nids = 0, nlen = 0, noff = 0;
  int32_t *ids = read_1d(f, dataset, H5T_NATIVE_INT32, 4, H5T_INTEGER, 4, &nids);
  int32_t *lens = read_1d(f, lname, H5T_NATIVE_INT32, 4, H5T_INTEGER, 4, &nlen);
  int64_t *offs = read_1d(f, oname, H5T_NATIVE_INT64, 8, H5T_INTEGER, 8, &noff);
  int fails = 0;
  if (!ids || !lens || !offs) fails++;
  else if (nlen != s->n || noff != s->n) {
    fprintf(stderr, "FAIL: %s has %llu and %s %llu entries, expected %zu (one per line)\n", lname,
            (unsigned long long)nlen, oname, (unsigned long long)noff, s->n);
    fails++;
  }
  long long a_lines = attr_i64(f, "lines"), a_tokens = attr_i64(f, "tokens"), a_max = attr_i64(f, "max_tokens");
  if (!fails && (a_lines != (long long)s->n || a_tokens != (long long)nids || a_max != max_tokens)) {
    fprintf(stderr, "FAIL: attributes lines %lld tokens %lld max_tokens %lld, expected %zu %llu %d\n", a_lines,
            a_tokens, a_max, s->n, (unsigned long long)nids, max_tokens);
    fails++;
  }
  size_t bad = 0, full = 0;
  int64_t next = 0;
  for (size_t i = 0; !fails && i < s->n; i++) {
    if (offs[i] != next || lens[i] < 0 || (uint64_t)(offs[i] + lens[i]) > nids) {
      fprintf(stderr, "FAIL: line %zu: offset %lld length %d, expected offset %lld within %llu ids\n", i,
              (long long)offs[i], lens[i], (long long)next, (unsigned long long)nids);
      fails++;
      break;
    }
    next = offs[i] + lens[i];
    /* The reference at max_tokens: [CLS] + pieces[: max_tokens - 2] + [SEP]. */
    unsigned m = s->nref[i], want = m <= (unsigned)max_tokens ? m : (unsigned)max_tokens;
    full += m >= (unsigned)max_tokens; /* truncated here (or by the reference, at 256) */
    int same = lens[i] == (int)want;
    for (unsigned j = 0; same && j < want; j++) {
      unsigned r = j + 1 == want ? m - 1 : j; /* the last id is [SEP], the reference's last */
      same = ids[offs[i] + j] == (int32_t)(s->ref[i][2 * r] | s->ref[i][2 * r + 1] << 8);
    }
    if (!same) {
      if (bad < 5) {
        fprintf(stderr, "MISMATCH sample line %zu: '%.*s'\n  file (%d):", i, (int)(s->len[i] > 120 ? 120 : s->len[i]),
                s->line[i], lens[i]);
        for (int j = 0; j < lens[i] && j < 40; j++) fprintf(stderr, " %d", ids[offs[i] + j]);
        fprintf(stderr, "\n  ref  (%u of %u):", want, m);
        for (unsigned j = 0; j < want && j < 40; j++) {
          unsigned r = j + 1 == want ? m - 1 : j;
          fprintf(stderr, " %d", s->ref[i][2 * r] | s->ref[i][2 * r + 1] << 8);
        }
        fprintf(stderr, "\n");
      }
      bad++;
    }
  }
  if (!fails && next != (int64_t)nids) {
    fprintf(stderr, "FAIL: the lines cover %lld of the %llu ids\n", (long long)next, (unsigned long long)nids);
    fails++;
  }
  if (bad) {
    fprintf(stderr, "FAIL: %zu of %zu lines differ from the reference ids\n", bad, s->n);
    fails++;
  }
  if (!fails)
    printf("token ids of %s:%s: %zu lines, %llu ids, %zu of them %d ids long (truncated), all equal to the reference\n",
           file, dataset, s->n, (unsigned long long)nids, full, max_tokens);
  free(ids);
  free(lens);
  free(offs);
  H5Fclose(f);
  return fails ? 1 : 0;
}

static int run(int argc, char **argv, sample_t *s) {
  if (argc == 5 && !strcmp(argv[1], "lines")) {
    long step = atol(argv[3]);
    if (step < 1) return 2;
    if (load_sample(argv[2], step, s)) return 1;
    FILE *f = fopen(argv[4], "wb");
    if (!f) {
      fprintf(stderr, "FAIL: cannot create %s\n", argv[4]);
      return 1;
    }
    for (size_t i = 0; i < s->n; i++) {
      if (memchr(s->line[i], '\n', s->len[i])) return 1; /* fx_lines split there: cannot happen */
      fwrite(s->line[i], 1, s->len[i], f);
      fputc('\n', f);
    }
    if (fclose(f) != 0) {
      fprintf(stderr, "FAIL: cannot write %s\n", argv[4]);
      return 1;
    }
    printf("%zu\n", s->n);
    return 0;
  }
  if (argc == 7 && !strcmp(argv[1], "check")) {
    long step = atol(argv[5]);
    int max_tokens = atoi(argv[6]);
    if (step < 1 || max_tokens < 2 || max_tokens > 256) {
      fprintf(stderr, "test_idcheck: STEP >= 1, MAX_TOKENS in 2..256\n");
      return 2;
    }
    if (load_sample(argv[4], step, s)) return 1;
    return check(argv[2], argv[3], s, max_tokens);
  }
  fprintf(stderr, "usage: test_idcheck lines DATA_DIR STEP OUT.txt\n"
                  "       test_idcheck check IDS.h5 DATASET DATA_DIR STEP MAX_TOKENS\n");
  return 2;
}

/* Frees what load_sample allocated (the sanitizer build checks for leaks). */
static void sample_free(sample_t *s) {
  free(s->line);
  free(s->len);
  free(s->ref);
  free(s->nref);
  free(s->corpus);
  free(s->idsbuf);
}

int main(int argc, char **argv) {
  sample_t s;
  memset(&s, 0, sizeof s);
  int rc = run(argc, argv, &s);
  sample_free(&s);
  return rc;
}
