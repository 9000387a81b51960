/* config.c: the key table, INI parsing, presets, resolution and validation (see config.h). */
#define _POSIX_C_SOURCE 200809L /* getline */
#include "core/config.h"
#include "util/format.h" /* va_format_double */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h> /* fstat */
#include <sys/types.h>

typedef enum { K_INT, K_UINT, K_DOUBLE, K_STR, K_ENUM } key_type_t;

typedef struct {
  const char *name;
  key_type_t type;
  size_t offset, size;
  const char *def;
  double lo, hi;       /* inclusive numeric range */
  const char *choices; /* K_ENUM: '|'-separated names, index = stored value */
  const char *doc;
} key_def_t;

#define F(field) offsetof(va_config_t, field), sizeof(((va_config_t *)0)->field)
#define BIG      9.0e18

static const key_def_t KEYS[] = {
    {"input", K_STR, F(input), "", 0, 0, NULL,
     "input vectors as FILE.h5:DATASET (ann-benchmarks layout: FILE.h5:/train), or a .fvecs, .bvecs, .ivecs or .npy "
     "FILE (no DATASET part)"},
    {"input_format", K_ENUM, F(input_format), "auto", 0, 0, "auto|hdf5|fvecs|bvecs|ivecs|npy",
     "format of the input; auto = by its extension (.h5/.hdf5, .fvecs, .bvecs, .ivecs, .npy; another name: HDF5 "
     "if the file has HDF5's signature); ivecs' int32 are read as floats (docs/inputs.md)"},
    {"out", K_STR, F(out), "", 0, 0, NULL, "output index file (written as OUT.partial and renamed when complete)"},
    {"metrics", K_STR, F(metrics), "", 0, 0, NULL, "optional JSON file for per-phase timings and memory (empty: none)"},
    {"preset", K_ENUM, F(preset), "default", 0, 0, "default|vlc",
     "default: tuned for low energy fast; vlc: the prototype's parity settings (docs/algorithm.md section 3)"},
    {"k", K_INT, F(k), "256", 1, BIG, NULL, "number of anchors (same as --anchors)"},
    {"train_sample", K_INT, F(train_sample), "0", 0, BIG, NULL,
     "rows the annealing trains on, every (n / train_sample)-th row of the input (the same rows for any rank "
     "count); the final pass then assigns every row; 0 = all rows (same as --train-sample)"},
    {"seed", K_UINT, F(seed), "1", 0, BIG, NULL,
     "seed of every random draw (counter-based: same draws for any rank count)"},
    {"backend", K_ENUM, F(backend), "auto", 0, 0, "auto|cpu|cuda",
     "compute backend; auto = CUDA when built and a device is visible, else CPU"},
    {"precision", K_ENUM, F(precision), "tf32", 0, 0, "fp32|tf32|fp16|bf16",
     "cuda: precision of the distance product (accumulation fp32, reductions fp64); fp16/bf16 also store the rows in "
     "16 bits, so r, energy and statistics are of the rounded rows; cpu: always fp32"},
    {"device", K_INT, F(device), "-1", -1, 1024, NULL,
     "cuda: GPU of this rank; -1 = node-local rank modulo the visible GPUs"},
    {"gpu_min_work", K_DOUBLE, F(gpu_min_work), "1e10", 0, 1e30, NULL,
     "backend auto: stay on the CPU when a rank's rows x k x d is below this (measured crossover, docs/cuda.md)"},
    {"gpu_collectives", K_ENUM, F(gpu_collectives), "nccl", 0, 0, "nccl|mpi",
     "cuda, several ranks: the statistics' sums through NCCL (device buffers) or MPI (host copies; also lets ranks "
     "share a GPU, which NCCL refuses)"},
    {"gpu_stream", K_ENUM, F(gpu_stream), "auto", 0, 0, "auto|on|off",
     "cuda: rows in pinned host memory, streamed to the GPU in chunks every pass (out-of-core); auto = only when they "
     "do not fit the GPU"},
    {"gpu_stream_chunk_mb", K_DOUBLE, F(gpu_stream_chunk_mb), "256", 1, 65536, NULL,
     "cuda, streaming: MB of float32 rows per chunk (two chunk buffers on the GPU; fp16/bf16 chunks hold as many rows "
     "in half the bytes)"},
    {"gpu_mem_limit_mb", K_DOUBLE, F(gpu_mem_limit_mb), "0", 0, 1e12, NULL,
     "cuda: use at most this many MB of the GPU's free memory (a shared GPU; tests); 0 = all of it"},
    {"metric", K_ENUM, F(metric), "auto", 0, 0, "auto|l2|cosine",
     "distance; auto = cosine when the dataset's 'distance' attribute is angular/cosine, else l2"},
    {"init", K_STR, F(init), "kmeans||", 0, 0, NULL,
     "kmeans|| | random | farthest | file:PATH[:DATASET] (default dataset /anchors)"},
    {"kmeans_rounds", K_INT, F(kmeans_rounds), "3", 1, 100, NULL, "kmeans||: oversampling rounds"},
    {"kmeans_oversample", K_DOUBLE, F(kmeans_oversample), "1", 0.1, 100, NULL,
     "kmeans||: expected candidates per round, as a multiple of k"},
    {"kmeans_sample", K_INT, F(kmeans_sample), "64", 0, 1000000000, NULL,
     "kmeans||: its rounds and weighting read this many rows per anchor, every (n / (kmeans_sample k))-th row (the "
     "same rows for any rank count); 0 = every row"},
    {"robust", K_ENUM, F(robust), "none", 0, 0, "none|trim|huber",
     "per-anchor statistic: mean, trimmed mean, Huber-weighted mean"},
    {"trim_near", K_DOUBLE, F(trim_near), "0.1", 0, 0.49, NULL, "trim: fraction of members nearest the anchor dropped"},
    {"trim_far", K_DOUBLE, F(trim_far), "0.1", 0, 0.49, NULL,
     "trim: fraction of members farthest from the anchor dropped"},
    {"trim_bins", K_INT, F(trim_bins), "256", 8, 65536, NULL,
     "trim: histogram bins per anchor; thresholds are exact to one bin"},
    {"huber_c", K_DOUBLE, F(huber_c), "2", 0.01, 1000, NULL,
     "huber: delta = huber_c x the anchor's RMS member distance of the previous iteration"},
    {"lr", K_DOUBLE, F(lr), "2", 1e-9, 10, NULL, "step size scale: eta(T) = lr * T / (1 + T)"},
    {"T0", K_DOUBLE, F(T0), "3", 1e-9, 1e9, NULL, "initial temperature"},
    {"cooling_rate", K_DOUBLE, F(cooling_rate), "0.01", 0, 0.999, NULL,
     "T <- T * (1 - cooling_rate) after every iteration"},
    {"max_step", K_DOUBLE, F(max_step), "0", 0, BIG, NULL,
     "per-coordinate clamp of an anchor's step (absolute); 0 = no clamp"},
    {"momentum", K_DOUBLE, F(momentum), "0", 0, 0.999, NULL, "beta of v <- beta v + (1 - beta) step"},
    {"max_iter", K_INT, F(max_iter), "100", 1, 1e9, NULL, "iteration limit"},
    {"tol", K_DOUBLE, F(tol), "1e-4", 0, BIG, NULL,
     "energy change below which an iteration counts as still (see tol_mode)"},
    {"tol_mode", K_ENUM, F(tol_mode), "relative", 0, 0, "relative|absolute",
     "relative: |dE| <= tol * E_prev; absolute: |dE| <= tol"},
    {"min_changes", K_INT, F(min_changes), "-1", -1, BIG, NULL,
     "changed rows at or below which an iteration counts as still; -1 = n / 1000"},
    {"maintenance_interval", K_INT, F(maintenance_interval), "10", 0, 1e9, NULL,
     "merge/split every this many iterations; 0 = never"},
    {"merge_factor", K_DOUBLE, F(merge_factor), "0.1", 0, 10, NULL,
     "merge anchors closer than this x the mean distance between anchors"},
    {"split_count_factor", K_DOUBLE, F(split_count_factor), "4", 0, BIG, NULL,
     "split an anchor with more than this x n / k members; 0 = off"},
    {"split_var_factor", K_DOUBLE, F(split_var_factor), "4", 0, BIG, NULL,
     "split an anchor whose mean member distance exceeds this x T x E (relative) or x T (absolute); 0 = off"},
    {"split_var_mode", K_ENUM, F(split_var_mode), "relative", 0, 0, "relative|absolute",
     "relative: threshold factor x T x E (scale-free); absolute: factor x T (prototype)"},
    {"split_iters", K_INT, F(split_iters), "3", 1, 100, NULL, "2-means iterations of a split"},
    {"k_min", K_INT, F(k_min), "0", 0, BIG, NULL,
     "merges never take k below this; 0 = the initial k (k stays fixed unless k_min/k_max widen the range)"},
    {"k_max", K_INT, F(k_max), "0", -1, BIG, NULL,
     "splits never take k above this; 0 = the initial k, -1 = no bound but n"},
    {"codes", K_ENUM, F(codes), "none", 0, 0, "none|pq",
     "per-row codes after the anchors: pq = residual product quantization, one code per subspace of the row's "
     "residual x - anchor, codebooks trained by the same loop (docs/codes.md; same as --codes)"},
    {"pq_m", K_INT, F(pq_m), "8", 1, 65536, NULL,
     "codes = pq: subspaces M (at most d); column ranges of d / M columns, the first d mod M one column longer "
     "(same as --pq-m)"},
    {"pq_bits", K_INT, F(pq_bits), "8", 1, 16, NULL,
     "codes = pq: bits per code, 2^bits centroids per subspace; only 8 is supported (same as --pq-bits)"},
    {"pq_iters", K_INT, F(pq_iters), "25", 1, 1e9, NULL,
     "codes = pq: iteration limit of each subspace's codebook loop (plain Lloyd steps: eta 1, no momentum, "
     "no merges or splits; empty centroids re-seeded)"},
    {"pq_train_sample", K_INT, F(pq_train_sample), "65536", 0, BIG, NULL,
     "codes = pq: rows each codebook trains on, row floor(i x n / N) for i < N as train_sample takes them (the "
     "same rows for any rank count), when below the anchors' training rows; every row is encoded; 0 = the "
     "anchors' training rows"},
    {"checkpoint_every", K_INT, F(checkpoint_every), "0", 0, 1e9, NULL,
     "write a checkpoint every this many iterations; 0 = only when stopped by SIGTERM/SIGUSR1"},
    {"checkpoint", K_STR, F(checkpoint), "", 0, 0, NULL, "checkpoint file; empty = OUT.ckpt.h5"},
    {"memory_check", K_ENUM, F(memory_check), "on", 0, 0, "off|on",
     "refuse a job whose per-rank memory estimate exceeds the node's available memory / ranks on the node "
     "(docs/memory.md)"},
    {"threads", K_INT, F(threads), "0", 0, 4096, NULL, "threads per rank; 0 = the rank's cores / ranks on the node"},
    {"tile_rows", K_INT, F(tile_rows), "0", 0, 1 << 24, NULL,
     "rows per assign tile; 0 = auto (a tile of distances stays in cache)"},
    {"cpu_assign", K_ENUM, F(cpu_assign), "auto", 0, 0, "auto|sgemm|fused",
     "cpu: assign kernel; fused = AVX2/FMA (AVX-512 where present) dot products folded into the argmin in registers "
     "(no distance tiles); auto = fused where the processor has AVX2 and FMA, else sgemm tiles"},
    {"progress_every", K_INT, F(progress_every), "1", 0, 1e9, NULL,
     "print a progress line every this many iterations; 0 = none"},
    {"read_chunk_mb", K_DOUBLE, F(read_chunk_mb), "64", 1, 65536, NULL,
     "HDF5 read chunk per rank in MiB (staging buffer size; a CUDA job reads into its own 32 MiB buffers, or straight "
     "into its pinned copy when streaming, instead)"},
    {"io", K_ENUM, F(io), "auto", 0, 0, "auto|collective|independent",
     "HDF5 transfer: collective MPI-IO (parallel HDF5) or independent (serial HDF5 fallback); auto picks collective "
     "when available"},
};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])

