/* compress.c: `vecanneal compress`, the job: configuration, input validation, sharded read,
 * preprocessing (centring or unit rows), initialisation, the annealing loop, the final pass, the
 * index and the metrics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/anneal.h"
#include "core/checkpoint.h"
#include "job/codes.h" /* va_codes_* */
#include "job/embed.h"
#include "core/sample.h"   /* va_sample_* */
#include "util/checksum.h" /* va_hash_bytes */
#include "backend/plan.h"  /* va_backend_plan, va_backend_attach */
#include "backend/rows.h"  /* va_rows_*: rows on the host or the GPU */
#include "job/compress.h"  /* va_compress_options_t */
#include "comm/comm.h"
#include "io/files.h" /* va_files_prepare, va_temp_name */
#include "io/index.h"
#include "util/memlimit.h" /* va_mem_room_* */
#include "core/metrics.h"
#include "util/heartbeat.h" /* va_heartbeat_start, va_heartbeat_stop */
#include "core/stop.h"      /* va_stop_point */
#include "util/util.h"

/* The job's options (job/compress.h), kept at file scope for the stages below. */
static const char *resume_path, *config_file;
static const char *embed_corpus, *embed_model, *embed_out;

/* cosine: the energy of the best single anchor from the unit rows' column sums (d, this rank's) and
 * zero-row count, both summed over the ranks here. */
static double unit_rows_energy(const va_state_t *st, double *sum, int64_t *zero_rows) {
  va_allreduce_sum_f64(sum, st->d);
  double s2 = 0;
  for (int64_t t = 0; t < st->d; t++) s2 += (sum[t] / (double)st->n) * (sum[t] / (double)st->n);
  va_allreduce_sum_i64(zero_rows, 1);
  return 1.0 - sqrt(s2);
}

/* Column sums of this rank's rows (sum[0..d)) and, with squares, of their squares (sum[d..2d)); with
 * center, each value is first replaced by (float)(x - center[t]) in place. Rows are summed in blocks
 * whose size depends on n alone, one block per thread at a time, and the blocks' sums added in block
 * order: the same bits for every thread count. Per column, so the inner loop vectorises over t. Rows
 * on the GPU are summed there, block by block the same way (va_rows_device_column_sums), and the blocks
 * added here: the same bits again. */
static void column_sums(va_state_t *st, const double *center, int squares, double *sum) {
  const int64_t n = st->n_local, d = st->d;
  const int64_t block = n / 256 > 4096 ? n / 256 : 4096, nblocks = (n + block - 1) / block, w = squares ? 2 * d : d;
  double *part = va_calloc((size_t)(nblocks > 0 ? nblocks : 1) * (size_t)w, sizeof(double), "column sums");
  int64_t ld;
  float *X = va_rows_host(st, &ld);
  if (X) {
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(st->aopts.threads) schedule(dynamic, 1)
#endif
    for (int64_t b = 0; b < nblocks; b++) {
      double *p = part + b * w;
      const int64_t end = (b + 1) * block < n ? (b + 1) * block : n;
      for (int64_t i = b * block; i < end; i++) {
        float *x = X + i * ld;
        if (center)
          for (int64_t t = 0; t < d; t++) x[t] = (float)(x[t] - center[t]);
        for (int64_t t = 0; t < d; t++) p[t] += x[t];
        if (squares)
          for (int64_t t = 0; t < d; t++) p[d + t] += (double)x[t] * x[t];
      }
    }
  } else {
    va_rows_device_column_sums(st, block, center, squares, part);
  }
  memset(sum, 0, (size_t)w * sizeof(double));
  for (int64_t b = 0; b < nblocks; b++)
    for (int64_t t = 0; t < w; t++) sum[t] += part[b * w + t];
  free(part);
}

/* l2: subtract the global mean (distances are translation-invariant, and small coordinates keep the
 * float32 products accurate). The mean is rounded to 16 significant bits so that it is the same for
 * every rank count. cosine: unit rows. Rows on the GPU (read straight there, or handed over by the
 * embedder) are preprocessed there with the same arithmetic (va_rows_device_unit,
 * va_rows_device_column_sums); streamed rows in their pinned host copy. Returns the energy of the best
 * single anchor. */
