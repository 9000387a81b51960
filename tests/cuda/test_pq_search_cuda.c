/* test_pq_search_cuda.c: the GPU engine's scan on PQ codes (backend/search.h over cuda/pq_search.h)
 * against the CPU engine's (cpu/pq_search.h): every answer must be the same bit for bit (each distance's
 * float bits and each id, fillers included), since both compute each table entry, list base and row
 * distance by one recipe and keep the k first entries under one total order (docs/search.md). Cases: l2
 * and cosine; (d, M) = (8, 8) one column a subspace, (30, 7) d not a multiple of M and M not a multiple of
 * 4 (byte reads), (32, 8), (128, 16), (384, 48) and (64, 1); 256 and 16 centroids; k 1, 10, 100, the limit
 * 256, and 300 (run on the CPU kernels); lists of 0, 1, a few and thousands of rows; probes of 1, some and
 * every list, list 0 (empty) first for every 5th query; rows whose codes repeat an earlier row's under
 * another id (equal distances: ties broken by id); tiny codebooks whose table entries are denormal (a
 * flush to zero would show) and huge ones whose distances overflow to +inf; batches of 5, 300 and 2000
 * queries. Tables too large for a block's shared memory (d 1024, M 256) run on the CPU, with the same
 * answer. The probe of a lists-of-codes engine against the CPU's. Also the collective choice with codes
 * (va_search_engine_open) on one rank. Exits 77 ("SKIP: no CUDA device") without a device, 1 on any
 * failure, 0 when all pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/search.h"
#include "cpu/pq.h"        /* va_pq_transpose */
#include "cpu/pq_search.h" /* va_pq_list_terms */
#include "cpu/search.h"    /* va_search_unit_rows */
#include "cuda/kernels.h"  /* va_cuda_device_count */
#include "util/rng.h"      /* va_rand_u64, va_rand_normal */
#include "util/util.h"

static int failures, checked;
static const uint64_t SEED = 20261126;
static uint64_t draws; /* the counter of every draw, so that no two draws repeat */

static double normal(void) { return va_rand_normal(SEED, 1, 0, draws++); }
static uint64_t bits(void) { return va_rand_u64(SEED, 2, 0, draws++); }

enum { NLISTS = 10 };

/* One rank's lists of codes: random codes (every 40th row repeats an earlier row's codes under another
 * id), codebooks ~ scale * N(0, 1), anchors ~ N(0, 1) (cosine: unit), ids increasing within a list. */
typedef struct {
  va_search_lists_t L;
  int64_t *offset, *ids;
  uint8_t *codes;
  float *codebooks, *T, *terms, *anchors;
} code_lists_t;

static code_lists_t make_lists(const int64_t *sizes, int64_t d, int64_t M, int64_t ksub, double scale, int cosine) {
  code_lists_t s;
  s.offset = calloc(NLISTS + 1, sizeof(int64_t));
  for (int64_t j = 0; j < NLISTS; j++) s.offset[j + 1] = s.offset[j] + sizes[j];
  const int64_t n = s.offset[NLISTS], dmax = va_pq_dsub_max(d, M);
  s.ids = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
  s.codes = malloc((size_t)(n > 0 ? n * M : 1));
  int64_t next_id = 100;
  for (int64_t i = 0; i < n; i++) {
    next_id += 1 + (int64_t)(bits() % 3);
    s.ids[i] = next_id;
    if (i % 40 == 39) memcpy(s.codes + i * M, s.codes + (int64_t)(bits() % (uint64_t)i) * M, (size_t)M);
    else
      for (int64_t m = 0; m < M; m++) s.codes[i * M + m] = (uint8_t)(bits() % (uint64_t)ksub);
  }
  s.codebooks = calloc((size_t)(M * ksub * dmax), sizeof(float));
  for (int64_t m = 0; m < M; m++) {
    int64_t col0, width;
    va_pq_subspace(d, M, m, &col0, &width);
    for (int64_t c = 0; c < ksub; c++)
      for (int64_t t = 0; t < width; t++) s.codebooks[(m * ksub + c) * dmax + t] = (float)(scale * normal());
  }
  s.anchors = malloc((size_t)(NLISTS * d) * sizeof(float));
  for (int64_t i = 0; i < NLISTS * d; i++) s.anchors[i] = (float)normal();
  if (cosine) va_search_unit_rows(s.anchors, NLISTS, d, 1);
  s.T = va_pq_transpose(s.codebooks, d, M, ksub);
  s.terms = cosine ? NULL : va_pq_list_terms(s.anchors, NLISTS, d, M, ksub, s.T, 1);
  /* the probe measures the anchors, the scan the same anchors as the codes' frame */
  s.L = (va_search_lists_t){NLISTS,    n,       d, s.offset, NULL, s.ids,   NLISTS,
                            s.anchors, s.codes, M, ksub,     s.T,  s.terms, s.anchors};
  return s;
}