/* The prototype's behaviour (docs/algorithm.md section 3). k_max -1: the prototype had no upper bound on k.
 * k_min 0 (= the initial k): the prototype's merges never removed an anchor, so its k never fell
 * below the initial k; with merges that delete (the fix) parity keeps that floor. precision fp32: the
 * prototype computed in float32, and its demo data (groups at 0, 5, 10, r near 0.01) are beyond what
 * tf32 products can resolve (docs/performance.md). */
static const char *const PRESET_VLC[][2] = {
    {"k", "1024"},
    {"T0", "1"},
    {"cooling_rate", "0.01"},
    {"lr", "0.1"},
    {"robust", "trim"},
    {"trim_near", "0.1"},
    {"trim_far", "0.1"},
    {"max_iter", "1000"},
    {"tol", "1e-4"},
    {"tol_mode", "absolute"},
    {"min_changes", "10"},
    {"maintenance_interval", "50"},
    {"init", "farthest"},
    {"merge_factor", "0.1"},
    {"split_count_factor", "2"},
    {"split_var_factor", "2"},
    {"split_var_mode", "absolute"},
    {"max_step", "0.1"},
    {"momentum", "0"},
    {"k_min", "0"},
    {"k_max", "-1"},
    {"metric", "l2"},
    {"precision", "fp32"},
};

