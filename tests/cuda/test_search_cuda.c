/* test_search_cuda.c: the GPU search engine (backend/search.h over cuda/search.h) against the CPU
 * engine: every answer must be the same bit for bit (each distance's float bits and each id, fillers
 * included), since both compute each distance by one recipe and keep the k first entries under one total
 * order (docs/search.md). Cases: d 1, 7, 16, 128, 384; l2 and cosine; k 1, 10, 64 and 65 (the two
 * shared-memory buffers), 100 and the limit 256 (and 300, which the engine runs on the CPU kernels);
 * lists of 0, 1, a few and thousands of rows; probes of 1, some and every list, and of the empty list
 * alone (fillers only); exact scans; the probe (nprobe 1, 10, 256 and 300 of 300 anchors, some of them
 * duplicates: ties broken by anchor id); duplicate rows under other ids (ties broken by id) and queries
 * equal to rows (distance 0); tiny values whose partial sums are denormal (a flush to zero would show)
 * and huge ones whose distances overflow to +inf (ties at +inf); batches of 5 queries (lists cut into
 * parts merged on the device), 300 (several tiles of 32 queries on a list) and 2000. The tensor-core
 * precisions (tf32, fp16, bf16) against the CPU's exact answer within their rounding: every reported
 * distance within 4 eps (|q|^2 + |x|^2) of the row's true distance (cosine: 8 eps), the same number of
 * entries found, and the k-th true distance at most the CPU's k-th plus twice that bound (eps: tf32
 * 2^-10, fp16 2^-11, bf16 2^-8). Also the collective choice (va_search_engine_open) on one rank.
 * Exits 77 ("SKIP: no CUDA device") without a device, 1 on any failure, 0 when all pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/search.h"
#include "cpu/search.h"
#include "cuda/kernels.h" /* va_cuda_device_count */
#include "util/util.h"