static void free_lists(code_lists_t *s) {
  free(s->offset);
  free(s->ids);
  free(s->codes);
  free(s->codebooks);
  free(s->T);
  free(s->terms);
  free(s->anchors);
}

/* nq queries ~ N(0, 1) (cosine: unit); every 7th one equal to an anchor. */
static float *make_queries(const code_lists_t *s, int64_t nq, int64_t d, int cosine) {
  float *Q = malloc((size_t)(nq * d) * sizeof(float));
  for (int64_t q = 0; q < nq; q++) {
    if (q % 7 == 3) memcpy(Q + q * d, s->anchors + (int64_t)(bits() % NLISTS) * d, (size_t)d * sizeof(float));
    else
      for (int64_t t = 0; t < d; t++) Q[q * d + t] = (float)normal();
  }
  if (cosine) va_search_unit_rows(Q, nq, d, 1);
  return Q;
}

/* nprobe distinct lists per query at random; every 5th query probes list 0 (empty) first. */
static int64_t *make_probes(int64_t nq, int64_t nprobe) {
  int64_t *probes = malloc((size_t)(nq * nprobe) * sizeof(int64_t)), perm[NLISTS];
  for (int64_t q = 0; q < nq; q++) {
    for (int64_t j = 0; j < NLISTS; j++) perm[j] = j;
    for (int64_t j = NLISTS - 1; j > 0; j--) {
      const int64_t r = (int64_t)(bits() % (uint64_t)(j + 1)), t = perm[j];
      perm[j] = perm[r];
      perm[r] = t;
    }
    if (q % 5 == 0)
      for (int64_t j = 0; j < NLISTS; j++)
        if (perm[j] == 0) perm[j] = perm[0], perm[0] = 0;
    memcpy(probes + q * nprobe, perm, (size_t)nprobe * sizeof(int64_t));
  }
  return probes;
}

/* The two answers, entry by entry: distance bits and id. */
static void compare(const char *what, const va_neighbor_t *cpu, const va_neighbor_t *gpu, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    uint32_t a, b;
    memcpy(&a, &cpu[i].dist, 4);
    memcpy(&b, &gpu[i].dist, 4);
    if (a != b || cpu[i].id != gpu[i].id) {
      if (bad < 3)
        printf("FAIL %s: entry %lld: cpu (%.9g [%08x], %lld), gpu (%.9g [%08x], %lld)\n", what, (long long)i,
               cpu[i].dist, a, (long long)cpu[i].id, gpu[i].dist, b, (long long)gpu[i].id);
      bad++;
    }
  }
  checked++;
  if (bad) {
    failures++;
    printf("FAIL %s: %lld of %lld entries differ\n", what, (long long)bad, (long long)n);
  }
}

