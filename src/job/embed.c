/* embed.c: `vecanneal embed`, sentence embeddings of a text corpus with all-MiniLM-L6-v2, written as an
 * ann-benchmarks style HDF5 dataset (distance = angular) that `vecanneal compress` takes as it is.
 * Each rank takes a contiguous block of lines (split by bytes, then moved to line starts, so no rank
 * scans the whole file), tokenizes it on a pool of threads while it encodes the windows already
 * tokenized, a window of consecutive lines at a time in batches of similar length (longest first within
 * the window; the encoder sized for the first window's largest batch before any batch runs, grown for a
 * later window's), and writes its rows -- in input order -- with the sharded HDF5 writer: without MPI-IO
 * each window as soon as it is encoded, while the next ones are. The encoder
 * (backend/encoder.h) is the CPU one or, in a CUDA build with a device on every rank, the GPU one (one GPU per rank,
 * node-local rank modulo the visible devices); two batches are in flight so that packing and unpacking on the host
 * overlap the GPU's work. Expected failures (usage, missing or corrupt model or input, an empty corpus, no device for
 * --backend cuda) are agreed over all ranks: one message, the same exit code everywhere. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h> /* the thread that writes the vectors while the encoder runs */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "backend/encoder.h" /* va_encoder_*: the CPU or GPU encoder */
#include "embed/bert_cpu.h"  /* va_bert_load, va_bert_t */
#include "io/files.h"        /* va_files_prepare, va_text_open */
#include "core/stop.h"       /* va_stop_point */
#include "job/embed.h"
#include "io/h5io.h"
#include "job/embed_lines.h" /* va_lines_*, va_tok_pool_*, va_tok_totals_*: the block, tokenized */
#include "cpu/assign.h"
#include "embed/tokenizer.h"
#include "util/heartbeat.h" /* va_heartbeat_start, va_heartbeat_stop */
#include "util/json.h"      /* va_json_*: the metrics file */
#include "util/util.h"

#ifndef VA_EMBED_SOURCE_MODEL_DIR
#define VA_EMBED_SOURCE_MODEL_DIR "models/all-MiniLM-L6-v2"
#endif

/* Lines are encoded a window of this many batches at a time (the vectors file is written a window at a
 * time while the next ones are encoded). */
#define WINDOW_BATCHES 64

/* Everything the HDF5 callbacks need. */
typedef struct {
  const va_embed_options_t *a;
  int64_t n, row0, n_local;
  int d;
  const float *emb;  /* the rows in host memory, or */
  const float *demb; /* in GPU memory (embed_rows fetches them a block at a time) */
  int on_gpu;        /* demb was used (it is freed before the metrics are written) */
  int device;        /* demb's GPU */
  int64_t tokens, truncated, invalid, empty;
} embed_out_t;