typedef struct {
  char *key, *value, *origin;
} assign_t;
struct va_config_src {
  assign_t *items;
  size_t n, cap;
};

va_config_src_t *va_config_src_new(void) { return calloc(1, sizeof(va_config_src_t)); }

void va_config_src_free(va_config_src_t *src) {
  if (!src) return;
  for (size_t i = 0; i < src->n; i++) {
    free(src->items[i].key);
    free(src->items[i].value);
    free(src->items[i].origin);
  }
  free(src->items);
  free(src);
}

static const key_def_t *find_key(const char *name) {
  for (size_t i = 0; i < NKEYS; i++)
    if (strcmp(KEYS[i].name, name) == 0) return &KEYS[i];
  return NULL;
}

static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), row[64];
  if (lb >= 64) return 99;
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t sub = diag + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
      size_t best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
      row[j] = sub < best ? sub : best;
      diag = up;
    }
  }
  return row[lb];
}

static const char *closest_key(const char *name) {
  const char *best = KEYS[0].name;
  size_t bd = (size_t)-1;
  for (size_t i = 0; i < NKEYS; i++) {
    size_t d = edit_distance(name, KEYS[i].name);
    if (d < bd) {
      bd = d;
      best = KEYS[i].name;
    }
  }
  return best;
}

static char *dupstr(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

int va_config_src_add(va_config_src_t *src, const char *key, const char *value, const char *origin, char *err,
                      size_t errlen) {
  if (!find_key(key)) {
    snprintf(err, errlen,
             "unknown config key '%.80s' (%s); did you mean '%s'? ('vecanneal compress --help' lists the keys)", key,
             origin, closest_key(key));
    return 1;
  }
  if (src->n == src->cap) {
    size_t cap = src->cap ? 2 * src->cap : 32;
    assign_t *items = realloc(src->items, cap * sizeof *items);
    if (!items) {
      snprintf(err, errlen, "out of memory");
      return 1;
    }
    src->items = items;
    src->cap = cap;
  }
  src->items[src->n++] = (assign_t){dupstr(key), dupstr(value), dupstr(origin)};
  return 0;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
  return s;
}

int va_config_src_add_kv(va_config_src_t *src, const char *kv, const char *origin, char *err, size_t errlen) {
  char *buf = dupstr(kv);
  if (!buf) {
    snprintf(err, errlen, "out of memory");
    return 1;
  }
  char *eq = strchr(buf, '=');
  int rc;
  if (!eq) {
    snprintf(err, errlen, "expected key=value, got '%.80s' (%s)", kv, origin);
    rc = 1;
  } else {
    *eq = 0;
    rc = va_config_src_add(src, trim(buf), trim(eq + 1), origin, err, errlen);
  }
  free(buf);
  return rc;
}

int va_config_src_load_file(va_config_src_t *src, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "cannot open config file '%s': %s", path, strerror(errno));
    return 1;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "config file '%s' is %s; give a file of 'key = value' lines", path,
             S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    fclose(f);
    return 1;
  }
  char *line = NULL; /* any length: getline grows it */
  size_t cap = 0;
  ssize_t len;
  int lineno = 0, rc = 0;
  errno = 0;
  while (!rc && (len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    char origin[VA_PATH_MAX + 32];
    snprintf(origin, sizeof origin, "%s:%d", path, lineno);
    if ((size_t)len != strlen(line)) {
      snprintf(err, errlen, "%s: the line holds a NUL byte (not a text file?)", origin);
      rc = 1;
      break;
    }
    /* Comments: a line starting with # or ;, or " #" / " ;" after a value. */
    for (char *p = line; *p; p++)
      if ((*p == '#' || *p == ';') && (p == line || isspace((unsigned char)p[-1]))) {
        *p = 0;
        break;
      }
    char *s = trim(line);
    if (!*s) continue;
    if (*s == '[') {
      if (s[strlen(s) - 1] != ']') {
        snprintf(err, errlen, "%s: malformed section header '%.80s'", origin, s);
        rc = 1;
      }
      continue; /* sections only group keys for readers */
    }
    if (!strchr(s, '=')) {
      snprintf(err, errlen, "%s: expected 'key = value', got '%.80s'", origin, s);
      rc = 1;
      break;
    }
    rc = va_config_src_add_kv(src, s, origin, err, errlen);
  }
  if (!rc && ferror(f)) {
    snprintf(err, errlen, "cannot read config file '%s': %s", path, strerror(errno));
    rc = 1;
  }
  free(line);
  fclose(f);
  return rc;
}

