/* search.c: `vecanneal search`, the job: the index's anchors and recorded source, each rank's shard of
 * the source rows grouped into inverted lists by its slice of /assignments (checked against the
 * recorded checksum), or of its codes when the index has them (job/search_codes.h: no source row read
 * unless --rerank asks), the queries, then for every nprobe of the sweep the batches of queries (probe,
 * scan of this rank's members of the probed lists, merge over the ranks on rank 0), recall against a
 * ground truth, and the outputs: the result file, the sweep's CSV, the metrics (docs/search.md). */
#define _POSIX_C_SOURCE 200809L /* stat's st_size through sys/stat.h */
#include "job/search.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/search.h" /* va_search_engine_t, va_search_lists_t */
#include "comm/topk.h"      /* va_topk_merge_ranks */
#include "cpu/search.h"     /* va_search_unit_rows */
#include "io/files.h"       /* va_files_prepare, va_text_open, va_text_commit */
#include "io/h5io.h"
#include "io/index_read.h"
#include "job/nearest.h"      /* va_rows_to_frame */
#include "job/search_codes.h" /* va_search_codes_t */
#include "core/stop.h"        /* va_stop_point, va_stop_advice */
#include "util/heartbeat.h"
#include "util/json.h"
#include "util/util.h"

void va_search_options_default(va_search_options_t *o) {
  memset(o, 0, sizeof *o);
  o->k = 10;
  o->nprobe[0] = 16;
  o->n_nprobe = 1;
  o->batch = VA_SEARCH_BATCH;
  o->io = "auto";
  o->backend = "auto";
  o->precision = "fp32";
  o->scan = "auto";
}