/* Both engines on one set of lists: k 1..300 at nprobe 1, 3 and every list, nq queries. */
static void run_case(const char *name, const int64_t *sizes, int64_t d, int64_t M, int64_t ksub, double scale,
                     int cosine, int64_t nq) {
  code_lists_t s = make_lists(sizes, d, M, ksub, scale, cosine);
  float *Q = make_queries(&s, nq, d, cosine);
  va_search_engine_t cpu = va_search_engine_cpu(2), gpu = va_search_engine_cuda(0, 2, "fp32");
  cpu.prepare(&cpu, &s.L);
  gpu.prepare(&gpu, &s.L);
  const int64_t ks[] = {1, 10, 100, 256, 300}, nprobes[] = {1, 3, NLISTS};
  va_neighbor_t *a = malloc((size_t)(nq * 300) * sizeof *a), *b = malloc((size_t)(nq * 300) * sizeof *b);
  for (int pi = 0; pi < 3; pi++) {
    int64_t *probes = make_probes(nq, nprobes[pi]);
    for (int ki = 0; ki < 5; ki++) {
      const int64_t k = ks[ki];
      cpu.scan_codes(&cpu, &s.L, Q, nq, probes, nprobes[pi], cosine, k, a);
      gpu.scan_codes(&gpu, &s.L, Q, nq, probes, nprobes[pi], cosine, k, b);
      char what[200];
      snprintf(what, sizeof what, "%s, %s, d %lld, M %lld, ksub %lld, %lld queries, nprobe %lld, k %lld", name,
               cosine ? "cosine" : "l2", (long long)d, (long long)M, (long long)ksub, (long long)nq,
               (long long)nprobes[pi], (long long)k);
      compare(what, a, b, nq * k);
    }
    free(probes);
  }
  /* the probe of a lists-of-codes engine (the anchors alone on the device) */
  const int64_t nprobe = 4;
  int64_t *pa = malloc((size_t)(nq * nprobe) * sizeof(int64_t)), *pb = malloc((size_t)(nq * nprobe) * sizeof(int64_t));
  cpu.probe(&cpu, &s.L, Q, nq, cosine, nprobe, pa);
  gpu.probe(&gpu, &s.L, Q, nq, cosine, nprobe, pb);
  checked++;
  if (memcmp(pa, pb, (size_t)(nq * nprobe) * sizeof(int64_t)))
    failures++, printf("FAIL %s: the GPU probe of lists of codes differs from the CPU's\n", name);
  free(pa);
  free(pb);
  cpu.destroy(&cpu);
  gpu.destroy(&gpu);
  free(a);
  free(b);
  free(Q);
  free_lists(&s);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  va_proc_init();
  if (va_cuda_device_count() == 0) {
    printf("SKIP: no CUDA device\n");
    MPI_Finalize();
    return 77;
  }
  /* list 0 empty, list 1 one row, short ones, thousands in others */
  const int64_t sizes[NLISTS] = {0, 1, 3000, 17, 5000, 257, 2, 1200, 255, 600};
  const int64_t shapes[][2] = {{8, 8}, {30, 7}, {32, 8}, {128, 16}, {384, 48}, {64, 1}};
  for (int si = 0; si < 6; si++)
    for (int cosine = 0; cosine <= 1; cosine++) {
      run_case("few queries", sizes, shapes[si][0], shapes[si][1], 256, 0.3, cosine, 5);
      run_case("batch", sizes, shapes[si][0], shapes[si][1], 256, 0.3, cosine, 300);
    }
  run_case("16 centroids", sizes, 32, 8, 16, 0.3, 0, 300);
  run_case("large batch", sizes, 128, 16, 256, 0.3, 0, 2000);
  /* table entries in the denormal range, and distances that overflow to +inf (ties at +inf, by id) */
  run_case("tiny values", sizes, 32, 8, 256, 1e-39, 0, 40);
  run_case("huge values", sizes, 32, 8, 256, 3e19, 0, 40);
  /* tables too large for a block: the CPU kernels behind the GPU engine */
  run_case("tables beyond shared memory", sizes, 1024, 256, 256, 0.3, 0, 20);

  /* The collective choice on one rank with codes: cuda gives the GPU engine; above the k limit the CPU. */
  va_search_engine_t e = va_search_engine_open("cuda", "fp32", 1, 10, 8, 1000, 16, 4, 256);
  if (strcmp(e.name, "cuda")) failures++, printf("FAIL open(cuda, codes, k 10) gave the %s engine\n", e.name);
  e.destroy(&e);
  e = va_search_engine_open("auto", "fp32", 1, VA_SEARCH_GPU_MAX_K + 1, 8, 1000, 16, 4, 256);
  if (strcmp(e.name, "cpu")) failures++, printf("FAIL open(auto, codes, k 257) gave the %s engine\n", e.name);
  e.destroy(&e);
  printf("%s: %d comparison(s), %d failure(s)\n", failures ? "FAILED" : "PASSED", checked, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