/* A key's resolved value as text, as a config file would set it (doubles in their shortest form that
 * reads back as the same double). */
static void key_text(const va_config_t *cfg, const key_def_t *k, char *v, size_t len) {
  const char *base = (const char *)cfg + k->offset;
  switch (k->type) {
  case K_STR: snprintf(v, len, "%s", base); break;
  case K_ENUM:
    snprintf(v, len, "%s", k->size == sizeof(int) ? va_config_enum_name(k->name, *(const int *)base) : base);
    break;
  case K_INT: snprintf(v, len, "%lld", (long long)*(const int64_t *)base); break;
  case K_UINT: snprintf(v, len, "%llu", (unsigned long long)*(const uint64_t *)base); break;
  case K_DOUBLE: va_format_double(*(const double *)base, v, len); break;
  }
}

static int set_value(va_config_t *cfg, const key_def_t *k, const char *value, const char *origin, char *err,
                     size_t errlen) {
  char *base = (char *)cfg + k->offset;
  char *end = NULL;
  errno = 0;
  switch (k->type) {
  case K_STR:
    if (strlen(value) >= k->size) {
      snprintf(err, errlen, "config key '%s' (%s): value too long", k->name, origin);
      return 1;
    }
    strcpy(base, value);
    return 0;
  case K_ENUM: {
    const char *c = k->choices;
    for (int idx = 0; c && *c; idx++) {
      size_t len = strcspn(c, "|");
      if (strlen(value) == len && strncmp(c, value, len) == 0) {
        if (k->size == sizeof(int)) *(int *)base = idx;
        else snprintf(base, k->size, "%s", value);
        return 0;
      }
      c += len + (c[len] == '|');
    }
    snprintf(err, errlen, "config key '%s' (%s): '%s' is not one of %s", k->name, origin, value, k->choices);
    return 1;
  }
  case K_INT:
  case K_UINT: {
    long long v = strtoll(value, &end, 10);
    if (!*value || *end || errno) {
      snprintf(err, errlen, "config key '%s' (%s): expected an integer, got '%s'", k->name, origin, value);
      return 1;
    }
    if ((double)v < k->lo || (double)v > k->hi) {
      snprintf(err, errlen, "config key '%s' (%s): %lld is outside [%.15g, %.15g]", k->name, origin, v, k->lo, k->hi);
      return 1;
    }
    if (k->type == K_UINT) *(uint64_t *)base = (uint64_t)v;
    else *(int64_t *)base = (int64_t)v;
    return 0;
  }
  case K_DOUBLE: {
    double v = strtod(value, &end);
    if (!*value || *end || errno || !isfinite(v)) {
      snprintf(err, errlen, "config key '%s' (%s): expected a finite number, got '%s'", k->name, origin, value);
      return 1;
    }
    if (v < k->lo || v > k->hi) {
      snprintf(err, errlen, "config key '%s' (%s): %g is outside [%g, %g]", k->name, origin, v, k->lo, k->hi);
      return 1;
    }
    *(double *)base = v;
    return 0;
  }
  }
  return 1;
}

