/* search.c (cli): `vecanneal search`: its options from argv, then the job (job/search.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h" /* va_cmd_search */
#include "cli/options.h"  /* va_opt, va_opt_i64, va_parse_i64, va_opt_unknown */
#include "job/search.h"   /* va_search_options_t, va_search_job */
#include "util/util.h"    /* va_log0, va_agree */

static void search_usage(void) {
  va_log0("usage: vecanneal search --index INDEX.h5 --queries Q.h5[:DATASET] --out RESULT.h5 [options]\n"
          "The k nearest source rows of every query, through the index's inverted lists (the rows of each anchor):\n"
          "each query probes the nprobe anchors nearest to it and scans their members. Every rank reads its own\n"
          "shard of the rows; the per-rank answers are merged by (distance, row id), so the result is the same\n"
          "for any rank count. Distances: squared l2, or 1 - cos for a cosine index (docs/search.md).\n"
          "  --index INDEX.h5         the index (compress's output, format 2)\n"
          "  --queries F.h5[:DATASET] the queries, d as the index (HDF5 dataset [/train], .fvecs, .npy, ...)\n"
          "  --out RESULT.h5          /neighbors (int64 row ids, q x k) and /distances (float32, q x k), with\n"
          "                           attributes k, nprobe, metric, queries_per_second, recall, index\n"
          "  --k K                    neighbours per query [10]\n"
          "  --nprobe N[,N...]        lists probed per query; a list sweeps them in one job (the output holds\n"
          "                           the last one's results); clamped to the anchors [16]\n"
          "  --exact                  scan every row (brute force, the same kernel): ground truth\n"
          "  --data F.h5[:DATASET]    the source rows, when not at the path the index recorded; checked\n"
          "                           against the recorded checksum (exit 3 when they differ)\n"
          "  --ground-truth F.h5[:DATASET]  true neighbour ids (q x >= k) [/neighbors]: prints recall@k\n"
          "  --sweep-csv FILE.csv     one line per nprobe: backend,precision,nprobe,recall,qps\n"
          "                           (scripts/plot-recall-qps.py draws recall against QPS)\n"
          "  --metrics FILE.json      timings, recall and QPS per nprobe (docs/metrics.md)\n"
          "  --batch B                queries per batch [16384]\n"
          "  --threads T              threads per rank [the rank's cores]\n"
          "  --backend auto|cpu|cuda  the list scan: cuda = the GPU engine on every rank (bitwise the CPU's\n"
          "                           results; k up to 256, above it the CPU); auto = cuda when built and\n"
          "                           every rank sees a device, else cpu [auto]\n"
          "  --precision P            the GPU list scan's products: fp32 (the CPU's recipe, bitwise), tf32,\n"
          "                           fp16 or bf16 (tensor cores; fp16/bf16 store the rows in 16 bits; near\n"
          "                           neighbours may reorder); the probe and the CPU engine compute fp32 [fp32]\n"
          "  --scan auto|codes|rows   what the lists hold: codes = each row's PQ codes (compress --codes pq),\n"
          "                           measured through per-query lookup tables (CPU or GPU), without reading\n"
          "                           the source rows; rows = the float32 source rows; auto = codes when the\n"
          "                           index has them, unless --exact asks for the rows [auto]\n"
          "  --rerank R               with codes: re-score each query's best R candidates (R >= k) with the\n"
          "                           source rows (read and checked as for --scan rows), keep the k best\n"
          "  --io auto|collective|independent  HDF5 transfer mode [auto]\n");
}

/* "1,2,4": at most VA_SEARCH_MAX_SWEEP integers >= 1; 0 when it parses. */
static int parse_nprobe_list(const char *s, va_search_options_t *o) {
  char buf[1024];
  if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf || !*s) return 1;
  o->n_nprobe = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (o->n_nprobe == VA_SEARCH_MAX_SWEEP || va_parse_i64(tok, 1, INT64_MAX, &o->nprobe[o->n_nprobe])) return 1;
    o->n_nprobe++;
  }
  return o->n_nprobe == 0 || s[strlen(s) - 1] == ',';
}

int va_cmd_search(int argc, char **argv) {
  va_search_options_t o;
  va_search_options_default(&o);
  const char *v;
  char err[512] = "";
  int bad = 0;
  for (int i = 0; i < argc && !bad; i++) {
    int64_t x;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      search_usage();
      return 0;
    } else if (!strcmp(argv[i], "--exact")) o.exact = 1;
    else if ((v = va_opt(argc, argv, &i, "--index"))) o.index = v;
    else if ((v = va_opt(argc, argv, &i, "--queries"))) o.queries = v;
    else if ((v = va_opt(argc, argv, &i, "--data"))) o.data = v;
    else if ((v = va_opt(argc, argv, &i, "--out"))) o.out = v;
    else if ((v = va_opt(argc, argv, &i, "--metrics"))) o.metrics = v;
    else if ((v = va_opt(argc, argv, &i, "--ground-truth"))) o.ground_truth = v;
    else if ((v = va_opt(argc, argv, &i, "--sweep-csv"))) o.sweep_csv = v;
    else if ((v = va_opt(argc, argv, &i, "--io"))) o.io = v;
    else if ((v = va_opt(argc, argv, &i, "--backend"))) o.backend = v;
    else if ((v = va_opt(argc, argv, &i, "--precision"))) o.precision = v;
    else if ((v = va_opt(argc, argv, &i, "--scan"))) o.scan = v;
    else if ((v = va_opt(argc, argv, &i, "--rerank")))
      bad = va_opt_i64("--rerank", v, 1, INT64_MAX, &o.rerank, err, sizeof err);
    else if ((v = va_opt(argc, argv, &i, "--k"))) bad = va_opt_i64("--k", v, 1, INT64_MAX, &o.k, err, sizeof err);
    else if ((v = va_opt(argc, argv, &i, "--nprobe")))
      bad = parse_nprobe_list(v, &o) ? snprintf(err, sizeof err,
                                                "--nprobe: expected integers >= 1 separated by commas (at most %d), "
                                                "got '%s'",
                                                VA_SEARCH_MAX_SWEEP, v)
                                     : 0;
    else if ((v = va_opt(argc, argv, &i, "--batch")))
      bad = va_opt_i64("--batch", v, 1, INT64_MAX, &o.batch, err, sizeof err);
    else if ((v = va_opt(argc, argv, &i, "--threads"))) {
      bad = va_opt_i64("--threads", v, 1, 4096, &x, err, sizeof err);
      o.threads = (int)x;
    } else {
      va_opt_unknown("search", argv[i], err, sizeof err);
      bad = 1;
    }
  }
  if (!bad) bad = va_search_options_resolve(&o, err, sizeof err);
  if (va_agree(bad ? VA_EXIT_USAGE : 0, err)) return VA_EXIT_USAGE;
  return va_search_job(&o);
}