int va_search_options_resolve(va_search_options_t *o, char *err, size_t len) {
  if (!o->index) return snprintf(err, len, "search: --index INDEX.h5 is required"), 1;
  if (!o->queries) return snprintf(err, len, "search: --queries FILE.h5:DATASET is required"), 1;
  if (!o->out) return snprintf(err, len, "search: --out RESULT.h5 is required"), 1;
  if (o->exact && o->n_nprobe > 1)
    return snprintf(err, len, "search: --exact scans every row: a sweep over --nprobe means nothing there"), 1;
  o->io_mode = !strcmp(o->io, "collective")    ? VA_IO_COLLECTIVE
               : !strcmp(o->io, "independent") ? VA_IO_INDEPENDENT
                                               : VA_IO_AUTO;
  if (strcmp(o->io, "auto") && o->io_mode == VA_IO_AUTO)
    return snprintf(err, len, "search: --io must be auto, collective or independent"), 1;
  if (strcmp(o->backend, "auto") && strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda"))
    return snprintf(err, len, "search: --backend must be auto, cpu or cuda, got '%s'", o->backend), 1;
  int known = 0;
  for (int i = 0; va_search_precisions[i]; i++) known |= !strcmp(o->precision, va_search_precisions[i]);
  if (!known)
    return snprintf(err, len, "search: --precision must be fp32, tf32, fp16 or bf16, got '%s'", o->precision), 1;
  o->scan_mode = !strcmp(o->scan, "codes")  ? VA_SEARCH_SCAN_CODES
                 : !strcmp(o->scan, "rows") ? VA_SEARCH_SCAN_ROWS
                                            : VA_SEARCH_SCAN_AUTO;
  if (strcmp(o->scan, "auto") && o->scan_mode == VA_SEARCH_SCAN_AUTO)
    return snprintf(err, len, "search: --scan must be auto, codes or rows, got '%s'", o->scan), 1;
  if (o->scan_mode == VA_SEARCH_SCAN_CODES && o->exact)
    return snprintf(err, len, "search: --exact measures every float row: drop --scan codes (or --exact)"), 1;
  if (o->rerank > 0 && o->rerank < o->k)
    return snprintf(err, len, "search: --rerank %lld re-scores fewer candidates than the k = %lld kept: give R >= k",
                    (long long)o->rerank, (long long)o->k),
           1;
  if (o->rerank > 0 && (o->scan_mode == VA_SEARCH_SCAN_ROWS || o->exact))
    return snprintf(err, len,
                    "search: --rerank re-scores candidates found on the codes: it needs --scan codes or auto, "
                    "without --exact"),
           1;
  return 0;
}

/* What one nprobe of the sweep measured (rank 0's; broadcast for the file's attributes). */
typedef struct {
  int64_t nprobe;
  double seconds, qps, recall; /* recall: -1 without a ground truth */
} sweep_point_t;

/* The rows of this rank's shard land in list order as the reader hands them over chunk by chunk. */
typedef struct {
  float *staging, *rows;
  const int64_t *pos; /* local row -> its place in list order */
  int64_t d;
} list_sink_t;

static float *sink_buffer(void *ctx, int64_t local_row0) {
  (void)local_row0;
  return ((list_sink_t *)ctx)->staging;
}

static void sink_filled(void *ctx, int64_t local_row0, int64_t nrows) {
  list_sink_t *s = ctx;
  for (int64_t i = 0; i < nrows; i++)
    memcpy(s->rows + s->pos[local_row0 + i] * s->d, s->staging + i * s->d, (size_t)s->d * sizeof(float));
}

static int choose_threads(int asked) {
  if (asked > 0) return asked;
  int mine = va_cpu_count();
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int t = (online > 0 && mine < online) ? mine : mine / (va_proc.local_nranks > 0 ? va_proc.local_nranks : 1);
  return t > 0 ? t : 1;
}

/* The data spec compress read: FILE:DATASET, or FILE for a vector file (no dataset recorded). */
static void recorded_spec(const va_index_data_t *ix, char *spec, size_t len) {
  if (ix->source_dataset[0]) snprintf(spec, len, "%s:%s", ix->source_file, ix->source_dataset);
  else snprintf(spec, len, "%s", ix->source_file);
}

/* Collective: the first k columns of the ground truth (nq x k int64, rank 0's read broadcast), or an
 * agreed VA_EXIT_INPUT. spec: FILE[:DATASET], DATASET defaulting to /neighbors. */
static int64_t *read_ground_truth(const char *spec, int64_t nq, int64_t k) {
  char file[VA_PATH_MAX], dset[256], err[VA_PATH_MAX + 512] = "";
  const char *colon = strrchr(spec, ':');
  if (colon) va_split_spec(spec, file, sizeof file, dset, sizeof dset);
  else snprintf(file, sizeof file, "%s", spec), snprintf(dset, sizeof dset, "/neighbors");
  int64_t *truth = va_malloc((size_t)(nq * k) * sizeof(int64_t), "ground truth");
  int rc = 0;
  if (va_proc.rank == 0) {
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = f >= 0 && H5Lexists(f, dset, H5P_DEFAULT) > 0 ? H5Dopen2(f, dset, H5P_DEFAULT) : -1;
    hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1, ty = ds >= 0 ? H5Dget_type(ds) : -1;
    hsize_t dims[2] = {0, 0};
    if (f < 0) snprintf(err, sizeof err, "cannot open the ground truth '%s': %s", file, va_h5_last_error());
    else if (ds < 0) snprintf(err, sizeof err, "the ground truth file '%s' has no dataset '%s'", file, dset);
    else if (H5Tget_class(ty) != H5T_INTEGER || H5Sget_simple_extent_ndims(sp) != 2 ||
             H5Sget_simple_extent_dims(sp, dims, NULL) != 2 || dims[0] != (hsize_t)nq || dims[1] < (hsize_t)k)
      snprintf(err, sizeof err,
               "ground truth '%s:%s' must be an integer matrix of %lld rows (one per query) and at least k = %lld "
               "columns, found %llu x %llu",
               file, dset, (long long)nq, (long long)k, (unsigned long long)dims[0], (unsigned long long)dims[1]);
    else {
      hsize_t off[2] = {0, 0}, cnt[2] = {(hsize_t)nq, (hsize_t)k};
      hid_t mem = H5Screate_simple(2, cnt, NULL);
      if (mem < 0 || H5Sselect_hyperslab(sp, H5S_SELECT_SET, off, NULL, cnt, NULL) < 0 ||
          H5Dread(ds, H5T_NATIVE_INT64, mem, sp, H5P_DEFAULT, truth) < 0)
        snprintf(err, sizeof err, "reading the ground truth '%s:%s' failed: %s", file, dset, va_h5_last_error());
      if (mem >= 0) H5Sclose(mem);
    }
    rc = err[0] ? VA_EXIT_INPUT : 0;
    if (ty >= 0) H5Tclose(ty);
    if (sp >= 0) H5Sclose(sp);
    if (ds >= 0) H5Dclose(ds);
    if (f >= 0) H5Fclose(f);
  }
  VA_AGREE_OR_EXIT(rc, err);
  VA_MPI(MPI_Bcast(truth, (int)(nq * k), MPI_INT64_T, 0, MPI_COMM_WORLD));
  return truth;
}

/* recall@k: |ours ∩ truth's first k| / k, averaged over the queries. */
static double recall_at_k(const va_neighbor_t *ours, const int64_t *truth, int64_t nq, int64_t k) {
  double sum = 0;
  for (int64_t q = 0; q < nq; q++) {
    int64_t hit = 0;
    for (int64_t i = 0; i < k; i++)
      for (int64_t j = 0; j < k; j++)
        if (ours[q * k + i].id >= 0 && ours[q * k + i].id == truth[q * k + j]) {
          hit++;
          break;
        }
    sum += (double)hit / (double)k;
  }
  return nq > 0 ? sum / (double)nq : 0;
}

/* --- the result file ------------------------------------------------------------------------------- */
typedef struct {
  const va_search_options_t *o;
  const va_neighbor_t *result; /* nq x k, rank 0 */
  int64_t nq, k, nprobe, anchors;
  const char *metric;
  sweep_point_t last;
  int codes;      /* the lists held codes */
  int64_t rerank; /* R, or 0 */
} result_write_t;

static void result_setup(hid_t f, void *ctx) {
  const result_write_t *w = ctx;
  const int64_t nq = w->nq, k = w->k;
  hsize_t dims[2] = {(hsize_t)nq, (hsize_t)k};
  int64_t *ids = va_malloc((size_t)(nq * k > 0 ? nq * k : 1) * sizeof(int64_t), "result ids");
  float *dist = va_malloc((size_t)(nq * k > 0 ? nq * k : 1) * sizeof(float), "result distances");
  if (w->result)
    for (int64_t i = 0; i < nq * k; i++) {
      ids[i] = w->result[i].id;
      dist[i] = w->result[i].dist;
    }
  hid_t space = VA_H5(H5Screate_simple(2, dims, NULL));
  hid_t ds = va_h5_create_dataset(f, "/neighbors", H5T_STD_I64LE, space, H5P_DEFAULT);
  va_h5_write_whole(ds, H5T_NATIVE_INT64, ids);
  VA_H5(H5Dclose(ds));
  ds = va_h5_create_dataset(f, "/distances", H5T_IEEE_F32LE, space, H5P_DEFAULT);
  va_h5_write_whole(ds, H5T_NATIVE_FLOAT, dist);
  VA_H5(H5Dclose(ds));
  VA_H5(H5Sclose(space));
  free(ids);
  free(dist);
  va_h5_attr_i64(f, "k", k);
  va_h5_attr_i64(f, "nprobe", w->nprobe);
  va_h5_attr_i64(f, "exact", w->o->exact);
  va_h5_attr_i64(f, "anchors", w->anchors);
  va_h5_attr_str(f, "scan", w->codes ? "codes" : "rows");
  va_h5_attr_i64(f, "rerank", w->rerank);
  va_h5_attr_str(f, "metric", w->metric);
  va_h5_attr_str(f, "distance", !strcmp(w->metric, "cosine") ? "angular" : "euclidean");
  va_h5_attr_str(f, "index", w->o->index);
  va_h5_attr_str(f, "queries", w->o->queries);
  va_h5_attr_f64(f, "queries_per_second", w->last.qps);
  va_h5_attr_f64(f, "seconds", w->last.seconds);
  if (w->last.recall >= 0) {
    va_h5_attr_f64(f, "recall", w->last.recall);
    va_h5_attr_str(f, "ground_truth", w->o->ground_truth);
  }
  va_h5_attr_i64(f, "ranks", va_proc.nranks);
}

static void result_rows(hid_t f, void *ctx) { /* rank 0 wrote everything in setup */
  (void)f;
  (void)ctx;
}

/* --- the sweep's CSV and the metrics ------------------------------------------------------------- */
/* What scanned the lists: the engine's name and precision (fp32), or for codes cpu and pqMxBITS (+rerankR). */
typedef struct {
  const char *name;
  char precision[64];
} scanner_t;

static int write_sweep_csv(const va_search_options_t *o, const scanner_t *e, const sweep_point_t *pts, int npts) {
  if (!o->sweep_csv) return 0;
  FILE *f = va_proc.rank == 0 ? va_text_open(o->sweep_csv) : NULL;
  if (f) {
    fprintf(f, "backend,precision,nprobe,recall,qps\n");
    for (int i = 0; i < npts; i++) {
      char recall[32] = "";
      if (pts[i].recall >= 0) snprintf(recall, sizeof recall, "%.6f", pts[i].recall);
      fprintf(f, "%s,%s,%lld,%s,%.3f\n", e->name, e->precision, (long long)pts[i].nprobe, recall, pts[i].qps);
    }
  }
  return va_text_commit(f, "sweep CSV", o->sweep_csv);
}

typedef struct {
  double read_seconds, lists_seconds, total_seconds;
  int64_t n, d, nq, anchors;
  int cosine, threads;
  int codes;                     /* the lists held codes (else rows) */
  int64_t bytes_per_row, rerank; /* bytes of a row the scan reads (M codes or 4 d); rerank R or 0 */
  int64_t batch;                 /* queries per batch */
} search_figures_t;

static int write_metrics(const va_search_options_t *o, const scanner_t *e, const search_figures_t *fig,
                         const sweep_point_t *pts, int npts) {
  double rss = (double)va_peak_rss(), rss_max = 0;
  VA_MPI(MPI_Reduce(&rss, &rss_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  char *layout = va_json_gather_layout(e->name);
  FILE *f = o->metrics && va_proc.rank == 0 ? va_text_open(o->metrics) : NULL;
  if (!o->metrics || !f) {
    free(layout);
    return o->metrics ? va_text_commit(NULL, "metrics file", o->metrics) : 0;
  }
  va_json_writer_t j;
  va_json_start(&j, f);
  va_json_run_header(&j, "search", layout);
  free(layout);
  va_json_string(&j, "backend", e->name);
  va_json_string(&j, "precision", e->precision);
  va_json_string(&j, "index", o->index);
  va_json_string(&j, "queries", o->queries);
  va_json_string(&j, "ground_truth", o->ground_truth);
  va_json_string(&j, "metric", fig->cosine ? "cosine" : "l2");
  va_json_int(&j, "n", fig->n);
  va_json_int(&j, "d", fig->d);
  va_json_int(&j, "anchors", fig->anchors);
  va_json_int(&j, "query_count", fig->nq);
  va_json_int(&j, "k", o->k);
  va_json_bool(&j, "exact", o->exact);
  va_json_int(&j, "threads_per_rank", fig->threads);
  va_json_int(&j, "batch", fig->batch);
  va_json_string(&j, "scan", fig->codes ? "codes" : "rows");
  va_json_int(&j, "bytes_per_row_scanned", fig->bytes_per_row);
  va_json_int(&j, "rerank", fig->rerank);
  va_json_number(&j, "read_seconds", fig->read_seconds);
  va_json_number(&j, "lists_seconds", fig->lists_seconds);
  va_json_number(&j, "total_seconds", fig->total_seconds);
  va_json_array(&j, "sweep");
  for (int i = 0; i < npts; i++) {
    va_json_object(&j, NULL);
    va_json_int(&j, "nprobe", pts[i].nprobe);
    va_json_number(&j, "seconds", pts[i].seconds);
    va_json_number(&j, "queries_per_second", pts[i].qps);
    if (pts[i].recall >= 0) va_json_number(&j, "recall", pts[i].recall);
    else va_json_string(&j, "recall", NULL);
    va_json_end(&j);
  }
  va_json_end(&j);
  if (pts[npts - 1].recall >= 0) va_json_number(&j, "recall", pts[npts - 1].recall);
  va_json_number(&j, "queries_per_second", pts[npts - 1].qps);
  va_json_number(&j, "peak_rss_bytes_max", rss_max);
  va_json_finish(&j);
  return va_text_commit(f, "metrics file", o->metrics);
}

/* Collective: whether the lists hold codes, from --scan and the index; an agreed exit for what cannot be. */
static int choose_codes(const va_search_options_t *o, const va_index_data_t *ix) {
  char err[VA_PATH_MAX + 300] = "";
  if (o->scan_mode == VA_SEARCH_SCAN_CODES && ix->pq_m == 0)
    snprintf(err, sizeof err,
             "search: --scan codes asked for, but index '%s' has no codes: compress it with --codes pq, or search "
             "the rows (--scan rows or auto)",
             o->index);
  else if (o->rerank > 0 && ix->pq_m == 0)
    snprintf(err, sizeof err,
             "search: --rerank re-scores the candidates of a scan on codes, but index '%s' has no codes: drop "
             "--rerank, or compress with --codes pq",
             o->index);
  VA_AGREE_OR_EXIT(err[0] ? VA_EXIT_USAGE : 0, err);
  if (ix->pq_m == 0 || o->scan_mode == VA_SEARCH_SCAN_ROWS) return 0;
  if (o->scan_mode == VA_SEARCH_SCAN_CODES) return 1;
  if (o->exact) {
    va_log0("note: index '%s' has codes; --exact measures the float rows\n", o->index);
    return 0;
  }
  return 1;
}

/* --- the job ------------------------------------------------------------------------------------- */
/* The nprobe nearest anchors of a batch's nq queries, on every rank: rank r probes queries
 * [nq r / P, nq (r + 1) / P) and the slices are gathered, so the probe's work is divided over the ranks
 * and every rank holds every query's probes. A query's probes depend on it and the anchors alone
 * (va_search_probe; the GPU engine gives the same bits), so the result is the same as one rank probing
 * them all. */
static void probe_batch(const va_search_engine_t *engine, const va_search_lists_t *lists, const float *Q, int64_t nq,
                        int cosine, int64_t nprobe, int64_t *probes) {
  const int P = nq * nprobe <= INT_MAX ? va_proc.nranks : 1; /* MPI counts are int: above, each rank probes all */
  const int r = P > 1 ? va_proc.rank : 0;
  const int64_t q0 = nq * r / P, q1 = nq * (r + 1) / P;
  engine->probe(engine, lists, Q + q0 * lists->d, q1 - q0, cosine, nprobe, probes + q0 * nprobe);
  if (P == 1) return;
  int *counts = va_malloc((size_t)P * sizeof(int), "probe counts"),
      *displs = va_malloc((size_t)P * sizeof(int), "probe counts");
  for (int i = 0; i < P; i++) {
    const int64_t a = nq * i / P, b = nq * (i + 1) / P;
    counts[i] = (int)((b - a) * nprobe);
    displs[i] = (int)(a * nprobe);
  }
  VA_MPI(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, probes, counts, displs, MPI_INT64_T, MPI_COMM_WORLD));
  free(displs);
  free(counts);
}

static int search_job(const va_search_options_t *o) {
  const double t_start = va_now();
  char err[3 * VA_PATH_MAX] = "";
  int rc;
  va_index_data_t ix;
  if ((rc = va_index_read(o->index, VA_INDEX_SOURCE, &ix))) return rc;
  /* Codes are measured in the frame they were trained in (docs/codes.md): read it too. */
  const int codes = choose_codes(o, &ix);
  if (codes) {
    va_index_data_free(&ix);
    if ((rc = va_index_read(o->index, VA_INDEX_SOURCE | VA_INDEX_FRAME, &ix))) return rc;
  }
  const int need_rows = !codes || o->rerank > 0; /* the scan on codes alone reads no source row */
  const char *metric = ix.cosine ? "cosine" : "l2";
  /* The base rows: --data, else the source the index recorded. compress --embed records a corpus. */
  const int embedded = ix.source_dataset[0] == '(';
  char data_spec[VA_PATH_MAX + 300], data_file[VA_PATH_MAX] = "", qfile[VA_PATH_MAX], gfile[VA_PATH_MAX] = "",
                                     gdset[256];
  const char *why_rows = codes ? " (--rerank re-scores with the source rows)" : "";
  if (o->data) snprintf(data_spec, sizeof data_spec, "%s", o->data);
  else recorded_spec(&ix, data_spec, sizeof data_spec);
  if (!need_rows) {
    if (o->data) va_log0("note: the codes are scanned: --data '%s' is not read (--rerank R reads it)\n", o->data);
  } else if (!o->data && embedded)
    snprintf(err, sizeof err,
             "index '%s' was compressed from the text corpus '%s': pass --data with its vectors (compress "
             "--embed-out)%s",
             o->index, ix.source_file, why_rows);
  else if (!o->data && va_proc.rank == 0 && access(ix.source_file, R_OK) != 0)
    snprintf(err, sizeof err,
             "the source of index '%s', '%s', is missing or unreadable: pass --data FILE[:DATASET] with the same "
             "rows%s",
             o->index, ix.source_file, why_rows);
  VA_AGREE_OR_EXIT(err[0] ? VA_EXIT_INPUT : 0, err);
  if (need_rows) va_input_file(data_spec, VA_INPUT_AUTO, data_file, sizeof data_file);
  va_input_file(o->queries, VA_INPUT_AUTO, qfile, sizeof qfile);
  if (o->ground_truth) {
    if (strrchr(o->ground_truth, ':')) va_split_spec(o->ground_truth, gfile, sizeof gfile, gdset, sizeof gdset);
    else snprintf(gfile, sizeof gfile, "%s", o->ground_truth);
  }
  const va_file_use_t inputs[] = {
      {"index", o->index, 0}, {"queries", qfile, 0}, {"data", data_file, 0}, {"ground truth", gfile, 0}};
  const va_file_use_t outputs[] = {{"result", o->out, 1},
                                   {"metrics file", o->metrics ? o->metrics : "", 1},
                                   {"sweep CSV", o->sweep_csv ? o->sweep_csv : "", 1}};
  if ((rc = va_files_prepare(inputs, 4, outputs, 3))) {
    va_index_data_free(&ix);
    return rc;
  }
  va_stop_advice("nothing was written: run the search again");

  /* Shapes: the queries and the data against the index. */
  va_input_t qin, din;
  va_input_open(o->queries, &qin);
  char qlabel[VA_PATH_MAX + 300], dlabel[VA_PATH_MAX + 300] = "none: the codes are scanned";
  va_input_label(&qin, qlabel, sizeof qlabel);
  if (need_rows) {
    va_input_open(data_spec, &din);
    va_input_label(&din, dlabel, sizeof dlabel);
  }
  if (qin.d != ix.d)
    snprintf(err, sizeof err, "queries '%s' have %lld dimensions, index '%s' has %lld", qlabel, (long long)qin.d,
             o->index, (long long)ix.d);
  else if (need_rows && (din.n != ix.n || din.d != ix.d))
    snprintf(err, sizeof err, "data '%s' is %lld x %lld, index '%s' was made from %lld x %lld rows", dlabel,
             (long long)din.n, (long long)din.d, o->index, (long long)ix.n, (long long)ix.d);
  VA_AGREE_OR_EXIT(err[0] && va_proc.rank == 0 ? VA_EXIT_INPUT : 0, err);
  if (o->k > ix.n)
    snprintf(err, sizeof err, "k = %lld is more than the %lld rows of index '%s'", (long long)o->k, (long long)ix.n,
             o->index);
  VA_AGREE_OR_EXIT(err[0] && va_proc.rank == 0 ? VA_EXIT_USAGE : 0, err);
  /* The recorded file itself: a change of size is seen before any row is read. */
  if (need_rows && !o->data && va_proc.rank == 0) {
    struct stat sb;
    if (ix.source_size >= 0 && stat(ix.source_file, &sb) == 0 && (int64_t)sb.st_size != ix.source_size)
      snprintf(err, sizeof err,
               "the source '%s' of index '%s' changed since compress: %lld bytes, %lld recorded; compress it again",
               ix.source_file, o->index, (long long)sb.st_size, (long long)ix.source_size);
  }
  VA_AGREE_OR_EXIT(err[0] ? VA_EXIT_INPUT : 0, err);
  int64_t sweep[VA_SEARCH_MAX_SWEEP];
  int nsweep = o->exact ? 1 : o->n_nprobe;
  for (int i = 0; i < nsweep; i++) {
    sweep[i] = o->exact ? ix.k : o->nprobe[i];
    if (sweep[i] > ix.k) {
      va_log0("note: nprobe %lld is more than the index's %lld anchors: %lld lists probed (every list)\n",
              (long long)sweep[i], (long long)ix.k, (long long)ix.k);
      sweep[i] = ix.k;
    }
  }
  const int threads = choose_threads(o->threads);
  /* This rank's shard (the rows compress read) and the engine that scans it, its rows or its codes (CPU or
   * GPU on every rank alike). */
  int64_t row0, nloc;
  va_shard_range(ix.n, va_proc.rank, va_proc.nranks, &row0, &nloc);
  const int64_t keep = o->rerank > o->k ? o->rerank : o->k; /* entries a query's scan keeps */
  va_search_engine_t engine =
      va_search_engine_open(o->backend, codes ? "fp32" : o->precision, threads, keep, ix.k, nloc, ix.d,
                            codes ? ix.pq_m : 0, o->batch < qin.n ? o->batch : qin.n);
  scanner_t scanner = {engine.name, "fp32"};
  if (codes) {
    if (strcmp(o->precision, "fp32"))
      va_log0("note: --precision %s is the row scan's: the scan on codes uses float32 tables\n", o->precision);
    snprintf(scanner.precision, sizeof scanner.precision, "pq%lldx%lld", (long long)ix.pq_m, (long long)ix.pq_bits);
    if (o->rerank > 0) {
      const size_t used = strlen(scanner.precision);
      snprintf(scanner.precision + used, sizeof scanner.precision - used, "+rerank%lld", (long long)o->rerank);
    }
  } else snprintf(scanner.precision, sizeof scanner.precision, "%s", engine.precision);
  const int64_t bytes_per_row = codes ? ix.pq_m * ix.pq_bits / 8 : 4 * ix.d;
  va_log0("vecanneal %s search: %d rank(s), %d thread(s)/rank, backend %s (%s); index %s: %lld x %lld, %lld anchors, "
          "metric %s; data %s; queries %s: %lld; k %lld, %s\n",
          VECANNEAL_VERSION, va_proc.nranks, threads, scanner.name, scanner.precision, o->index, (long long)ix.n,
          (long long)ix.d, (long long)ix.k, metric, dlabel, qlabel, (long long)qin.n, (long long)o->k,
          o->exact ? "exact (every row)" : "inverted lists");
  if (codes)
    va_log0("scan: codes, %lld bytes per row (%lld subspaces x %lld bits) instead of the %lld of a float32 row; %s\n",
            (long long)bytes_per_row, (long long)ix.pq_m, (long long)ix.pq_bits, (long long)(4 * ix.d),
            o->rerank > 0 ? "the best candidates re-scored with the rows (--rerank)" : "the source rows are not read");
  else va_log0("scan: rows, %lld bytes per row (float32)\n", (long long)bytes_per_row);
  int64_t *truth = o->ground_truth ? read_ground_truth(o->ground_truth, qin.n, o->k) : NULL;

  /* This rank's shard: its slice of /assignments gives every row its place in list order. */
  double t_read = va_now();
  uint32_t *assign = va_malloc((size_t)(nloc > 0 ? nloc : 1) * sizeof(uint32_t), "assignments");
  if ((rc = va_index_read_assignments(o->index, &ix, row0, nloc, assign))) {
    free(assign);
    free(truth);
    engine.destroy(&engine);
    va_index_data_free(&ix);
    return rc;
  }
  int64_t *offset = va_calloc((size_t)(ix.k + 1), sizeof(int64_t), "list offsets");
  int64_t *pos = va_malloc((size_t)(nloc > 0 ? nloc : 1) * sizeof(int64_t), "list positions");
  int64_t *ids = va_malloc((size_t)(nloc > 0 ? nloc : 1) * sizeof(int64_t), "list row ids");
  for (int64_t i = 0; i < nloc; i++) offset[assign[i] + 1]++;
  for (int64_t j = 0; j < ix.k; j++) offset[j + 1] += offset[j];
  {
    int64_t *next = va_malloc((size_t)ix.k * sizeof(int64_t), "list fill");
    memcpy(next, offset, (size_t)ix.k * sizeof(int64_t));
    for (int64_t i = 0; i < nloc; i++) { /* in row order: ids ascend within each list */
      pos[i] = next[assign[i]]++;
      ids[pos[i]] = row0 + i;
    }
    free(next);
  }
  free(assign);
  /* Codes: this rank's codes in list order. */
  va_search_codes_t cs = {&ix, NULL, NULL, NULL, offset, ids, NULL, row0, nloc, o->k, o->rerank, threads};
  if (codes && (rc = va_search_codes_lists(o->index, &cs, pos))) {
    free(pos);
    free(ids);
    free(offset);
    free(truth);
    engine.destroy(&engine);
    va_index_data_free(&ix);
    return rc;
  }
  /* Rows: in list order for the row scan, in row order for the rerank (looked up by global id). */
  float *rows = NULL;
  if (need_rows) {
    rows = va_malloc((size_t)(nloc > 0 ? nloc : 1) * (size_t)ix.d * sizeof(float), "list rows");
    va_read_result_t read = {-1, 0};
    if (codes) va_input_read(&din, row0, nloc, rows, (size_t)16 << 20, o->io_mode, threads, &read);
    else {
      const int64_t chunk = (int64_t)(16 << 20) / (ix.d * 4) > 0 ? (int64_t)(16 << 20) / (ix.d * 4) : 1;
      list_sink_t sink_ctx = {va_malloc((size_t)(chunk * ix.d) * sizeof(float), "read staging"), rows, pos, ix.d};
      const va_row_sink_t sink = {chunk, sink_buffer, sink_filled, &sink_ctx};
      va_input_read_into(&din, row0, nloc, o->io_mode, threads, &read, &sink);
      free(sink_ctx.staging);
    }
    va_stop_point("read"); /* a stop request cut the read short: the rows are incomplete */
    int64_t first_bad = read.bad_row < 0 ? INT64_MAX : read.bad_row;
    VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD));
    if (first_bad != INT64_MAX)
      snprintf(err, sizeof err, "data '%s' row %lld holds NaN or Inf", dlabel, (long long)first_bad);
    VA_AGREE_OR_EXIT(err[0] && va_proc.rank == 0 ? VA_EXIT_INPUT : 0, err);
    uint64_t checksum = read.checksum;
    VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &checksum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
    if (embedded)
      va_log0("note: index '%s' records a corpus, not rows: the rows of '%s' are not checked\n", o->index, dlabel);
    else if (checksum != ix.source_checksum)
      snprintf(err, sizeof err,
               "the rows of '%s' are not those index '%s' was made from (checksum %016llx, recorded %016llx): the "
               "data changed since compress, or --data names other data",
               dlabel, o->index, (unsigned long long)checksum, (unsigned long long)ix.source_checksum);
    VA_AGREE_OR_EXIT(err[0] && va_proc.rank == 0 ? VA_EXIT_INPUT : 0, err);
  }
  free(pos);
  const double read_seconds = va_now() - t_read;

  /* The queries: every rank reads them all (a few rows next to the shard). */
  const int64_t nq = qin.n, d = ix.d, k = o->k;
  float *Q = va_malloc((size_t)(nq * d) * sizeof(float), "queries");
  va_read_result_t qread = {-1, 0};
  va_input_read(&qin, 0, nq, Q, (size_t)16 << 20, o->io_mode, threads, &qread);
  if (qread.bad_row >= 0)
    snprintf(err, sizeof err, "queries '%s' row %lld holds NaN or Inf", qlabel, (long long)qread.bad_row);
  VA_AGREE_OR_EXIT(err[0] && va_proc.rank == 0 ? VA_EXIT_INPUT : 0, err);
  double t_lists = va_now();
  if (ix.cosine) { /* unit rows and queries, as compress makes its rows (the anchors are unit already) */
    if (rows) va_search_unit_rows(rows, nloc, d, threads);
    va_search_unit_rows(Q, nq, d, threads);
  }
  /* Codes: the queries in the frame the codes were trained in (l2: less /center; cosine: unit already). */
  float *Qf = NULL;
  if (codes) {
    Qf = va_malloc((size_t)(nq * d) * sizeof(float), "queries in the index's frame");
    memcpy(Qf, Q, (size_t)(nq * d) * sizeof(float));
    if (!ix.cosine) va_rows_to_frame(Qf, nq, d, 0, ix.center, threads);
    cs.rows = rows;
  }
  const va_search_lists_t lists = {ix.k,       nloc,     d,       offset,     rows, ids,      ix.k,
                                   ix.anchors, cs.codes, ix.pq_m, ix.pq_ksub, cs.T, cs.terms, ix.frame};
  engine.prepare(&engine, &lists); /* the GPU engine uploads them */
  const double lists_seconds = va_now() - t_lists;
  va_log0("read %lld rows' %s into %lld inverted lists and %lld queries in %.2f s\n", (long long)ix.n,
          codes ? "codes" : "float32 values", (long long)ix.k, (long long)nq, read_seconds + lists_seconds);

  /* The sweep. Every rank scans the same probed lists (probe_batch); rank 0 merges. */
  const int64_t batch = o->batch < nq ? o->batch : nq;
  int64_t most_probes = 1;
  for (int i = 0; i < nsweep; i++) most_probes = sweep[i] > most_probes ? sweep[i] : most_probes;
  va_neighbor_t *local = va_malloc((size_t)(batch * k) * sizeof(va_neighbor_t), "batch results");
  va_neighbor_t *result = va_proc.rank == 0 ? va_malloc((size_t)(nq * k) * sizeof(va_neighbor_t), "results") : NULL;
  int64_t *probes = va_malloc((size_t)(batch * most_probes) * sizeof(int64_t), "probes");
  sweep_point_t pts[VA_SEARCH_MAX_SWEEP];
  for (int s = 0; s < nsweep; s++) {
    const int64_t nprobe = sweep[s];
    va_stop_point("search");
    VA_MPI(MPI_Barrier(MPI_COMM_WORLD));
    const double t0 = va_now();
    for (int64_t b0 = 0; b0 < nq; b0 += batch) {
      const int64_t nb = nq - b0 < batch ? nq - b0 : batch;
      if (o->exact) engine.scan_all(&engine, &lists, Q + b0 * d, nb, ix.cosine, k, local);
      else {
        probe_batch(&engine, &lists, Q + b0 * d, nb, ix.cosine, nprobe, probes);
        if (codes) va_search_codes_batch(&cs, &engine, &lists, Qf + b0 * d, Q + b0 * d, nb, probes, nprobe, local);
        else engine.scan_lists(&engine, &lists, Q + b0 * d, nb, probes, nprobe, ix.cosine, k, local);
      }
      va_topk_merge_ranks(local, nb, k, result ? result + b0 * k : NULL);
    }
    double seconds = va_now() - t0;
    VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    pts[s] = (sweep_point_t){o->exact ? 0 : nprobe, seconds, seconds > 0 ? (double)nq / seconds : 0, -1};
    if (truth && result) pts[s].recall = recall_at_k(result, truth, nq, k);
    VA_MPI(MPI_Bcast(&pts[s].recall, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    char what[48], recall[48] = "";
    if (o->exact) snprintf(what, sizeof what, "exact");
    else snprintf(what, sizeof what, "nprobe %lld", (long long)nprobe);
    if (pts[s].recall >= 0) snprintf(recall, sizeof recall, ", recall@%lld %.4f", (long long)k, pts[s].recall);
    va_log0("%s: %.0f queries/s (%.3f s)%s\n", what, pts[s].qps, seconds, recall);
  }
  free(probes);
  free(local);
  va_stop_finishing(); /* the writes are short: the job completes */

  result_write_t w = {o,      result,          nq,    k,        o->exact ? 0 : sweep[nsweep - 1], ix.k,
                      metric, pts[nsweep - 1], codes, o->rerank};
  const double bytes = (double)(nq * k) * 12.0 + 4096.0;
  /* A failed write is agreed on every rank (exit 4): the later ones are skipped, everything is freed. */
  rc = va_h5_write_file("result", o->out, bytes, o->io_mode, result_setup, result_rows, &w);
  if (!rc) rc = write_sweep_csv(o, &scanner, pts, nsweep);
  const search_figures_t fig = {read_seconds, lists_seconds, va_now() - t_start, ix.n,      d,    nq, ix.k, ix.cosine,
                                threads,      codes,         bytes_per_row,      o->rerank, batch};
  if (!rc) rc = write_metrics(o, &scanner, &fig, pts, nsweep);
  engine.destroy(&engine);
  if (!rc) va_log0("results written to %s\n", o->out);
  va_search_codes_free(&cs);
  free(result);
  free(truth);
  free(Qf);
  free(Q);
  free(rows);
  free(ids);
  free(offset);
  va_index_data_free(&ix);
  return rc;
}

int va_search_job(const va_search_options_t *o) {
  va_heartbeat_start(); /* no quiet stretch on rank 0 (heartbeat.h) */
  int rc = search_job(o);
  va_heartbeat_stop();
  return rc;
}