static double preprocess(va_state_t *st, int64_t *zero_rows) {
  const int64_t n = st->n_local, d = st->d;
  st->center = va_calloc((size_t)d, sizeof(double), "centre");
  double *sum = va_calloc((size_t)(2 * d), sizeof(double), "column sums");
  if (st->cosine) {
    int64_t zeros = 0, ld;
    float *X = va_rows_host(st, &ld);
    if (!X) {
      zeros = va_rows_device_unit(st);
    } else {
#ifdef VECANNEAL_OPENMP
#pragma omp parallel for num_threads(st->aopts.threads) schedule(static) reduction(+ : zeros)
#endif
      for (int64_t i = 0; i < n; i++) {
        float *x = X + i * ld;
        double s = 0;
        for (int64_t t = 0; t < d; t++) s += (double)x[t] * x[t];
        if (s > 0)
          for (int64_t t = 0; t < d; t++) x[t] = (float)(x[t] / sqrt(s));
        else zeros++;
      }
    }
    column_sums(st, NULL, 0, sum);
    *zero_rows = zeros;
    double e = unit_rows_energy(st, sum, zero_rows);
    free(sum);
    return e;
  }
  *zero_rows = 0;
  column_sums(st, NULL, 0, sum);
  va_allreduce_sum_f64(sum, d);
  for (int64_t t = 0; t < d; t++) {
    int e;
    double m = frexp(sum[t] / (double)st->n, &e);
    st->center[t] = ldexp(nearbyint(ldexp(m, 16)), e - 16);
  }
  column_sums(st, st->center, 1, sum);
  va_allreduce_sum_f64(sum, 2 * d);
  double m2 = 0, total = 0;
  for (int64_t t = 0; t < d; t++) {
    m2 += (sum[t] / (double)st->n) * (sum[t] / (double)st->n);
    total += sum[d + t];
  }
  free(sum);
  return total / (double)st->n - m2;
}

typedef struct {
  const va_input_t *in;
  char path[VA_PATH_MAX + 16];
} ckpt_job_t;

static void write_checkpoint(va_state_t *st, void *vctx) {
  ckpt_job_t *job = vctx;
  va_tick_t t = va_tick();
  st->be->sync_host(st);
  if (va_checkpoint_write(job->path, st, job->in)) va_exit_all(VA_EXIT_OUTPUT);
  va_tock(VA_PH_WRITE, t);
  va_log0("checkpoint after iteration %lld written to %s\n", (long long)st->iter, job->path);
}

/* Bytes of host memory this rank will hold at its peak (docs/memory.md has the formula). pinned: the
 * out-of-core CUDA backend's pinned copy of the shard. shard_on_host 0: the rows are read through the
 * GPU context's staging buffers (two of 32 MiB pinned to the GPU; into that pinned copy in place or
 * through one of 32 MiB): up to 64 MiB counted. sample_rows: train_sample's rows in this rank's block,
 * copied for the loop beside the shard (0 without a sample). */
static double host_bytes_needed(const va_config_t *cfg, const va_input_t *in, int64_t n_local, int threads,
                                double pinned, int shard_on_host, int64_t sample_rows) {
  double d = (double)in->d, k = (double)cfg->k, n = (double)n_local;
  double tile = cfg->tile_rows > 0 ? (double)cfg->tile_rows : (k > 0 ? fmin(4096, fmax(64, 131072 / k)) : 64);
  double shard = shard_on_host ? n * d * 4 : fmin(64.0 * 1048576, n * d * 4);
  double bytes = 32.0 * 1048576 + shard + n * 12 + pinned; /* process baseline, shard, assign, prev, r */
  bytes += (double)sample_rows * d * 4;                    /* the sample's copy */
  bytes +=
      n * (cfg->init_kind == VA_INIT_RANDOM || cfg->init_kind == VA_INIT_FILE ? 0 : 8); /* init's per-row scratch */
  bytes += va_input_staging_bytes(in, cfg->read_chunk_mb * 1048576.0, n_local);
  bytes += k * (d * 8 + d * 8 + (d + 3) * 8 * threads + 64); /* anchors (+ fused-kernel panels), momentum, statistics */
  if (cfg->robust == VA_ROBUST_TRIM) bytes += k * (double)cfg->trim_bins * 8;
  bytes += threads * tile * k * 4; /* assign tiles */
  return bytes;
}

/* Collective: the memory check (memory_check = on). need: this rank's resident bytes at its peak. The
 * rank stops the job (VA_EXIT_RESOURCE, naming the limit that is short) when the need exceeds the
 * resident memory it may use (physical memory or cgroup, shared by the node's ranks), or when the
 * need and the address space its threads and libraries map exceed its address-space limit. */