static int parse_init(va_config_t *cfg, char *err, size_t errlen) {
  cfg->init_file[0] = cfg->init_dataset[0] = 0;
  if (!strcmp(cfg->init, "kmeans||")) cfg->init_kind = VA_INIT_KMEANSPP;
  else if (!strcmp(cfg->init, "random")) cfg->init_kind = VA_INIT_RANDOM;
  else if (!strcmp(cfg->init, "farthest")) cfg->init_kind = VA_INIT_FARTHEST;
  else if (!strncmp(cfg->init, "file:", 5) && cfg->init[5]) {
    cfg->init_kind = VA_INIT_FILE;
    snprintf(cfg->init_file, sizeof cfg->init_file, "%s", cfg->init + 5);
    char *colon = strrchr(cfg->init_file, ':');
    if (colon) {
      *colon = 0;
      snprintf(cfg->init_dataset, sizeof cfg->init_dataset, "%s", colon + 1);
    } else snprintf(cfg->init_dataset, sizeof cfg->init_dataset, "/anchors");
    if (!cfg->init_file[0] || !cfg->init_dataset[0]) {
      snprintf(err, errlen, "config key 'init': expected file:PATH[:DATASET], got '%s'", cfg->init);
      return 1;
    }
  } else {
    snprintf(err, errlen, "config key 'init': '%s' is not one of kmeans||, random, farthest, file:PATH[:DATASET]",
             cfg->init);
    return 1;
  }
  return 0;
}