static int failures, checked;

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double unif(void) { return ((double)(rnd() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
static double normal(void) { return sqrt(-2.0 * log(unif())) * cos(6.283185307179586 * unif()); }

/* Lists of the given sizes over rows ~ scale * N(0, 1); ids: a random increasing sequence within each
 * list, interleaved across lists as a rank's shard is. dup: every 50th row of a list repeats an earlier
 * row of the whole set (another id, the same values). */
typedef struct {
  va_search_lists_t L;
  int64_t *offset, *ids;
  float *rows, *anchors;
} lists_t;

enum { NANCHORS = 300 };

static lists_t make_lists(const int64_t *sizes, int64_t nlists, int64_t d, double scale, int cosine) {
  lists_t s;
  s.offset = calloc((size_t)nlists + 1, sizeof(int64_t));
  for (int64_t j = 0; j < nlists; j++) s.offset[j + 1] = s.offset[j] + sizes[j];
  const int64_t n = s.offset[nlists];
  s.rows = malloc((size_t)(n > 0 ? n : 1) * (size_t)d * sizeof(float));
  s.ids = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
  int64_t next_id = 1000;
  for (int64_t j = 0; j < nlists; j++)
    for (int64_t i = s.offset[j]; i < s.offset[j + 1]; i++) {
      next_id += 1 + (int64_t)(rnd() % 3);
      s.ids[i] = next_id;
      if (i > 0 && (i - s.offset[j]) % 50 == 49)
        memcpy(s.rows + i * d, s.rows + (int64_t)(rnd() % (uint64_t)i) * d, (size_t)d * sizeof(float));
      else
        for (int64_t t = 0; t < d; t++) s.rows[i * d + t] = (float)(scale * normal());
    }
  if (cosine) va_search_unit_rows(s.rows, n, d, 1);
  /* anchors ~ the rows' scale; every 10th repeats the one before (a tie the probe breaks by anchor id) */
  s.anchors = malloc((size_t)NANCHORS * (size_t)d * sizeof(float));
  for (int64_t j = 0; j < NANCHORS; j++)
    for (int64_t t = 0; t < d; t++)
      s.anchors[j * d + t] = j % 10 == 9 ? s.anchors[(j - 1) * d + t] : (float)(scale * normal());
  if (cosine) va_search_unit_rows(s.anchors, NANCHORS, d, 1);
  s.L = (va_search_lists_t){nlists, n, d, s.offset, s.rows, s.ids, NANCHORS, s.anchors, NULL, 0, 0, NULL, NULL, NULL};
  return s;
}

static void free_lists(lists_t *s) {
  free(s->offset);
  free(s->ids);
  free(s->rows);
  free(s->anchors);
}

/* nq queries ~ scale * N(0, 1); every 7th one a copy of a row (distance 0 to it and its duplicates). */
static float *make_queries(const lists_t *s, int64_t nq, int64_t d, double scale, int cosine) {
  float *Q = malloc((size_t)nq * (size_t)d * sizeof(float));
  for (int64_t q = 0; q < nq; q++) {
    if (q % 7 == 3 && s->L.nrows > 0)
      memcpy(Q + q * d, s->rows + (int64_t)(rnd() % (uint64_t)s->L.nrows) * d, (size_t)d * sizeof(float));
    else
      for (int64_t t = 0; t < d; t++) Q[q * d + t] = (float)(scale * normal());
  }
  if (cosine) va_search_unit_rows(Q, nq, d, 1);
  return Q;
}

/* nprobe distinct lists per query, at random; every 5th query probes list 0 first (the empty one in
 * most cases). */
static int64_t *make_probes(int64_t nq, int64_t nlists, int64_t nprobe) {
  int64_t *probes = malloc((size_t)(nq * nprobe > 0 ? nq * nprobe : 1) * sizeof(int64_t)), perm[64];
  for (int64_t q = 0; q < nq; q++) {
    for (int64_t j = 0; j < nlists; j++) perm[j] = j;
    for (int64_t j = nlists - 1; j > 0; j--) {
      int64_t r = (int64_t)(rnd() % (uint64_t)(j + 1)), t = perm[j];
      perm[j] = perm[r];
      perm[r] = t;
    }
    if (q % 5 == 0)
      for (int64_t j = 0; j < nlists; j++)
        if (perm[j] == 0) perm[j] = perm[0], perm[0] = 0;
    memcpy(probes + q * nprobe, perm, (size_t)nprobe * sizeof(int64_t));
  }
  return probes;
}

/* The two answers, entry by entry: distance bits and id. */
static void compare(const char *what, const va_neighbor_t *cpu, const va_neighbor_t *gpu, int64_t nq, int64_t k) {
  int64_t bad = 0;
  for (int64_t i = 0; i < nq * k; i++) {
    uint32_t a, b;
    memcpy(&a, &cpu[i].dist, 4);
    memcpy(&b, &gpu[i].dist, 4);
    if (a != b || cpu[i].id != gpu[i].id) {
      if (bad < 3)
        printf("FAIL %s: query %lld place %lld: cpu (%.9g [%08x], %lld), gpu (%.9g [%08x], %lld)\n", what,
               (long long)(i / k), (long long)(i % k), cpu[i].dist, a, (long long)cpu[i].id, gpu[i].dist, b,
               (long long)gpu[i].id);
      bad++;
    }
  }
  checked++;
  if (bad) {
    failures++;
    printf("FAIL %s: %lld of %lld entries differ\n", what, (long long)bad, (long long)(nq * k));
  }
}

/* The row holding global id `id` (ids increase with the row). */
static int64_t row_of(const lists_t *s, int64_t id) {
  int64_t lo = 0, hi = s->L.nrows - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (s->ids[mid] < id) lo = mid + 1;
    else hi = mid;
  }
  return s->ids[lo] == id ? lo : -1;
}

static double sq_norm(const float *x, int64_t d) {
  double v = 0;
  for (int64_t t = 0; t < d; t++) v += (double)x[t] * x[t];
  return v;
}

/* A tensor-core answer (gpu) against the CPU's exact one (cpu): see the file's comment. */
static void compare_rounded(const char *what, const lists_t *s, const float *Q, int cosine, double eps,
                            const va_neighbor_t *cpu, const va_neighbor_t *gpu, int64_t nq, int64_t k) {
  const int64_t d = s->L.d;
  int64_t bad = 0;
  double worst = 0;
  for (int64_t q = 0; q < nq && bad < 3; q++) {
    const double qn = sq_norm(Q + q * d, d);
    int64_t found_cpu = 0, found_gpu = 0;
    double kth_gpu = 0, bound_max = 0;
    for (int64_t i = 0; i < k; i++) {
      found_cpu += cpu[q * k + i].id >= 0;
      const va_neighbor_t e = gpu[q * k + i];
      if (e.id < 0) continue;
      found_gpu++;
      const int64_t r = row_of(s, e.id);
      if (r < 0) {
        printf("FAIL %s: query %lld returned id %lld, which no row has\n", what, (long long)q, (long long)e.id);
        bad++;
        continue;
      }
      const float *x = s->rows + r * d;
      const double truth = va_search_distance_ref(Q + q * d, x, d, cosine);
      const double bound = cosine ? 8 * eps : 4 * eps * (qn + sq_norm(x, d));
      bound_max = bound > bound_max ? bound : bound_max;
      const double err = fabs((double)e.dist - truth);
      worst = err / bound > worst ? err / bound : worst;
      if (err > bound) {
        printf("FAIL %s: query %lld id %lld: distance %.9g, true %.9g (bound %.3g)\n", what, (long long)q,
               (long long)e.id, e.dist, truth, bound);
        bad++;
      }
      kth_gpu = truth > kth_gpu ? truth : kth_gpu;
    }
    if (found_cpu != found_gpu) {
      printf("FAIL %s: query %lld: %lld entries found, the CPU %lld\n", what, (long long)q, (long long)found_gpu,
             (long long)found_cpu);
      bad++;
    } else if (found_cpu > 0 && kth_gpu > cpu[q * k + found_cpu - 1].dist + 2 * bound_max) {
      printf("FAIL %s: query %lld: worst true distance kept %.9g, the CPU's k-th %.9g\n", what, (long long)q, kth_gpu,
             cpu[q * k + found_cpu - 1].dist);
      bad++;
    }
  }
  checked++;
  if (bad) failures++;
  printf("%s %s: largest error %.3f of its bound\n", bad ? "FAIL" : "ok", what, worst);
}

/* The tensor-core precisions on one set of lists: probed and exact scans, k 10 and 100. */
static void run_rounded(const char *name, const int64_t *sizes, int64_t nlists, int64_t d, int cosine, int64_t nq) {
  lists_t s = make_lists(sizes, nlists, d, 1.0, cosine);
  float *Q = make_queries(&s, nq, d, 1.0, cosine);
  va_search_engine_t cpu = va_search_engine_cpu(2);
  const char *prec[] = {"tf32", "fp16", "bf16"};
  const double eps[] = {1.0 / 1024, 1.0 / 2048, 1.0 / 256};
  for (int pi = 0; pi < 3; pi++) {
    va_search_engine_t gpu = va_search_engine_cuda(0, 2, prec[pi]);
    gpu.prepare(&gpu, &s.L);
    const int64_t ks[] = {10, 100};
    for (int ki = 0; ki < 2; ki++) {
      const int64_t k = ks[ki];
      va_neighbor_t *a = malloc((size_t)(nq * k) * sizeof *a), *b = malloc((size_t)(nq * k) * sizeof *b);
      int64_t *probes = make_probes(nq, nlists, nlists > 2 ? nlists / 2 : 1);
      char what[256];
      for (int exact = 0; exact <= 1; exact++) {
        if (exact) {
          cpu.scan_all(&cpu, &s.L, Q, nq, cosine, k, a);
          gpu.scan_all(&gpu, &s.L, Q, nq, cosine, k, b);
        } else {
          cpu.scan_lists(&cpu, &s.L, Q, nq, probes, nlists > 2 ? nlists / 2 : 1, cosine, k, a);
          gpu.scan_lists(&gpu, &s.L, Q, nq, probes, nlists > 2 ? nlists / 2 : 1, cosine, k, b);
        }
        snprintf(what, sizeof what, "%s %s d %lld %s nq %lld k %lld %s", name, prec[pi], (long long)d,
                 cosine ? "cosine" : "l2", (long long)nq, (long long)k, exact ? "exact" : "lists");
        compare_rounded(what, &s, Q, cosine, eps[pi], a, b, nq, k);
      }
      free(probes);
      free(a);
      free(b);
    }
    gpu.destroy(&gpu);
  }
  cpu.destroy(&cpu);
  free(Q);
  free_lists(&s);
}

/* One set of lists: for every k, the probed scans (1 list, some, every list) and the exact scan. */
static void run_case(const char *name, const int64_t *sizes, int64_t nlists, int64_t d, int cosine, double scale,
                     int64_t nq) {
  lists_t s = make_lists(sizes, nlists, d, scale, cosine);
  float *Q = make_queries(&s, nq, d, scale, cosine);
  va_search_engine_t cpu = va_search_engine_cpu(2), gpu = va_search_engine_cuda(0, 2, "fp32");
  cpu.prepare(&cpu, &s.L);
  gpu.prepare(&gpu, &s.L);
  const int64_t ks[] = {1, 10, 64, 65, 100, 256, 300};
  const int64_t nprobes[] = {1, nlists > 2 ? nlists / 2 : 1, nlists};
  for (int ki = 0; ki < 7; ki++) {
    const int64_t k = ks[ki];
    va_neighbor_t *a = malloc((size_t)(nq * k) * sizeof *a), *b = malloc((size_t)(nq * k) * sizeof *b);
    char what[256];
    for (int pi = 0; pi < 3; pi++) {
      int64_t *probes = make_probes(nq, nlists, nprobes[pi]);
      memset(b, 0x5a, (size_t)(nq * k) * sizeof *b);
      cpu.scan_lists(&cpu, &s.L, Q, nq, probes, nprobes[pi], cosine, k, a);
      gpu.scan_lists(&gpu, &s.L, Q, nq, probes, nprobes[pi], cosine, k, b);
      snprintf(what, sizeof what, "%s d %lld %s nq %lld k %lld nprobe %lld", name, (long long)d,
               cosine ? "cosine" : "l2", (long long)nq, (long long)k, (long long)nprobes[pi]);
      compare(what, a, b, nq, k);
      free(probes);
    }
    memset(b, 0x5a, (size_t)(nq * k) * sizeof *b);
    cpu.scan_all(&cpu, &s.L, Q, nq, cosine, k, a);
    gpu.scan_all(&gpu, &s.L, Q, nq, cosine, k, b);
    snprintf(what, sizeof what, "%s d %lld %s nq %lld k %lld exact", name, (long long)d, cosine ? "cosine" : "l2",
             (long long)nq, (long long)k);
    compare(what, a, b, nq, k);
    free(a);
    free(b);
  }
  /* the probe: the anchors' ids, compared as entries with distance 0 */
  const int64_t nps[] = {1, 10, 256, 300};
  for (int pi = 0; pi < 4; pi++) {
    const int64_t np = nps[pi];
    int64_t *pa = malloc((size_t)(nq * np) * sizeof *pa), *pb = malloc((size_t)(nq * np) * sizeof *pb);
    va_neighbor_t *ea = malloc((size_t)(nq * np) * sizeof *ea), *eb = malloc((size_t)(nq * np) * sizeof *eb);
    memset(pb, 0x5a, (size_t)(nq * np) * sizeof *pb);
    cpu.probe(&cpu, &s.L, Q, nq, cosine, np, pa);
    gpu.probe(&gpu, &s.L, Q, nq, cosine, np, pb);
    for (int64_t i = 0; i < nq * np; i++) ea[i] = (va_neighbor_t){0.0f, pa[i]}, eb[i] = (va_neighbor_t){0.0f, pb[i]};
    char what[256];
    snprintf(what, sizeof what, "%s d %lld %s nq %lld probe nprobe %lld", name, (long long)d, cosine ? "cosine" : "l2",
             (long long)nq, (long long)np);
    compare(what, ea, eb, nq, np);
    free(pa);
    free(pb);
    free(ea);
    free(eb);
  }
  gpu.destroy(&gpu);
  cpu.destroy(&cpu);
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
  /* list 0 empty, list 1 one row, a few short ones, thousands in the rest */
  const int64_t sizes[] = {0, 1, 3000, 17, 5000, 257, 2, 1200};
  const int64_t dims[] = {1, 7, 16, 128, 384};
  for (int di = 0; di < 5; di++)
    for (int cosine = 0; cosine <= 1; cosine++) {
      run_case("few queries (parts)", sizes, 8, dims[di], cosine, 1.0, 5);
      run_case("batch", sizes, 8, dims[di], cosine, 1.0, 300);
      if (dims[di] == 128) run_case("large batch", sizes, 8, dims[di], cosine, 1.0, 2000);
    }
  /* partial sums in the denormal range (l2: squares of ~1e-21) and distances that overflow to +inf */
  run_case("tiny values", sizes, 8, 16, 0, 1e-21, 40);
  run_case("huge values", sizes, 8, 16, 0, 3e19, 40);
  /* the tensor-core precisions: d not a multiple of a chunk, one chunk, several */
  const int64_t rdims[] = {7, 64, 384};
  for (int di = 0; di < 3; di++)
    for (int cosine = 0; cosine <= 1; cosine++) run_rounded("rounded", sizes, 8, rdims[di], cosine, 300);
  /* every list empty but one of one row; a single list of many rows */
  const int64_t sparse[] = {0, 0, 1, 0}, one[] = {40000};
  run_case("sparse", sparse, 4, 7, 0, 1.0, 9);
  run_case("one list", one, 1, 128, 1, 1.0, 3);

  /* The collective choice on one rank: cuda gives the GPU engine; above the k limit the CPU one. */
  va_search_engine_t e = va_search_engine_open("cuda", "fp32", 1, 10, 8, 1000, 16, 0, 256);
  if (strcmp(e.name, "cuda")) failures++, printf("FAIL open(cuda, k 10) gave the %s engine\n", e.name);
  e.destroy(&e);
  e = va_search_engine_open("auto", "tf32", 1, VA_SEARCH_GPU_MAX_K + 1, 8, 1000, 16, 0, 256);
  if (strcmp(e.name, "cpu")) failures++, printf("FAIL open(auto, k 257) gave the %s engine\n", e.name);
  e.destroy(&e);
  printf("%s: %d comparison(s), %d failure(s)\n", failures ? "FAILED" : "PASSED", checked, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