static void check_memory(double need, int threads, int blas, int64_t n_local, int64_t d) {
  const va_mem_room_t resident = va_mem_room_resident(va_proc.local_nranks), address = va_mem_room_address();
  const double overhead = va_mem_address_overhead(threads, blas);
  char err[1024] = "";
  int short_of = 0;
  if (resident.bytes >= 0 && need > resident.bytes) {
    snprintf(err, sizeof err,
             "rank %d on %s needs about %.2f GiB (its %lld rows x %lld dims plus buffers) but only %.2f GiB are "
             "available per rank there (%s: %.2f GiB, %d rank(s) on the node); use more nodes or ranks, or set "
             "memory_check = off",
             va_proc.rank, va_proc.host, need / 1073741824.0, (long long)n_local, (long long)d,
             resident.bytes / 1073741824.0, resident.source, resident.limit_bytes / 1073741824.0, va_proc.local_nranks);
    short_of = 1;
  } else if (address.bytes >= 0 && need + overhead > address.bytes) {
    snprintf(err, sizeof err,
             "rank %d on %s needs about %.2f GiB of address space (its %lld rows x %lld dims plus buffers, and "
             "%.2f GiB of thread stacks and library buffers for %d thread(s)) but %s of %.2f GiB leaves it %.2f GiB; "
             "raise the limit, use more ranks, or set memory_check = off",
             va_proc.rank, va_proc.host, (need + overhead) / 1073741824.0, (long long)n_local, (long long)d,
             overhead / 1073741824.0, threads, address.source, address.limit_bytes / 1073741824.0,
             address.bytes / 1073741824.0);
    short_of = 1;
  }
  VA_AGREE_OR_EXIT(short_of ? VA_EXIT_RESOURCE : 0, err);
}

static int choose_threads(const va_config_t *cfg) {
  if (cfg->threads > 0) return (int)cfg->threads;
  /* Bound by the launcher (srun --cpus-per-task, mpirun --bind-to): use what this rank was given;
   * unbound: share the node's cores among its ranks. */
  int mine = va_cpu_count();
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int t = (online > 0 && mine < online) ? mine : mine / (va_proc.local_nranks > 0 ? va_proc.local_nranks : 1);
  return t > 0 ? t : 1;
}

/* Collective: inputs against outputs (files.h); claims the index, the metrics file and the embedded
 * vectors' file. The checkpoint resumed from may be the one this job writes (the usual way). */
static int prepare_files(const va_config_t *cfg, const char *ckpt_path) {
  char input_file[VA_PATH_MAX] = "", embed_file[VA_PATH_MAX] = "", dset[256];
  if (!embed_corpus) va_input_file(cfg->input, cfg->input_format, input_file, sizeof input_file);
  if (embed_out) va_split_spec(embed_out, embed_file, sizeof embed_file, dset, sizeof dset);
  const int resume_is_ckpt = resume_path && va_same_file(resume_path, ckpt_path);
  const va_file_use_t inputs[] = {{"input", input_file, 0},
                                  {"config file", config_file ? config_file : "", 0},
                                  {"corpus", embed_corpus ? embed_corpus : "", 0},
                                  {"checkpoint to resume from", resume_path && !resume_is_ckpt ? resume_path : "", 0},
                                  {"initial anchors file", cfg->init_kind == VA_INIT_FILE ? cfg->init_file : "", 0}};
  const va_file_use_t outputs[] = {{"index", cfg->out, 1},
                                   {"metrics file", cfg->metrics, 1},
                                   {"checkpoint", ckpt_path, 0},
                                   {"vectors file", embed_file, 1}};
  return va_files_prepare(inputs, (int)(sizeof inputs / sizeof *inputs), outputs,
                          (int)(sizeof outputs / sizeof *outputs));
}

/* Collective: the checksum of a file's bytes (rank 0 reads it in 16 MiB pieces; the same value on
 * every rank); 0 when it cannot be read (the embedder has said why by then). */