int va_config_resolve(const va_config_src_t *src, va_config_t *cfg, char *err, size_t errlen) {
  memset(cfg, 0, sizeof *cfg);
  for (size_t i = 0; i < NKEYS; i++)
    if (set_value(cfg, &KEYS[i], KEYS[i].def, "default", err, errlen)) return 1;
  /* The last 'preset' assignment wins and applies before every other assignment. */
  const char *preset = NULL, *preset_origin = NULL;
  for (size_t i = 0; i < src->n; i++)
    if (!strcmp(src->items[i].key, "preset")) {
      preset = src->items[i].value;
      preset_origin = src->items[i].origin;
    }
  if (preset) {
    if (set_value(cfg, find_key("preset"), preset, preset_origin, err, errlen)) return 1;
    if (!strcmp(cfg->preset, "vlc"))
      for (size_t i = 0; i < sizeof PRESET_VLC / sizeof PRESET_VLC[0]; i++)
        if (set_value(cfg, find_key(PRESET_VLC[i][0]), PRESET_VLC[i][1], "preset vlc", err, errlen)) return 1;
  }
  for (size_t i = 0; i < src->n; i++) {
    const assign_t *a = &src->items[i];
    if (!strcmp(a->key, "preset")) continue;
    const key_def_t *k = find_key(a->key);
    char before[VA_PATH_MAX + 32], after[VA_PATH_MAX + 32];
    key_text(cfg, k, before, sizeof before);
    if (set_value(cfg, k, a->value, a->origin, err, errlen)) return 1;
    key_text(cfg, k, after, sizeof after);
    for (size_t p = 0; preset && !strcmp(cfg->preset, "vlc") && p < sizeof PRESET_VLC / sizeof PRESET_VLC[0]; p++)
      if (!strcmp(PRESET_VLC[p][0], k->name) && strcmp(before, after)) {
        size_t used = strlen(cfg->preset_overrides);
        snprintf(cfg->preset_overrides + used, sizeof cfg->preset_overrides - used, "%s%s = %s (%s; preset: %s)",
                 used ? ", " : "", k->name, after, a->origin, before);
      }
  }
  if (cfg->trim_near + cfg->trim_far >= 0.95) {
    snprintf(err, errlen, "config keys 'trim_near' + 'trim_far' must be below 0.95 (got %g + %g)", cfg->trim_near,
             cfg->trim_far);
    return 1;
  }
  if (cfg->codes == VA_CODES_PQ && cfg->pq_bits != 8) {
    snprintf(err, errlen,
             "config key 'pq_bits' is %lld, but only 8 bits per code are supported (4 is not supported yet): set "
             "pq_bits = 8",
             (long long)cfg->pq_bits);
    return 1;
  }
  if (cfg->k_max > 0 && cfg->k_max < cfg->k_min) {
    snprintf(err, errlen, "config key 'k_max' (%lld) is below 'k_min' (%lld)", (long long)cfg->k_max,
             (long long)cfg->k_min);
    return 1;
  }
  return parse_init(cfg, err, errlen);
}