void va_embed_options_default(va_embed_options_t *o) {
  memset(o, 0, sizeof *o);
  o->weights = "fp32";
  o->format = "auto";
  o->io = "auto";
  o->backend = "auto";
  o->precision = "auto";
  o->max_tokens = 256;
  o->progress = 10;
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

int va_embed_options_resolve(va_embed_options_t *a, char *err, size_t elen) {
  if (!a->input) {
    snprintf(err, elen, "embed: --input CORPUS is required");
    return 1;
  }
  if (!a->out_spec && !a->token_ids_out) {
    snprintf(err, elen, "embed: --out FILE.h5[:/DATASET] is required (or --token-ids-out alone, to only tokenize)");
    return 1;
  }
  if (a->out_spec && va_split_spec(a->out_spec, a->out_file, sizeof a->out_file, a->dataset, sizeof a->dataset)) {
    snprintf(err, elen, "embed: --out: expected FILE.h5[:/DATASET], got '%s'", a->out_spec);
    return 1;
  }
  if (a->token_ids_out) {
    /* FILE.h5[:DATASET], the dataset /ids when none is named; lengths and offsets lie beside it. */
    if (va_split_spec(a->token_ids_out, a->ids_file, sizeof a->ids_file, a->ids_dataset, sizeof a->ids_dataset)) {
      snprintf(err, elen, "embed: --token-ids-out: expected FILE.h5[:/DATASET], got '%s'", a->token_ids_out);
      return 1;
    }
    if (!strchr(a->token_ids_out, ':')) snprintf(a->ids_dataset, sizeof a->ids_dataset, "/ids");
    const char *slash = strrchr(a->ids_dataset, '/'), *base = slash ? slash + 1 : a->ids_dataset;
    const int group = (int)(base - a->ids_dataset);
    if (!*base || !strcmp(base, "lengths") || !strcmp(base, "offsets")) {
      snprintf(err, elen,
               "embed: --token-ids-out: the dataset '%s' needs a name other than 'lengths' and 'offsets', which are "
               "written beside it",
               a->ids_dataset);
      return 1;
    }
    snprintf(a->ids_lengths, sizeof a->ids_lengths, "%.*slengths", group, a->ids_dataset);
    snprintf(a->ids_offsets, sizeof a->ids_offsets, "%.*soffsets", group, a->ids_dataset);
  }
  if (strcmp(a->weights, "fp32") && strcmp(a->weights, "fp16")) {
    snprintf(err, elen, "embed: --weights must be fp32 or fp16, got '%s'", a->weights);
    return 1;
  }
  if (strcmp(a->backend, "auto") && strcmp(a->backend, "cpu") && strcmp(a->backend, "cuda")) {
    snprintf(err, elen, "embed: --backend must be auto, cpu or cuda, got '%s'", a->backend);
    return 1;
  }
  if (strcmp(a->precision, "auto") && strcmp(a->precision, "fp32") && strcmp(a->precision, "fp16") &&
      strcmp(a->precision, "bf16")) {
    snprintf(err, elen, "embed: --precision must be auto, fp32, fp16 or bf16, got '%s'", a->precision);
    return 1;
  }
  if (!strcmp(a->backend, "cpu") && (!strcmp(a->precision, "fp16") || !strcmp(a->precision, "bf16"))) {
    snprintf(err, elen, "embed: --precision %s is for the GPU encoder; the CPU encoder computes in fp32", a->precision);
    return 1;
  }
  if (!strcmp(a->backend, "cuda") && !va_encoder_gpu_built()) {
    snprintf(err, elen, "embed: --backend cuda: this build has no CUDA (configure with -DVECANNEAL_CUDA=ON)");
    return 1;
  }
  if (!strcmp(a->format, "auto")) {
    size_t L = strlen(a->input);
    a->jsonl = L >= 6 && !strcmp(a->input + L - 6, ".jsonl");
  } else if (!strcmp(a->format, "jsonl")) a->jsonl = 1;
  else if (!strcmp(a->format, "text")) a->jsonl = 0;
  else {
    snprintf(err, elen, "embed: --format must be auto, text or jsonl, got '%s'", a->format);
    return 1;
  }
  a->io_mode = !strcmp(a->io, "collective")    ? VA_IO_COLLECTIVE
               : !strcmp(a->io, "independent") ? VA_IO_INDEPENDENT
                                               : VA_IO_AUTO;
  if (strcmp(a->io, "auto") && a->io_mode == VA_IO_AUTO) {
    snprintf(err, elen, "embed: --io must be auto, collective or independent");
    return 1;
  }
  /* model directory: explicit, environment, working directory, source tree */
  const char *env = getenv("VECANNEAL_MODEL");
  if (a->model) snprintf(a->model_dir, sizeof a->model_dir, "%s", a->model);
  else if (env && *env) snprintf(a->model_dir, sizeof a->model_dir, "%s", env);
  else if (file_exists("models/all-MiniLM-L6-v2"))
    snprintf(a->model_dir, sizeof a->model_dir, "models/all-MiniLM-L6-v2");
  else snprintf(a->model_dir, sizeof a->model_dir, "%s", VA_EMBED_SOURCE_MODEL_DIR);
  return 0;
}

/* The whole input's tokens, estimated before it is read from its size at 4 bytes a token (English text
 * takes 4-8 bytes a WordPiece token, so the estimate errs high): rank 0 looks at the file (one metadata
 * request a job, not one a rank) and every rank gets its figure; an input that cannot be looked at counts
 * as large (its read says why). */
static int64_t estimate_job_tokens(const char *path) {
  int64_t tokens = INT64_MAX;
  struct stat st;
  if (va_proc.rank == 0 && stat(path, &st) == 0) tokens = (int64_t)st.st_size / 4;
  VA_MPI(MPI_Bcast(&tokens, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
  return tokens;
}

/* --- the HDF5 output ----------------------------------------------------------------------------- */
/* What both output files say of the corpus they came from. */
static void corpus_attributes(hid_t file, const va_embed_options_t *a, int64_t tokens, int64_t truncated,
                              int64_t invalid, int64_t empty) {
  va_h5_attr_str(file, "source", a->input);
  va_h5_attr_i64(file, "max_tokens", a->max_tokens);
  va_h5_attr_i64(file, "tokens", tokens);
  va_h5_attr_i64(file, "truncated_lines", truncated);
  va_h5_attr_i64(file, "invalid_utf8", invalid);
  va_h5_attr_i64(file, "empty_lines", empty);
}

static void embed_setup(hid_t file, void *ctx) {
  const embed_out_t *o = ctx;
  hsize_t dims[2] = {(hsize_t)o->n, (hsize_t)o->d};
  hid_t space = VA_H5(H5Screate_simple(2, dims, NULL));
  hid_t lcpl = VA_H5(H5Pcreate(H5P_LINK_CREATE));
  VA_H5(H5Pset_create_intermediate_group(lcpl, 1)); /* --out f.h5:/group/train */
  hid_t ds = va_h5_create_dataset(file, o->a->dataset, H5T_IEEE_F32LE, space, lcpl);
  va_h5_attr_str(ds, "model", "sentence-transformers/all-MiniLM-L6-v2");
  VA_H5(H5Dclose(ds));
  VA_H5(H5Pclose(lcpl));
  VA_H5(H5Sclose(space));
  va_h5_attr_str(file, "distance", "angular");
  va_h5_attr_i64(file, "dimension", o->d);
  va_h5_attr_str(file, "generator", "vecanneal embed");
  va_h5_attr_str(file, "model", "sentence-transformers/all-MiniLM-L6-v2");
  va_h5_attr_str(file, "pooling", "mean, L2-normalised");
  corpus_attributes(file, o->a, o->tokens, o->truncated, o->invalid, o->empty);
}

/* fetch_device_rows' context: the rows of the lines from `first` of this rank's block, in GPU memory. */
typedef struct {
  const embed_out_t *o;
  int64_t first;
} device_lines_t;
static void fetch_device_rows(void *ctx, int64_t first, int64_t count, void *buf) {
  const device_lines_t *l = ctx;
  const embed_out_t *o = l->o;
  va_encoder_copy_device_rows(o->device, buf, o->demb + (l->first + first) * o->d,
                              (size_t)(count * o->d) * sizeof(float));
}
/* Lines [first, first + count) of this rank's block into the vectors dataset. */
static void write_lines(hid_t ds, const embed_out_t *o, int64_t first, int64_t count) {
  const size_t row_bytes = (size_t)o->d * sizeof(float);
  device_lines_t l = {o, first};
  if (o->demb)
    va_h5_write_block_fetched(ds, H5T_NATIVE_FLOAT, o->row0 + first, count, o->d, row_bytes, fetch_device_rows, &l);
  else va_h5_write_block(ds, H5T_NATIVE_FLOAT, o->row0 + first, count, o->d, row_bytes, o->emb + first * o->d);
}

static void embed_rows(hid_t file, void *ctx) {
  const embed_out_t *o = ctx;
  hid_t ds = VA_H5(H5Dopen2(file, o->a->dataset, H5P_DEFAULT));
  write_lines(ds, o, 0, o->n_local);
  VA_H5(H5Dclose(ds));
}

/* Without MPI-IO the vectors file is written while the encoder runs: the lines are encoded a window of
 * consecutive lines at a time, and this thread writes each window's rows once its last batch has come
 * back, while the encoder works on the next windows (the writes need no MPI: va_h5_write_open). */
typedef struct {
  const embed_out_t *o;
  hid_t ds;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t ready; /* lines [0, ready) of the block are encoded */
  int done;      /* no more lines will be encoded */
  pthread_t thread;
} line_writer_t;

static void *line_writer_main(void *arg) {
  line_writer_t *w = arg;
  int64_t written = 0;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    while (w->ready == written && !w->done) pthread_cond_wait(&w->cv, &w->mu);
    const int64_t upto = w->ready;
    pthread_mutex_unlock(&w->mu);
    if (upto == written) return NULL; /* done, and all written */
    write_lines(w->ds, w->o, written, upto - written);
    written = upto;
  }
}

static void line_writer_start(line_writer_t *w, const embed_out_t *o, hid_t file) {
  w->o = o;
  w->ds = VA_H5(H5Dopen2(file, o->a->dataset, H5P_DEFAULT));
  w->ready = 0;
  w->done = 0;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  const int e = pthread_create(&w->thread, NULL, line_writer_main, w);
  if (e) VA_FATAL("cannot start the thread that writes the vectors file: %s", strerror(e));
}

/* Lines [0, ready) are encoded. */
static void line_writer_post(line_writer_t *w, int64_t ready) {
  pthread_mutex_lock(&w->mu);
  w->ready = ready;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void line_writer_join(line_writer_t *w) {
  pthread_mutex_lock(&w->mu);
  w->done = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  VA_H5(H5Dclose(w->ds));
}

/* The token ids file (--token-ids-out): every line's ids back to back in line order (int32), and per
 * line its length (int32) and the index of its first id (int64: a corpus may hold more than 2^31
 * tokens). Each rank writes its own lines' ids, lengths and offsets. */
typedef struct {
  const va_embed_options_t *a;
  int64_t n, row0, n_local, tokens, tok0, used; /* tok0: this rank's first id in the file */
  const int32_t *ids;
  const int *lens;
  const int64_t *offsets; /* n_local, already global (tok0 added) */
  int64_t truncated, invalid, empty;
} ids_out_t;

static void ids_setup(hid_t file, void *ctx) {
  const ids_out_t *o = ctx;
  hid_t lcpl = VA_H5(H5Pcreate(H5P_LINK_CREATE));
  VA_H5(H5Pset_create_intermediate_group(lcpl, 1)); /* --token-ids-out f.h5:/group/ids */
  const struct {
    const char *name;
    hid_t type;
    hsize_t len;
  } sets[3] = {{o->a->ids_dataset, H5T_STD_I32LE, (hsize_t)o->tokens},
               {o->a->ids_lengths, H5T_STD_I32LE, (hsize_t)o->n},
               {o->a->ids_offsets, H5T_STD_I64LE, (hsize_t)o->n}};
  for (int k = 0; k < 3; k++) {
    hid_t space = VA_H5(H5Screate_simple(1, &sets[k].len, NULL));
    hid_t ds = va_h5_create_dataset(file, sets[k].name, sets[k].type, space, lcpl);
    VA_H5(H5Dclose(ds));
    VA_H5(H5Sclose(space));
  }
  VA_H5(H5Pclose(lcpl));
  va_h5_attr_str(file, "generator", "vecanneal embed --token-ids-out");
  va_h5_attr_str(file, "model", "sentence-transformers/all-MiniLM-L6-v2");
  va_h5_attr_str(file, "tokenizer", "BERT uncased WordPiece (vocab.txt), [CLS] ... [SEP]");
  va_h5_attr_str(file, "ids", o->a->ids_dataset);
  va_h5_attr_str(file, "lengths", o->a->ids_lengths);
  va_h5_attr_str(file, "offsets", o->a->ids_offsets);
  va_h5_attr_i64(file, "lines", o->n);
  corpus_attributes(file, o->a, o->tokens, o->truncated, o->invalid, o->empty);
}

static void ids_rows(hid_t file, void *ctx) {
  const ids_out_t *o = ctx;
  hid_t ds = VA_H5(H5Dopen2(file, o->a->ids_dataset, H5P_DEFAULT));
  va_h5_write_block(ds, H5T_NATIVE_INT32, o->tok0, o->used, 1, sizeof(int32_t), o->ids);
  VA_H5(H5Dclose(ds));
  ds = VA_H5(H5Dopen2(file, o->a->ids_lengths, H5P_DEFAULT));
  va_h5_write_block(ds, H5T_NATIVE_INT, o->row0, o->n_local, 1, sizeof(int), o->lens);
  VA_H5(H5Dclose(ds));
  ds = VA_H5(H5Dopen2(file, o->a->ids_offsets, H5P_DEFAULT));
  va_h5_write_block(ds, H5T_NATIVE_INT64, o->row0, o->n_local, 1, sizeof(int64_t), o->offsets);
  VA_H5(H5Dclose(ds));
}

/* --- metrics ------------------------------------------------------------------------------------- */
enum { PH_LOAD, PH_READ, PH_TOKENIZE, PH_ENCODE, PH_WRITE, PH_TOTAL, NPH };

/* CPU seconds of this process (all its threads): throughput per CPU second is what survives a busy
 * machine, where wall-clock rates drop with the load. */
static double cpu_seconds(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static const char *const ph_names[NPH] = {"load_model", "read", "tokenize", "encode", "write", "total"};

static int write_metrics(const va_embed_options_t *a, const embed_out_t *o, const double *ph, double tokenizer,
                         double cpu, int threads, const char *weights_dtype, const va_encoder_info_t *ei, int batch) {
  double mx[NPH], mn[NPH],
      tok_mx = 0, tok_mn = 0, rss = (double)va_peak_rss(), rss_max = 0, cpu_sum = 0,
      fwd[4] = {ei->forward_seconds, -ei->forward_seconds, ei->setup_seconds, ei->setup_wait_seconds}, fwd_mx[4];
  int ranks_on_gpu = 0;
  VA_MPI(MPI_Reduce(&o->on_gpu, &ranks_on_gpu, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(fwd, fwd_mx, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(&cpu, &cpu_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(ph, mx, NPH, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(ph, mn, NPH, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(&tokenizer, &tok_mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(&tokenizer, &tok_mn, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD));
  VA_MPI(MPI_Reduce(&rss, &rss_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  char *layout = va_json_gather_layout(!strcmp(ei->backend, "cuda") ? ei->device : "cpu");
  FILE *f = a->metrics && va_proc.rank == 0 ? va_text_open(a->metrics) : NULL;
  if (!a->metrics || !f) {
    free(layout);
    return a->metrics ? va_text_commit(NULL, "metrics file", a->metrics) : 0;
  }
  va_json_writer_t j;
  va_json_start(&j, f);
  va_json_run_header(&j, "embed", layout);
  free(layout);
  va_json_string(&j, "backend", ei->backend);
  va_json_string(&j, "precision", ei->precision);
  va_json_string(&j, "device", ei->device);
  va_json_string(&j, "model", "all-MiniLM-L6-v2");
  va_json_string(&j, "weights", weights_dtype);
  va_json_string(&j, "input", a->input);
  va_json_string(&j, "output", a->out_spec);
  va_json_string(&j, "token_ids_output", a->token_ids_out);
  va_json_int(&j, "threads_per_rank", threads);
  va_json_int(&j, "batch", batch);
  va_json_int(&j, "max_tokens", a->max_tokens);
  va_json_int(&j, "lines", o->n);
  va_json_int(&j, "tokens", o->tokens);
  va_json_int(&j, "truncated_lines", o->truncated);
  va_json_int(&j, "invalid_utf8", o->invalid);
  va_json_int(&j, "empty_lines", o->empty);
  double total = mx[PH_TOTAL] > 0 ? mx[PH_TOTAL] : 1e-9, enc = mx[PH_ENCODE] > 0 ? mx[PH_ENCODE] : 1e-9;
  va_json_number(&j, "lines_per_second", (double)o->n / total);
  va_json_number(&j, "encode_lines_per_second", (double)o->n / enc);
  va_json_number(&j, "encode_tokens_per_second", (double)o->tokens / enc);
  va_json_number(&j, "tokenize_encode_cpu_seconds", cpu_sum);
  va_json_number(&j, "lines_per_cpu_second", cpu_sum > 0 ? (double)o->n / cpu_sum : 0.0);
  if (!strcmp(ei->backend, "cuda")) { /* the GPU's own time for the forward passes, without the host's share */
    va_json_string(&j, "gpu_dense_layers", ei->dense);
    va_json_number(&j, "gpu_setup_seconds_max", fwd_mx[2]);
    va_json_number(&j, "gpu_setup_wait_seconds_max", fwd_mx[3]);
    va_json_object(&j, "gpu_forward_seconds");
    va_json_number(&j, "min", -fwd_mx[1]);
    va_json_number(&j, "max", fwd_mx[0]);
    va_json_end(&j);
    va_json_number(&j, "gpu_forward_lines_per_second", fwd_mx[0] > 0 ? (double)o->n / fwd_mx[0] : 0.0);
    va_json_int(&j, "ranks_with_vectors_in_gpu_memory", ranks_on_gpu); /* written from there (embed_rows) */
  }
  va_json_object(&j, "phases_seconds");
  for (int p = 0; p < NPH; p++) {
    va_json_object(&j, ph_names[p]);
    va_json_number(&j, "min", mn[p]);
    va_json_number(&j, "max", mx[p]);
    va_json_end(&j);
  }
  va_json_end(&j);
  /* the tokenizer's threads, from their start to the last line: during the encode phase but its first window */
  va_json_object(&j, "tokenizer_seconds");
  va_json_number(&j, "min", tok_mn);
  va_json_number(&j, "max", tok_mx);
  va_json_end(&j);
  va_json_number(&j, "peak_rss_bytes_max", rss_max);
  va_json_finish(&j);
  return va_text_commit(f, "metrics file", a->metrics);
}

/* --- the command --------------------------------------------------------------------------------- */
static const int *sort_lens; /* qsort has no context argument in C11 */
static int by_len_desc(const void *x, const void *y) {
  int64_t i = *(const int64_t *)x, j = *(const int64_t *)y;
  if (sort_lens[i] != sort_lens[j]) return sort_lens[i] > sort_lens[j] ? -1 : 1;
  return (i > j) - (i < j); /* stable: input order among equal lengths */
}

/* Sorts lines [s, s + window) of order (the block's lines from s on, clipped to n) longest first and
 * returns the most tokens a batch of that window holds. */
static int64_t window_sort(int64_t *order, const int *lens, int64_t s, int64_t n, int64_t window, int batch) {
  const int64_t wn = n - s < window ? n - s : window;
  qsort(order + s, (size_t)wn, sizeof *order, by_len_desc);
  int64_t most = 1;
  for (int64_t b0 = s; b0 < s + wn; b0 += batch) {
    int64_t t = 0;
    for (int64_t i = b0; i < s + wn && i < b0 + batch; i++) t += lens[order[i]];
    if (t > most) most = t;
  }
  return most;
}

/* What the job does once the corpus' totals are known: they go to the outputs' attributes and the log,
 * and the vectors file written during the encoding is opened (collective) with its writer thread. */
typedef struct {
  const va_embed_options_t *a;
  embed_out_t *o;
  int threads;
  const va_bert_t *model;
  const char *vocab_path;
  int encode, write_during;
  double vec_bytes;
  va_h5_out_t out;
  line_writer_t writer;
  int writer_on;
  int64_t encoded; /* lines [0, encoded) of the block are encoded: whole windows */
} corpus_run_t;

/* The vectors file: its room, creation and objects checked (agreed on every rank), then its writer thread
 * started with the windows encoded so far. 0, or the agreed error. */
static int vectors_open(corpus_run_t *c) {
  const int rc =
      va_h5_write_open(&c->out, "vectors file", c->a->out_file, c->vec_bytes, c->a->io_mode, embed_setup, c->o);
  if (!rc && c->out.file >= 0) { /* -1: this rank's file did not open, close says why */
    line_writer_start(&c->writer, c->o, c->out.file);
    c->writer_on = 1;
    line_writer_post(&c->writer, c->encoded);
  }
  return rc;
}

/* Called on every rank once the sums are known. A bad line: nothing (the caller agrees on it); else the
 * totals and the log line, and the vectors file opened when it is written during the encoding. 0, or the
 * agreed error of the open. */
static int corpus_known(corpus_run_t *c, const va_tok_totals_t *t) {
  if (t->glob[VA_TT_BAD]) return 0;
  embed_out_t *o = c->o;
  o->tokens = t->glob[VA_TT_TOKENS];
  o->truncated = t->glob[VA_TT_TRUNCATED];
  o->invalid = t->glob[VA_TT_INVALID];
  o->empty = t->glob[VA_TT_EMPTY];
  const va_embed_options_t *a = c->a;
  char what[VA_PATH_MAX + 96];
  if (c->encode) snprintf(what, sizeof what, "model %s (%s)", a->model_dir, c->model->weights_dtype);
  else snprintf(what, sizeof what, "vocabulary %s; tokenizing only (no --out)", c->vocab_path);
  va_log0("embed: %lld lines (%lld tokens, %lld truncated to %d, %lld ill-formed UTF-8 replaced, %lld empty) from "
          "%s on %d rank(s) x %d thread(s); %s\n",
          (long long)o->n, (long long)o->tokens, (long long)o->truncated, a->max_tokens, (long long)o->invalid,
          (long long)o->empty, a->input, va_proc.nranks, c->threads, what);
  return c->write_during ? vectors_open(c) : 0;
}

/* The whole embed job. write_out: check and write the command's outputs (the embed command); keep:
 * hand this rank's rows to the caller instead of freeing them (compress --embed). The embed command
 * with --token-ids-out and no --out only tokenizes: no weights are read and no encoder runs. */
static int embed_job(const va_embed_options_t *opts, int write_out, va_embedded_t *keep) {
  va_embed_options_t a = *opts;
  if (keep) a.token_ids_out = NULL; /* compress --embed checks and writes only outputs of its own */
  const int encode = keep || a.out_spec;
  const int write_vectors = write_out && a.out_spec, write_ids = write_out && a.token_ids_out;
  char err[1024] = "";
  double ph[NPH] = {0}, t_start = va_now(), t0;

  /* Model: every rank loads its own copy (read-only afterwards). */
  t0 = va_now();
  char vocab_path[VA_PATH_MAX + 64], config_path[VA_PATH_MAX + 64], weights_path[VA_PATH_MAX + 64];
  snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", a.model_dir);
  snprintf(config_path, sizeof config_path, "%s/config.json", a.model_dir);
  snprintf(weights_path, sizeof weights_path, "%s/%s", a.model_dir,
           !strcmp(a.weights, "fp16") ? "model-fp16.safetensors" : "model.safetensors");
  int rc = 0;
  if (write_out && !keep) { /* the embed command (compress --embed checks its own files) */
    const va_file_use_t inputs[] = {{"corpus", a.input, 0},
                                    {"vocabulary", vocab_path, 0},
                                    {"model configuration", encode ? config_path : "", 0},
                                    {"model weights", encode ? weights_path : "", 0}};
    const va_file_use_t outputs[] = {{"vectors file", write_vectors ? a.out_file : "", 1},
                                     {"token ids file", write_ids ? a.ids_file : "", 1},
                                     {"metrics file", a.metrics ? a.metrics : "", 1}};
    if ((rc = va_files_prepare(inputs, 4, outputs, 3))) return rc;
    va_stop_advice("nothing was written: run the command again");
  }
  /* The device is chosen (and its context created) while the vocabulary and weights are read. */
  va_device_pick_t *pick = encode ? va_encoder_pick_device(a.backend) : NULL;
  char merr[768] = "";
  va_tokenizer_t *tok = NULL;
  va_bert_t model;
  memset(&model, 0, sizeof model);
  if (!file_exists(a.model_dir)) {
    snprintf(merr, sizeof merr, "model directory '%s' does not exist", a.model_dir);
    rc = VA_EXIT_INPUT;
  }
  if (!rc && !(tok = va_tok_load(vocab_path, merr, sizeof merr))) rc = VA_EXIT_INPUT;
  if (!rc && encode && va_bert_load(config_path, weights_path, &model, merr, sizeof merr)) rc = VA_EXIT_INPUT;
  if (!rc && encode && va_tok_vocab_size(tok) != model.vocab) {
    snprintf(merr, sizeof merr, "'%s' has %d entries but the model's vocabulary is %d", vocab_path,
             va_tok_vocab_size(tok), model.vocab);
    rc = VA_EXIT_INPUT;
  }
  if (rc) snprintf(err, sizeof err, "embed: model: %s (run scripts/fetch-model, or pass --model DIR)", merr);
  if (!rc && encode && a.max_tokens > model.max_pos) {
    snprintf(err, sizeof err, "embed: --max-tokens %d exceeds the model's %d positions", a.max_tokens, model.max_pos);
    rc = VA_EXIT_USAGE;
  }
  const char *gpu_precision = strcmp(a.precision, "auto") ? a.precision : "fp16";
  if (!rc && pick) va_encoder_stage(pick, &model, gpu_precision); /* while the device starts */
  rc = va_agree(rc, err);
  int device = pick ? va_encoder_picked(pick) : -1;
  if (rc) {
    va_encoder_pick_free(pick);
    va_tok_free(tok);
    va_bert_free(&model);
    return rc;
  }

  /* Encoder: CPU or CUDA on every rank (never a mix, so rows do not depend on the rank they land on);
   * none when only tokenizing. */
  int all_have = device >= 0;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (encode && !strcmp(a.backend, "cuda") && !all_have) {
    snprintf(err, sizeof err, "embed: --backend cuda, but rank %d on %s sees no CUDA device", va_proc.rank,
             va_proc.host);
    rc = va_agree(device < 0 ? VA_EXIT_USAGE : 0, err);
    va_encoder_pick_free(pick);
    va_tok_free(tok);
    va_bert_free(&model);
    return rc;
  }
  if (!all_have) device = -1;
  if (encode && device < 0 && strcmp(a.precision, "auto") && strcmp(a.precision, "fp32"))
    va_log0(
        "embed: --precision %s applies to the GPU encoder; no GPU on every rank, so the CPU encoder computes in fp32\n",
        a.precision);
  const int batch = a.batch > 0 ? a.batch : device >= 0 ? 256 : 64;
  int threads = a.threads > 0 ? a.threads : va_cpu_count() / (va_proc.local_nranks > 0 ? va_proc.local_nranks : 1);
  if (threads < 1) threads = 1;
  /* The GPU encoder sets itself up while this thread reads and tokenizes (docs/performance.md). */
  const int64_t job_tokens = encode && device >= 0 ? estimate_job_tokens(a.input) : 0;
  va_encoder_t *enc = encode ? va_encoder_start(pick, &model, device, gpu_precision, batch, threads, job_tokens) : NULL;
  ph[PH_LOAD] = va_now() - t0;

  /* Input block. */
  t0 = va_now();
  va_lines_t L;
  rc = va_lines_read(a.input, &L, err, sizeof err) ? VA_EXIT_INPUT : 0;
  rc = va_agree(rc, err);
  if (rc) {
    va_encoder_free(enc);
    va_lines_free(&L);
    va_tok_free(tok);
    va_bert_free(&model);
    return rc;
  }
  int64_t n_local = L.n, row0 = 0, n = 0;
  VA_MPI(MPI_Exscan(&n_local, &row0, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  if (va_proc.rank == 0) row0 = 0; /* MPI_Exscan leaves rank 0's result undefined */
  VA_MPI(MPI_Allreduce(&n_local, &n, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  if (n == 0) snprintf(err, sizeof err, "embed: input '%s' holds no lines (empty corpus)", a.input);
  rc = va_agree(n == 0 ? VA_EXIT_INPUT : 0, err);
  if (rc) {
    va_encoder_free(enc);
    va_lines_free(&L);
    va_tok_free(tok);
    va_bert_free(&model);
    return rc;
  }
  ph[PH_READ] = va_now() - t0;

  /* Tokenize (JSONL: take the "text" field first) on a pool of threads, one tokenizer each. The encoder
   * starts once the first window's lines are tokenized, the rest being tokenized meanwhile (job/embed_lines.h). */
  t0 = va_now();
  double cpu0 = cpu_seconds();
  int64_t *off = malloc((size_t)(n_local + 1) * sizeof *off);
  int *lens = malloc((size_t)(n_local + 1) * sizeof *lens);
  if (!off || !lens) VA_FATAL("out of memory for the token ids of %lld lines", (long long)n_local);
  const va_tok_spec_t spec = {a.input, vocab_path, a.jsonl, a.max_tokens};
  va_tok_pool_t *pool = va_tok_pool_start(&spec, &L, row0, tok, off, lens, threads);
  const int64_t window = (int64_t)WINDOW_BATCHES * batch;
  va_tok_totals_t tt;
  memset(&tt, 0, sizeof tt);
  const int first_failed = va_tok_pool_wait(pool, encode && window < n_local ? window : n_local);
  if (!encode) (void)va_tok_totals_poll(&tt, pool, 1);
  ph[PH_TOKENIZE] = va_now() - t0;
  va_blas_threads(1); /* the CPU encoder spreads a batch's sequences over its threads, one sgemm thread each */

  /* Encode: a window of WINDOW_BATCHES batches of consecutive lines at a time, longest first within
   * the window, in batches of up to --batch similar lengths. */
  t0 = va_now();
  const int d = model.hidden; /* 0 when only tokenizing */
  float *emb = NULL, *demb = NULL;
  va_encoder_info_t info = {.backend = "none", .precision = "none"};
  embed_out_t o = {&a, n, row0, n_local, d, NULL, NULL, 0, device, 0, 0, 0, 0};
  /* Without MPI-IO the vectors file is open while the lines are encoded, each window written by a thread
   * of its own once encoded; through MPI-IO (every rank writing at once) it is written afterwards. */
  const int write_during = encode && write_vectors && !va_io_collective(a.io_mode);
  const double vec_bytes = (double)n * (double)d * 4.0; /* the vectors file's data, float32 */
  corpus_run_t cr = {.a = &a,
                     .o = &o,
                     .threads = threads,
                     .model = &model,
                     .vocab_path = vocab_path,
                     .encode = encode,
                     .write_during = write_during,
                     .vec_bytes = vec_bytes,
                     .out = {.file = -1}};
  if (tt.known) (void)corpus_known(&cr, &tt); /* only tokenizing: no vectors file */
  if (encode) {
    /* On a GPU the vectors stay in device memory where they fit, so that no batch's vectors pass through
     * the host: for compress --embed with nothing to write (handed to compress's CUDA backend, or copied
     * to the host only if that does not take them) and for the vectors file (written from there a block
     * at a time). */
    const int device_out = device >= 0 && (keep ? !write_out : write_vectors);
    int64_t *order = malloc((size_t)(n_local ? n_local : 1) * sizeof *order);
    int32_t *bids = malloc((size_t)batch * (size_t)a.max_tokens * sizeof *bids);
    int *blens = malloc((size_t)batch * sizeof *blens);
    float *bout = malloc((size_t)batch * (size_t)d * sizeof(float));
    if (!order || !bids || !blens || !bout) VA_FATAL("out of memory for %lld embeddings", (long long)n_local);
    for (int64_t i = 0; i < n_local; i++) order[i] = i;
    sort_lens = lens;
    /* The encoder is sized for the first window's largest batch before any batch runs (a shortage of
     * memory shows at once), and grows for a later window that needs more. */
    const int64_t max_batch_tokens = first_failed ? 1 : window_sort(order, lens, 0, n_local, window, batch);
    rc = va_agree(va_encoder_ready(enc, max_batch_tokens, err, sizeof err) ? VA_EXIT_INPUT : 0, err);
    if (rc) {
      va_tok_pool_halt(pool);
      (void)va_tok_totals_poll(&tt, pool, 1);
      va_encoder_free(enc);
      free(order);
      free(bids);
      free(blens);
      free(bout);
      free(va_tok_pool_free(pool, 0));
      free(off);
      free(lens);
      va_lines_free(&L);
      va_tok_free(tok);
      va_bert_free(&model);
      return rc;
    }
    if (device_out) demb = va_encoder_output_to_device(enc, n_local);
    if (!demb && !(emb = malloc((size_t)(n_local ? n_local : 1) * (size_t)d * sizeof(float))))
      VA_FATAL("out of memory for %lld embeddings", (long long)n_local);
    if (!first_failed) va_encoder_place(enc, order, 0, window < n_local ? window : n_local);
    o.emb = emb;
    o.demb = demb;
    o.on_gpu = demb != NULL;
    va_encoder_describe(enc, &info);
    if (device >= 0)
      va_log0("embed: backend cuda: %d rank(s), rank 0 on %s, dense layers by %s, batch %d\n", va_proc.nranks,
              info.device, info.dense, batch);
    else va_log0("embed: backend cpu: %d rank(s) x %d thread(s), OpenBLAS, batch %d\n", va_proc.nranks, threads, batch);
    int64_t done = 0, tok_done = 0;
    int outstanding = 0; /* batches submitted and not yet collected: a new one is queued before the last is collected */
    double last = va_now();
    /* no new batch after a stop request, a bad line, or a failed open of the vectors file; the one in flight
     * is collected */
    int stopping = first_failed;
    for (int64_t s = 0; (s < n_local && !stopping) || outstanding; s += batch) {
      stopping = stopping || va_stop_requested();
      if (s > 0 && s % window == 0 && s < n_local && !stopping) { /* the next window: wait for its lines' ids */
        const int64_t wn = n_local - s < window ? n_local - s : window;
        if (va_tok_pool_wait(pool, s + wn)) stopping = 1;
        else {
          va_encoder_reserve(enc, window_sort(order, lens, s, n_local, window, batch));
          va_encoder_place(enc, order + s, s, wn);
        }
      }
      int nb = s < n_local && !stopping ? (n_local - s < batch ? (int)(n_local - s) : batch) : 0;
      int64_t p = 0;
      for (int b = 0; b < nb; b++) {
        int64_t i = order[s + b];
        memcpy(bids + p, va_tok_pool_ids(pool, i), (size_t)lens[i] * sizeof *bids);
        blens[b] = lens[i];
        p += lens[i];
      }
      if (nb) {
        va_encoder_submit(enc, bids, blens, nb, s);
        outstanding++;
      }
      if (outstanding == 2 || (!nb && outstanding)) {
        int64_t out_s = 0;
        int out_nb = va_encoder_collect(enc, emb ? bout : NULL, &out_s);
        outstanding--;
        if (emb)
          for (int b = 0; b < out_nb; b++)
            memcpy(emb + order[out_s + b] * d, bout + (int64_t)b * d, (size_t)d * sizeof(float));
        const int64_t upto = out_s + out_nb; /* batches come back in order: a window is encoded with its last */
        if (upto % window == 0 || upto == n_local) {
          cr.encoded = upto;
          if (cr.writer_on) line_writer_post(&cr.writer, upto);
        }
      }
      if (!tt.known && va_tok_totals_poll(&tt, pool, 0)) {
        rc = corpus_known(&cr, &tt);
        stopping = stopping || rc || tt.glob[VA_TT_BAD];
      }
      if (tt.posted && L.buf) va_lines_free(&L); /* posted: the pool has joined, the text is no longer read */
      done += nb;
      tok_done += p;
      double now = va_now();
      if (va_proc.rank == 0 && a.progress > 0 && now - last >= a.progress && done < n_local) {
        /* by tokens once this rank's are all counted, by lines before */
        const double el = now - t0, rate = done / el,
                     share = tt.posted
                                 ? (double)tok_done / (double)(tt.local[VA_TT_TOKENS] ? tt.local[VA_TT_TOKENS] : 1)
                                 : (double)done / (double)(n_local ? n_local : 1);
        char es[32];
        va_format_seconds(share > 0 ? el * (1.0 - share) / share : 0.0, es, sizeof es);
        va_log0(
            "embed: rank 0 %lld/%lld lines (%.0f%% of its %s), %.1f lines/s per rank (~%.0f over %d ranks), ETA %s\n",
            (long long)done, (long long)n_local, 100.0 * share, tt.posted ? "tokens" : "lines", rate,
            rate * va_proc.nranks, va_proc.nranks, es);
        last = now;
      }
    }
    va_encoder_describe(enc, &info);
    va_encoder_free(enc);
    free(bids);
    free(blens);
    free(bout);
    free(order);
  }
  /* Every rank learns the totals (and opens the vectors file, when it had not yet) whether it stopped early or not. */
  va_tok_pool_halt(pool);
  if (!tt.known) {
    (void)va_tok_totals_poll(&tt, pool, 1);
    rc = corpus_known(&cr, &tt);
  }
  const double tokenizer_seconds = va_tok_pool_seconds(pool);
  int32_t *ids = va_tok_pool_free(pool, write_ids);
  va_lines_free(&L);
  va_tok_free(tok);
  if (tt.glob[VA_TT_BAD])
    rc = va_agree(tt.local[VA_TT_BAD] ? VA_EXIT_INPUT : 0, tt.err); /* the lowest failing rank's */
  if (rc) { /* the vectors file never opened (a failed open removed its temporary file) */
    free(ids);
    free(off);
    free(lens);
    free(emb);
    va_encoder_free_device_rows(demb);
    va_bert_free(&model);
    return rc;
  }
  ph[PH_ENCODE] = va_now() - t0;
  double cpu_used = cpu_seconds() - cpu0;
  /* Write: the vectors (the rest of them, when written during the encoding), then the token ids; each
   * rank its own lines, in input order. Each file is renamed into place only when complete. */
  t0 = va_now();
  if (cr.writer_on) line_writer_join(&cr.writer);
  va_stop_point(encode ? "embedding" : "tokenizing"); /* a stopped job's open file is removed on the way out */
  if (write_during) rc = va_h5_write_close(&cr.out);
  else if (write_vectors)
    rc = va_h5_write_file("vectors file", a.out_file, vec_bytes, a.io_mode, embed_setup, embed_rows, &o);
  if (!rc && write_ids) {
    int64_t tok0 = 0, used = tt.local[VA_TT_TOKENS];
    VA_MPI(MPI_Exscan(&used, &tok0, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    if (va_proc.rank == 0) tok0 = 0; /* MPI_Exscan leaves rank 0's result undefined */
    for (int64_t i = 0; i < n_local; i++) off[i] += tok0;
    ids_out_t io = {&a, n, row0, n_local, o.tokens, tok0, used, ids, lens, off, o.truncated, o.invalid, o.empty};
    rc = va_h5_write_file("token ids file", a.ids_file, 4.0 * (double)o.tokens + 12.0 * (double)n, a.io_mode, ids_setup,
                          ids_rows, &io);
    if (!rc)
      va_log0("embed: wrote the token ids to %s:%s (%lld ids, int32) with %s and %s\n", a.ids_file, a.ids_dataset,
              (long long)o.tokens, a.ids_lengths, a.ids_offsets);
  }
  free(ids);
  free(off);
  free(lens);
  if (keep && !rc) *keep = (va_embedded_t){emb, n, row0, n_local, d, demb, device};
  else {
    free(emb);
    va_encoder_free_device_rows(demb);
  }
  char wdt[8];
  snprintf(wdt, sizeof wdt, "%s", encode ? model.weights_dtype : "none");
  va_bert_free(&model);
  if (rc) return rc;
  ph[PH_WRITE] = va_now() - t0;
  ph[PH_TOTAL] = va_now() - t_start;
  double enc_max = 0;
  VA_MPI(MPI_Allreduce(&ph[PH_ENCODE], &enc_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  if (!write_out) {
    va_log0("embed: %lld x %d vectors in %.2f s: %.1f lines/s encoding (%d rank(s)), kept in memory\n", (long long)n, d,
            ph[PH_TOTAL], (double)n / (enc_max > 0 ? enc_max : 1e-9), va_proc.nranks);
    return 0;
  }
  if ((rc = write_metrics(&a, &o, ph, tokenizer_seconds, cpu_used, threads, wdt, &info, encode ? batch : 0))) return rc;
  if (write_vectors)
    va_log0("embed: wrote %s:%s (%lld x %d float32, distance = angular) in %.2f s: %.1f lines/s overall, %.1f "
            "lines/s encoding (%d rank(s))\n",
            a.out_file, a.dataset, (long long)n, d, ph[PH_TOTAL], (double)n / ph[PH_TOTAL],
            (double)n / (enc_max > 0 ? enc_max : 1e-9), va_proc.nranks);
  else
    va_log0("embed: tokenized %lld lines in %.2f s: %.1f lines/s overall (%d rank(s))\n", (long long)n, ph[PH_TOTAL],
            (double)n / ph[PH_TOTAL], va_proc.nranks);
  return 0;
}

int va_embed_job(const va_embed_options_t *o) {
  if (o->progress > 0) va_heartbeat_start(); /* no quiet stretch on rank 0 (heartbeat.h) */
  int rc = embed_job(o, 1, NULL);
  va_heartbeat_stop();
  return rc;
}

int va_embed_rows(const va_embed_options_t *o, int write_out, va_embedded_t *out) {
  return embed_job(o, write_out, out);
}