static uint64_t file_checksum(const char *path) {
  uint64_t sum = 0;
  if (va_proc.rank == 0) {
    FILE *f = fopen(path, "rb");
    const size_t piece = (size_t)16 << 20;
    char *buf = f ? va_malloc(piece, "checksum buffer") : NULL;
    size_t got;
    for (uint64_t i = 0; f && (got = fread(buf, 1, piece, f)) > 0; i++) sum += va_hash_bytes(buf, got, i);
    free(buf);
    if (f) fclose(f);
  }
  VA_MPI(MPI_Bcast(&sum, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
  return sum;
}

/* The rows a job holds for its final pass: the shard (va_shard_range). With train_sample, the loop
 * holds a copy of the sample rows of the shard besides (core/sample.h). */
typedef struct {
  int64_t n, row0, n_local;
} rows_t;

/* train_sample: a copy of the shard's sample rows (preprocessed already: centred with the mean of every
 * row, or unit) in a buffer of their own becomes st->X, and st's rows become the sample's (n = N; row0
 * and n_local in sample row numbers). Returns the shard, untouched: the final pass runs on it. */
static float *take_sample(va_state_t *st, int64_t N) {
  int64_t s0, scount;
  va_sample_range(st->n, N, st->row0, st->n_local, &s0, &scount);
  const double bytes = (double)scount * (double)st->d * 4.0;
  float *sample = malloc(bytes > 0 ? (size_t)bytes : 1);
  char err[512] = "";
  if (!sample)
    snprintf(err, sizeof err,
             "rank %d on %s cannot allocate %.2f GiB for its %lld sample rows; use more ranks or a larger node",
             va_proc.rank, va_proc.host, bytes / 1073741824.0, (long long)scount);
  VA_AGREE_OR_EXIT(sample ? 0 : VA_EXIT_RESOURCE, err);
  va_sample_gather(sample, st->X, st->d, st->n, N, st->row0, s0, scount);
  va_log0("training on %lld of %lld rows (train_sample: row floor(i x %lld / %lld) for i < %lld)\n", (long long)N,
          (long long)st->n, (long long)st->n, (long long)N, (long long)N);
  float *shard = st->X;
  st->X = sample;
  st->n = N;
  st->row0 = s0;
  st->n_local = scount;
  return shard;
}

/* train_sample, after the loop: the backend of the sample let go with the sample's rows, st's rows the
 * shard's again (in the frame since the preprocessing, as the final pass needs them), and the backend
 * attached to them. Returns the backend's name. */
static const char *attach_shard(va_state_t *st, const rows_t *full, float *shard, const va_config_t *cfg,
                                const va_backend_plan_t *plan) {
  if (st->be && st->be->destroy) st->be->destroy(st);
  st->be = NULL;
  st->be_ctx = NULL;
  free(st->X); /* the sample; NULL where the CUDA backend took it (va_backend_attach) */
  st->X = shard;
  st->n = full->n;
  st->row0 = full->row0;
  st->n_local = full->n_local;
  free(st->assign);
  free(st->prev);
  free(st->r);
  st->assign = va_malloc((size_t)st->n_local * sizeof(uint32_t), "assignments");
  st->prev = va_malloc((size_t)st->n_local * sizeof(uint32_t), "previous assignments");
  st->r = va_malloc((size_t)st->n_local * sizeof(float), "row distances");
  for (int64_t i = 0; i < st->n_local; i++) st->prev[i] = UINT32_MAX;
  const char *backend = va_backend_attach(st, cfg, plan);
  va_state_anchor_norms(st);
  return backend;
}

static int compress_job(const va_compress_options_t *o) {
  double t_start = va_now();
  va_config_t cfg = o->cfg;
  resume_path = o->resume_path;
  config_file = o->config_file;
  embed_corpus = o->embed_corpus;
  embed_model = o->embed_model;
  embed_out = o->embed_out;
  char err[2048] = "";
  int rc = 0;
  /* What the job reads and writes, checked and the outputs claimed before anything is read. */
  char ckpt_path[VA_PATH_MAX + 64];
  va_checkpoint_path(&cfg, ckpt_path, sizeof ckpt_path);
  if ((rc = prepare_files(&cfg, ckpt_path))) return rc;
  if (resume_path)
    snprintf(
        err, sizeof err,
        "the checkpoint '%s' is untouched: run the job again with --resume %s (exit %d: the Slurm scripts requeue it)",
        resume_path, resume_path, VA_EXIT_STOPPED);
  else
    snprintf(err, sizeof err,
             "no iteration ran, so there is no checkpoint: run the job again (exit %d: the Slurm scripts requeue it)",
             VA_EXIT_STOPPED);
  va_stop_advice(err);
  err[0] = 0;
  va_backend_check_built(cfg.backend);
  const char *backend = "cpu";
  int adopt = 0;       /* compress --embed: the rows are on this rank's GPU already (va_embedded_t.demb) */
  float *shard = NULL; /* train_sample: the shard, kept in the frame for the final pass while the loop runs */

  va_input_t in;
  va_embedded_t embedded = {0};
  if (embed_corpus) {
    /* Embedding stage in this job: every rank keeps its block of rows in memory. */
    va_embed_options_t eo;
    va_embed_options_default(&eo);
    eo.input = embed_corpus;
    eo.out_spec = embed_out ? embed_out : "unwritten.h5:/train";
    eo.model = embed_model;
    rc = va_embed_options_resolve(&eo, err, sizeof err) ? VA_EXIT_USAGE : 0;
    if (va_agree(rc, err)) return rc;
    double te = va_now();
    if ((rc = va_embed_rows(&eo, embed_out != NULL, &embedded))) return rc;
    va_phase_add(VA_PH_READ, va_now() - te);
    memset(&in, 0, sizeof in);
    snprintf(in.file, sizeof in.file, "%s", embed_corpus);
    snprintf(in.dataset, sizeof in.dataset, "(embedded by all-MiniLM-L6-v2)");
    in.n = embedded.n;
    in.d = embedded.d;
    in.dtype = VA_DT_F32;
    in.elem_size = 4;
    in.metric_hint = VA_METRIC_COSINE;
    in.checksum = file_checksum(embed_corpus); /* the input of a resumed job is the corpus */
  } else {
    va_input_open_as(cfg.input, cfg.input_format, &in);
  }
  char input_label[VA_PATH_MAX + 300]; /* how messages name the input */
  va_input_label(&in, input_label, sizeof input_label);
  if (resume_path) va_checkpoint_check(resume_path, &cfg, &in);
  {
    const int64_t k_most = cfg.k_max > cfg.k ? cfg.k_max : cfg.k_max < 0 ? in.n : cfg.k;
    const double codes_bytes =
        cfg.codes == VA_CODES_PQ
            ? va_index_codes_bytes(in.n, in.d, cfg.pq_m < in.d ? cfg.pq_m : in.d, (int64_t)1 << cfg.pq_bits)
            : 0.0;
    if ((rc = va_space_check("index", cfg.out,
                             va_index_payload_bytes(in.n, in.d, k_most) + 32.0 * (double)cfg.max_iter + codes_bytes)))
      return rc;
  }
  if (cfg.init_kind != VA_INIT_FILE && cfg.k > in.n) {
    snprintf(err, sizeof err, "k = %lld anchors is more than the %lld rows of '%s'", (long long)cfg.k, (long long)in.n,
             input_label);
    VA_AGREE_OR_EXIT(va_proc.rank == 0 ? VA_EXIT_USAGE : 0, err);
  }
  /* train_sample: the loop on N rows, the final pass on all. N >= n is a plain job (the sample would be
   * the input), which holds no copy of it. */
  const int sampled = cfg.train_sample > 0 && cfg.train_sample < in.n;
  const int64_t train_rows = sampled ? cfg.train_sample : in.n;
  if (embed_corpus && cfg.train_sample > 0)
    snprintf(err, sizeof err, "train_sample is not supported with --embed (the embedded rows are all in memory)");
  else if (cfg.init_kind != VA_INIT_FILE && cfg.k > train_rows)
    snprintf(err, sizeof err, "k = %lld anchors is more than the train_sample = %lld rows they are trained on",
             (long long)cfg.k, (long long)train_rows);
  VA_AGREE_OR_EXIT(err[0] && va_proc.rank == 0 ? VA_EXIT_USAGE : 0, err);
  va_codes_check(&cfg, in.d, train_rows, input_label);

  va_state_t st;
  memset(&st, 0, sizeof st);
  st.cfg = &cfg;
  st.n = in.n;
  st.d = in.d;
  st.k = st.k_initial = cfg.k;
  st.cosine = cfg.metric == VA_METRIC_COSINE || (cfg.metric == VA_METRIC_AUTO && in.metric_hint == VA_METRIC_COSINE);
  if (embed_corpus) {
    st.row0 = embedded.row0;
    st.n_local = embedded.n_local;
  } /* the embedder's blocks of lines */
  else
    va_shard_range(in.n, va_proc.rank, va_proc.nranks, &st.row0, &st.n_local);
  int threads = choose_threads(&cfg);
  st.aopts.threads = threads;
  st.aopts.tile_rows = cfg.tile_rows;
  st.aopts.kernel = cfg.cpu_assign == VA_CPU_ASSIGN_AUTO
                        ? (va_assign_fused_available() ? VA_CPU_ASSIGN_FUSED : VA_CPU_ASSIGN_SGEMM)
                        : (int)cfg.cpu_assign;
  VA_AGREE_OR_EXIT(st.aopts.kernel == VA_CPU_ASSIGN_FUSED && !va_assign_fused_available() ? VA_EXIT_USAGE : 0,
                   "cpu_assign = fused, but this processor has no AVX2/FMA (use auto or sgemm)");
#ifdef VECANNEAL_OPENMP
  va_blas_threads(1); /* tiles are spread over OpenMP threads, each running a single-threaded sgemm */
#else
  va_blas_threads(threads);
#endif
  int io_coll = va_io_collective(cfg.io);
  va_log0("vecanneal %s compress: %d rank(s), %d thread(s)/rank, HDF5 %s, io %s\n", VECANNEAL_VERSION, va_proc.nranks,
          threads,
#ifdef VECANNEAL_PARALLEL_HDF5
          "parallel",
#else
          "serial",
#endif
          io_coll ? "collective" : "independent");
  va_log0("input %s: %lld x %lld %s, metric %s; k %lld, init %s, robust %s, preset %s\n", input_label, (long long)in.n,
          (long long)in.d, va_dtype_name(in.dtype), st.cosine ? "cosine" : "l2", (long long)cfg.k, cfg.init,
          va_config_enum_name("robust", cfg.robust), cfg.preset);
  if (cfg.preset_overrides[0]) va_log0("config: set over preset %s: %s\n", cfg.preset, cfg.preset_overrides);

  const rows_t full = {st.n, st.row0, st.n_local};
  va_backend_plan_t plan = va_backend_plan(&st, &cfg);
  struct {
    double loop, peak;
  } gpu_memory = {0, 0}; /* gpu_memory_used */
  /* CUDA rows from a file skip the host shard: read chunk by chunk into the context's pinned staging
   * buffers, they go straight to the GPU and are preprocessed there (resident), or into the context's
   * pinned host copy, preprocessed in place (streamed). */
  const int direct = plan.cuda && !plan.host_prep && !embed_corpus && !sampled; /* the sample is taken on the host */
  double pinned = 0;
  pinned = va_rows_pinned_bytes(&plan, st.n_local, st.d);
  int64_t sample_row0 = 0, sample_rows = 0;
  if (sampled) va_sample_range(in.n, train_rows, st.row0, st.n_local, &sample_row0, &sample_rows);
  if (cfg.memory_check)
    check_memory(
        host_bytes_needed(&cfg, &in, st.n_local, threads, pinned, !direct, sample_rows) +
            va_codes_host_bytes(
                &cfg, st.n_local,
                (int64_t)((double)st.n_local * (double)va_codes_train_rows(&cfg, train_rows) / (double)in.n) + 1, st.d),
        threads, !plan.cuda && st.aopts.kernel == VA_CPU_ASSIGN_SGEMM, st.n_local, st.d);
  /* The shard: one float32 copy per rank (staging chunks for other types). */
  if (embed_corpus) {
    /* Vectors still on the GPU this job's CUDA backend runs on stay there (cosine, resident); otherwise
     * they come to the host. Every rank decides alike (the same plan; every rank's encoder ran on a GPU). */
    adopt = embedded.demb && plan.cuda && !plan.chunk_rows && !plan.host_prep && st.cosine &&
            plan.device == embedded.device;
    VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &adopt, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (adopt) {
      double t0 = va_now();
      backend = va_backend_attach(&st, &cfg, &plan); /* st.X is NULL: nothing uploaded */
      va_rows_adopt_embedded(&st, &embedded);
      va_log0("backend set up in %.2f s\n", va_now() - t0);
      va_log0("the embedded vectors stayed on the GPU (%.2f GB per rank not copied to the host and back)\n",
              (double)st.n_local * (double)st.d * 8.0 / 1e9);
    } else {
      va_embedded_to_host(&embedded);
      st.X = embedded.emb;
    }
    goto shard_ready;
  }
  va_read_result_t read = {-1, 0};
  va_tick_t t;
  if (direct) {
    /* Straight to the GPU (backend/rows.h): the backend is attached before the read. */
    double t0 = va_now();
    backend = va_backend_attach(&st, &cfg, &plan);
    va_log0("backend set up in %.2f s, before the read\n", va_now() - t0);
    t = va_tick();
    va_rows_read_to_device(&st, &in, cfg.io, threads, &read);
    va_tock(VA_PH_READ, t);
  } else {
    double shard_bytes = (double)st.n_local * (double)st.d * 4.0;
    st.X = malloc((size_t)shard_bytes > 0 ? (size_t)shard_bytes : 1);
    if (!st.X)
      snprintf(err, sizeof err,
               "rank %d on %s cannot allocate %.2f GiB for its shard of %lld rows; use more ranks or a larger node",
               va_proc.rank, va_proc.host, shard_bytes / 1073741824.0, (long long)st.n_local);
    VA_AGREE_OR_EXIT(st.X ? 0 : VA_EXIT_RESOURCE, err);
    t = va_tick();
    if (threads > 1) va_prefault(st.X, (size_t)shard_bytes, threads);
    va_input_read(&in, st.row0, st.n_local, st.X, (size_t)(cfg.read_chunk_mb * 1048576.0), cfg.io, threads, &read);
    va_tock(VA_PH_READ, t);
  }
  va_stop_point("read");
  int64_t first_bad = read.bad_row < 0 ? INT64_MAX : read.bad_row;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD));
  if (first_bad != INT64_MAX) {
    snprintf(err, sizeof err, "input '%s' row %lld holds NaN or Inf; clean the data first", input_label,
             (long long)first_bad);
    VA_AGREE_OR_EXIT(va_proc.rank == 0 ? VA_EXIT_INPUT : 0, err);
  }
  in.checksum = read.checksum;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &in.checksum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
shard_ready:
  t = va_tick();
  const double t_init_start = va_now(), read_seconds = va_phase_total(VA_PH_READ);
  const double read_bytes = embed_corpus ? 0 : (double)in.n * (double)in.d * (double)in.elem_size;
  if (read_bytes > 0)
    va_log0("read %lld rows (%.2f GB) in %.2f s: %.2f GB/s\n", (long long)in.n, read_bytes / 1e9, read_seconds,
            read_seconds > 0 ? read_bytes / 1e9 / read_seconds : 0.0);
  double attach_seconds = 0; /* the backend attached after the read, inside the initialisation */
  int64_t zero_rows = 0;
  if (direct || adopt) {
    st.total_var = preprocess(&st, &zero_rows); /* on the device (streamed: in the pinned host copy) */
    gpu_memory.peak = fmax(gpu_memory.peak, va_backend_gpu_memory(&plan));
    va_rows_device_ready(&st);
  } else {
    st.total_var = preprocess(&st, &zero_rows);
    if (sampled) shard = take_sample(&st, train_rows);
    double t0 = va_now();
    backend = va_backend_attach(&st, &cfg, &plan);
    attach_seconds = va_now() - t0;
    gpu_memory.peak = fmax(gpu_memory.peak, va_backend_gpu_memory(&plan));
  }
  if (zero_rows)
    va_log0("warning: %lld zero rows cannot be unit-normalised for cosine; they stay zero\n", (long long)zero_rows);
  va_stop_point("preprocessing");
  double t_anchors = va_now();
  if (resume_path) {
    va_checkpoint_read(resume_path, &st, &in);
    va_log0("resuming from %s after iteration %lld (k %lld, T %.6g)\n", resume_path, (long long)st.iter,
            (long long)st.k, st.T);
  } else {
    if (cfg.init_kind == VA_INIT_FILE) va_init_file_read(&st);
    va_state_alloc(&st);
    va_init_anchors(&st);
  }
  double t_warm = va_now();
  va_rows_warm_up(&st);
  va_tock(VA_PH_INIT, t);
  va_stop_point("initialisation");
  double t_init_end = va_now();
  ckpt_job_t ckpt = {.in = &in};
  va_checkpoint_path(&cfg, ckpt.path, sizeof ckpt.path);
  st.checkpoint_fn = write_checkpoint;
  st.checkpoint_ctx = &ckpt;
  /* Wall-clock parts of the initialisation, consecutive, so that they add up to the whole. */
  va_log0("init %.2f s: preprocessing %.2f s, backend %.2f s, anchors %.2f s (%s), warm-up %.2f s\n",
          t_init_end - t_init_start, t_anchors - t_init_start - attach_seconds, attach_seconds, t_warm - t_anchors,
          resume_path ? "resumed" : cfg.init, t_init_end - t_warm);

  double t_loop = va_now(), comm_loop = va_comm_seconds();
  /* A stop request in the loop: checkpoint at the end of the iteration; after it, the job finishes (stop.h). */
  va_anneal(&st);
  va_stop_finishing();
  double loop_seconds = va_now() - t_loop, loop_allreduce_seconds = va_comm_seconds() - comm_loop;
  gpu_memory.loop = va_backend_gpu_memory(&plan);
  gpu_memory.peak = fmax(gpu_memory.peak, gpu_memory.loop);
  if (st.stopped) {
    va_log0("stopped by a signal after iteration %lld; resume with: vecanneal compress ... --resume %s\n",
            (long long)st.iter, ckpt.path);
    va_state_free(&st);
    free(shard);
    va_comm_finalize();
    return VA_EXIT_STOPPED;
  }
  va_anneal_anchors_to_host(&st); /* the index and the final pass read them */
  if (sampled) backend = attach_shard(&st, &full, shard, &cfg, &plan);

  double *counts = va_malloc((size_t)st.k * sizeof(double), "counts"),
         *mse = va_malloc((size_t)st.k * sizeof(double), "mse");
  double E = va_final_pass(&st, counts, mse);
  va_index_codes_t codes = {0};
  if (cfg.codes == VA_CODES_PQ) va_codes_pq(&st, va_codes_train_rows(&cfg, train_rows), &codes);
  float *anchors = va_malloc((size_t)(st.k * st.d) * sizeof(float), "output anchors");
  for (int64_t j = 0; j < st.k; j++)
    for (int64_t q = 0; q < st.d; q++) anchors[j * st.d + q] = (float)(st.A[j * st.d + q] + st.center[q]);
  va_index_t ix = {.st = &st,
                   .in = &in,
                   .anchors = anchors,
                   .counts = counts,
                   .mse = mse,
                   .energy = E,
                   .distortion = st.total_var > 0 ? E / st.total_var : 0,
                   .ratio = va_index_payload_bytes(st.n, st.d, st.k) / ((double)st.n * (double)st.d * in.elem_size),
                   .seconds = va_now() - t_start,
                   .train_rows = train_rows,
                   .backend = backend,
                   .codes = cfg.codes == VA_CODES_PQ ? &codes : NULL};
  t = va_tick();
  rc = va_index_write(cfg.out, &ix);
  va_tock(VA_PH_WRITE, t);
  if (rc) return rc;
  double total = va_now() - t_start;
  va_log0("done: %lld iterations (%s), k %lld -> %lld (merges %lld, splits %lld, reseeds %lld), energy %.8g, "
          "distortion %.6f, "
          "ratio %.4f, %.2f ms/iteration, %.2f s total\n",
          (long long)st.iter, st.converged ? "converged" : "max_iter", (long long)st.k_initial, (long long)st.k,
          (long long)st.merges, (long long)st.splits, (long long)st.reseeds, E, ix.distortion, ix.ratio,
          st.iter ? 1e3 * loop_seconds / (double)st.iter : 0.0, total);
  va_log0("index written to %s\n", cfg.out);
  /* A finished job has no use for its checkpoint. */
  if (va_proc.rank == 0) remove(ckpt.path);
  va_run_summary_t sum = {.n = st.n,
                          .d = st.d,
                          .k_initial = st.k_initial,
                          .k_final = st.k,
                          .iterations = st.iter,
                          .loop_seconds = loop_seconds,
                          .loop_allreduce_seconds = loop_allreduce_seconds,
                          .total_seconds = total,
                          .final_energy = E,
                          .backend = backend,
                          .gpu_memory_loop_bytes = gpu_memory.loop,
                          .gpu_memory_peak_bytes = gpu_memory.peak,
                          .codes_m = codes.m,
                          .codes_bits = codes.bits,
                          .codes_bytes_per_vector = codes.bytes_per_vector,
                          .codes_compression_ratio = codes.compression_ratio,
                          .codes_error = codes.error,
                          .codes_anchor_error = codes.anchor_error,
                          .codes_train_seconds = codes.train_seconds,
                          .codes_encode_seconds = codes.encode_seconds};
  char device[160];
  va_backend_device_name(&plan, device, sizeof device);
  sum.device = device;
  va_rows_stream_figures(&st, &plan, &sum.stream_chunk_bytes, &sum.stream_copied_bytes);
  if ((rc = va_metrics_write(cfg.metrics, &sum, &cfg))) return rc;
  free(anchors);
  free(counts);
  free(mse);
  va_codes_free(&codes);
  va_state_free(&st);
  va_comm_finalize();
  return 0;
}

int va_compress_job(const va_compress_options_t *o) {
  if (o->cfg.progress_every > 0) va_heartbeat_start(); /* no quiet stretch on rank 0 (heartbeat.h) */
  int rc = compress_job(o);
  va_heartbeat_stop();
  return rc;
}