const char *va_config_enum_name(const char *key, int value) {
  static char buf[64];
  const key_def_t *k = find_key(key);
  const char *c = k ? k->choices : NULL;
  for (int idx = 0; c && *c; idx++) {
    size_t len = strcspn(c, "|");
    if (idx == value) {
      snprintf(buf, sizeof buf, "%.*s", (int)len, c);
      return buf;
    }
    c += len + (c[len] == '|');
  }
  return "?";
}

int va_config_key_kind(const char *key) {
  const key_def_t *k = find_key(key);
  if (!k) return VA_CONFIG_TEXT;
  return k->type == K_INT || k->type == K_UINT ? VA_CONFIG_INTEGER
         : k->type == K_DOUBLE                 ? VA_CONFIG_REAL
                                               : VA_CONFIG_TEXT;
}

void va_config_visit(const va_config_t *cfg, va_config_visit_fn fn, void *ctx) {
  for (size_t i = 0; i < NKEYS; i++) {
    char v[VA_PATH_MAX + 32];
    key_text(cfg, &KEYS[i], v, sizeof v);
    fn(KEYS[i].name, v, ctx);
  }
}

/* The sections of the key table, by their first key (the INI file and the markdown page). */
static const char *const SECTIONS[][2] = {
    {"input", "job"},   {"init", "initialisation"},          {"robust", "robust statistics"},
    {"lr", "update"},   {"max_iter", "convergence"},         {"maintenance_interval", "maintenance"},
    {"codes", "codes"}, {"checkpoint_every", "checkpoints"}, {"memory_check", "execution"}};

static const char *section_starting_at(const char *key) {
  for (size_t s = 0; s < sizeof SECTIONS / sizeof SECTIONS[0]; s++)
    if (!strcmp(SECTIONS[s][0], key)) return SECTIONS[s][1];
  return NULL;
}

void va_config_print_markdown(FILE *f) {
  fprintf(f,
          "# Configuration keys of `vecanneal compress`\n\n"
          "Generated from the key table (`src/core/config.c`) by `tests/tools/config_doc`; the test `config_doc`\n"
          "fails when this page and the table differ. A config file holds `key = value` lines (`#` or `;` start a\n"
          "comment, `[sections]` only group keys); sources apply in order: built-in defaults, `preset`, the config\n"
          "file, then `--set key=value` and the shorthands (`--anchors`, `--input`, `--out`, `--metrics`, `--preset`,\n"
          "`--backend`, `--seed`); each layer changes only the keys it sets, and the job's log names every key set\n"
          "over the preset's value. An unknown key or a bad value stops the job (exit 2) naming the key, where it\n"
          "came from, and the closest valid key. `configs/default.ini` documents every key, commented out at its\n"
          "default (it sets none); `compress --print-config` prints the resolved configuration the same way, keys\n"
          "that differ from the defaults and the preset set.\n");
  for (size_t i = 0; i < NKEYS; i++) {
    const key_def_t *k = &KEYS[i];
    const char *section = section_starting_at(k->name);
    if (section)
      fprintf(f, "\n## %c%s\n\n| key | default | range or choices | meaning |\n|---|---|---|---|\n",
              toupper(section[0]), section + 1);
    char range[96] = "";
    if (k->choices) snprintf(range, sizeof range, "%s", k->choices);
    else if (k->type != K_STR) snprintf(range, sizeof range, "%.6g .. %.6g", k->lo, k->hi);
    if (k->def[0]) fprintf(f, "| `%s` | `%s` | ", k->name, k->def);
    else fprintf(f, "| `%s` | (empty) | ", k->name);
    for (const char *p = range; *p; p++) { /* a '|' would end the table cell */
      if (*p == '|') fputc('\\', f);
      fputc(*p, f);
    }
    fprintf(f, " | ");
    for (const char *p = k->doc; *p; p++) {
      if (*p == '|') fputc('\\', f);
      fputc(*p, f);
    }
    fprintf(f, " |\n");
  }
}

void va_config_print_ini(const va_config_t *cfg, FILE *f) {
  /* The base layer this configuration sits on: the built-in defaults and its preset. */
  va_config_t base;
  va_config_src_t *src = va_config_src_new();
  char err[256];
  if (va_config_src_add(src, "preset", cfg->preset, "preset", err, sizeof err) ||
      va_config_resolve(src, &base, err, sizeof err)) {
    fprintf(stderr, "vecanneal: internal error: preset %s does not resolve: %s\n", cfg->preset, err);
    abort(); /* a preset of the key table that does not resolve is a bug, not an input error */
  }
  va_config_src_free(src);
  fprintf(f, "# vecanneal compress configuration: every key with its meaning.\n"
             "# Format: 'key = value' lines; '#' or ';' start a comment; [sections] only group keys.\n"
             "# Layers: built-in defaults, then the preset, then a config file, then --set key=value on the\n"
             "# command line; a layer changes only the keys it sets. A commented key shows the value it gets\n"
             "# from the layers below (defaults and preset); uncomment it to set it.\n");
  for (size_t i = 0; i < NKEYS; i++) {
    const key_def_t *k = &KEYS[i];
    const char *section = section_starting_at(k->name);
    if (section) fprintf(f, "\n[%s]\n", section);
    char v[VA_PATH_MAX + 32], b[VA_PATH_MAX + 32];
    key_text(cfg, k, v, sizeof v);
    key_text(&base, k, b, sizeof b);
    int set = strcmp(v, k->type == K_ENUM && !strcmp(k->name, "preset") ? k->def : b) != 0;
    fprintf(f, "# %s%s%s%s\n%s%s = %s\n", k->doc, k->choices ? " [" : "", k->choices ? k->choices : "",
            k->choices ? "]" : "", set ? "" : "# ", k->name, v);
  }
}

void va_config_print_keys(FILE *f) {
  fprintf(f, "Config keys (config file lines 'key = value', or --set key=value):\n");
  for (size_t i = 0; i < NKEYS; i++) {
    const key_def_t *k = &KEYS[i];
    fprintf(f, "  %-22s default %-10s %s%s%s%s\n", k->name, k->def[0] ? k->def : "''", k->doc, k->choices ? "  [" : "",
            k->choices ? k->choices : "", k->choices ? "]" : "");
  }
}
