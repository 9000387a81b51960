/* checkpoint.c: checkpoint files (see checkpoint.h). */
#include "core/checkpoint.h"

#include <math.h> /* isfinite */
#include <stdlib.h>
#include <string.h>

#include "util/checksum.h" /* va_hash_bytes, va_rows_checksum */
#include "io/files.h"      /* va_temp_name */
#include "util/util.h"

void va_checkpoint_path(const va_config_t *cfg, char *out, size_t len) {
  if (cfg->checkpoint[0]) snprintf(out, len, "%s", cfg->checkpoint);
  else va_temp_name(cfg->out, ".ckpt.h5", out, len);
}

/* Keys that may change between the interrupted run and the resumed one. */
static int resumable_key(const char *key) {
  /* input and input_format may name another copy of the data: the rows' checksum decides. */
  static const char *const free_keys[] = {"out",      "metrics", "checkpoint",  "checkpoint_every", "progress_every",
                                          "max_iter", "threads", "io",          "read_chunk_mb",    "tile_rows",
                                          "backend",  "input",   "input_format"};
  for (size_t i = 0; i < sizeof free_keys / sizeof *free_keys; i++)
    if (!strcmp(key, free_keys[i])) return 1;
  return 0;
}

/* The scalars of a checkpoint, all 8 bytes wide (hashed as one block: no padding). */
typedef struct {
  int64_t n, d, k, k_initial, iter, still, converged, merges, splits, reseeds, changed;
  int64_t input_checksum; /* the input's checksum (h5io.h), as written: a bit pattern */
  double T, E, E_prev, total_var;
} ckpt_scalars_t;

/* The replicated content of a checkpoint: what its checksum covers besides the assignments. */
typedef struct {
  ckpt_scalars_t sc;
  const float *A;
  const double *vel, *rms_prev, *center, *h_energy, *h_temp;
  const int64_t *h_changed, *h_k;
  uint64_t config_hash; /* of the key = value strings, in key order */
} ckpt_content_t;

static uint64_t content_hash(const ckpt_content_t *c, uint64_t assignments_sum) {
  const ckpt_scalars_t *sc = &c->sc;
  const size_t kd = (size_t)(sc->k * sc->d), it = (size_t)sc->iter;
  uint64_t h = va_hash_bytes(sc, sizeof *sc, 1);
  h = va_hash_mix(h ^ va_hash_bytes(c->A, kd * sizeof(float), 2));
  h = va_hash_mix(h ^ va_hash_bytes(c->vel, kd * sizeof(double), 3));
  h = va_hash_mix(h ^ va_hash_bytes(c->rms_prev, (size_t)sc->k * sizeof(double), 4));
  h = va_hash_mix(h ^ va_hash_bytes(c->center, (size_t)sc->d * sizeof(double), 5));
  h = va_hash_mix(h ^ va_hash_bytes(c->h_energy, it * sizeof(double), 6));
  h = va_hash_mix(h ^ va_hash_bytes(c->h_temp, it * sizeof(double), 7));
  h = va_hash_mix(h ^ va_hash_bytes(c->h_changed, it * sizeof(int64_t), 8));
  h = va_hash_mix(h ^ va_hash_bytes(c->h_k, it * sizeof(int64_t), 9));
  h = va_hash_mix(h ^ c->config_hash);
  return va_hash_mix(h ^ assignments_sum);
}

/* The checksum of what the early check reads (scalars, configuration, the input's name and type):
 * damage there is told apart from another configuration before the data is read. */
static uint64_t metadata_hash(const ckpt_scalars_t *sc, uint64_t config_hash, const char *file, const char *dataset,
                              const char *dtype) {
  uint64_t h = va_hash_bytes(sc, sizeof *sc, 21) ^ va_hash_mix(config_hash);
  h = va_hash_mix(h ^ va_hash_bytes(file, strlen(file), 22));
  h = va_hash_mix(h ^ va_hash_bytes(dataset, strlen(dataset), 23));
  return va_hash_mix(h ^ va_hash_bytes(dtype, strlen(dtype), 24));
}

static void hash_config_pair(const char *key, const char *value, void *ctx) {
  uint64_t *h = ctx;
  *h = va_hash_mix(*h ^ va_hash_bytes(key, strlen(key), 11) ^ va_hash_bytes(value, strlen(value), 12));
}

/* The assignments' share of the checksum: summed over ranks, the same for any rank count. */
static uint64_t assignments_sum(const va_state_t *st) {
  uint64_t sum = va_rows_checksum(st->prev, sizeof(uint32_t), st->row0, st->n_local, st->aopts.threads);
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
  return sum;
}

/* --- writing ------------------------------------------------------------------------------------------ */
typedef struct {
  const va_state_t *st;
  const va_input_t *in;
  ckpt_scalars_t sc;
  uint64_t checksum, metadata_checksum;
} ckpt_ctx_t;

static void write_1d(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int64_t len, const void *buf) {
  hsize_t dims[1] = {(hsize_t)(len > 0 ? len : 0)};
  hid_t sp = VA_H5(H5Screate_simple(1, dims, NULL));
  hid_t ds = va_h5_create_dataset(loc, name, ftype, sp, H5P_DEFAULT);
  va_h5_write_whole(ds, mtype, buf);
  H5Dclose(ds);
  H5Sclose(sp);
}

static void config_attr(const char *key, const char *value, void *ctx) { va_h5_attr_str(*(hid_t *)ctx, key, value); }

static const char *const SCALAR_NAMES[] = {"n",         "d",      "k",      "k_initial", "iter",    "still",
                                           "converged", "merges", "splits", "reseeds",   "changed", "input_checksum"};
static const char *const REAL_NAMES[] = {"T", "E", "E_prev", "total_var"};
#define N_INT  (sizeof SCALAR_NAMES / sizeof *SCALAR_NAMES)
#define N_REAL (sizeof REAL_NAMES / sizeof *REAL_NAMES)

static void ckpt_setup(hid_t f, void *vctx) {
  const ckpt_ctx_t *c = vctx;
  const va_state_t *st = c->st;
  write_1d(f, "/anchors", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, st->k * st->d, st->A);
  write_1d(f, "/velocity", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, st->k * st->d, st->vel);
  write_1d(f, "/rms_prev", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, st->k, st->rms_prev);
  write_1d(f, "/center", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, st->d, st->center);
  write_1d(f, "/history_energy", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, st->iter, st->h_energy);
  write_1d(f, "/history_temperature", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, st->iter, st->h_temp);
  write_1d(f, "/history_changed", H5T_STD_I64LE, H5T_NATIVE_INT64, st->iter, st->h_changed);
  write_1d(f, "/history_anchors", H5T_STD_I64LE, H5T_NATIVE_INT64, st->iter, st->h_k);
  hsize_t n = (hsize_t)st->n;
  hid_t sp = VA_H5(H5Screate_simple(1, &n, NULL));
  H5Dclose(va_h5_create_dataset(f, "/assignments", H5T_STD_U32LE, sp, H5P_DEFAULT));
  H5Sclose(sp);
  va_h5_attr_str(f, "format", "vecanneal-checkpoint");
  va_h5_attr_str(f, "source_file", c->in->file);
  va_h5_attr_str(f, "source_dataset", c->in->dataset);
  va_h5_attr_str(f, "source_dtype", va_dtype_name(c->in->dtype));
  const int64_t *ints = &c->sc.n;
  const double *reals = &c->sc.T;
  for (size_t i = 0; i < N_INT; i++) va_h5_attr_i64(f, SCALAR_NAMES[i], ints[i]);
  for (size_t i = 0; i < N_REAL; i++) va_h5_attr_f64(f, REAL_NAMES[i], reals[i]);
  va_h5_attr_i64(f, "ranks", va_proc.nranks);
  va_h5_attr_i64(f, "checksum", (int64_t)c->checksum);
  va_h5_attr_i64(f, "metadata_checksum", (int64_t)c->metadata_checksum);
  hid_t cg = VA_H5(H5Gcreate2(f, "/config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  va_config_visit(st->cfg, config_attr, &cg);
  H5Gclose(cg);
}

static void ckpt_rows(hid_t f, void *vctx) {
  const va_state_t *st = ((const ckpt_ctx_t *)vctx)->st;
  hid_t ds = VA_H5(H5Dopen2(f, "/assignments", H5P_DEFAULT));
  va_h5_write_block(ds, H5T_NATIVE_UINT32, st->row0, st->n_local, 1, sizeof(uint32_t), st->prev);
  H5Dclose(ds);
}

int va_checkpoint_write(const char *path, const va_state_t *st, const va_input_t *in) {
  ckpt_ctx_t c = {st, in, {0}, 0, 0};
  /* n: the input's rows, which a resumed job's input must have; /assignments holds the loop's st->n (the
   * sample's N with train_sample). */
  c.sc = (ckpt_scalars_t){in->n,         st->d,      st->k,      st->k_initial, st->iter,    st->still,
                          st->converged, st->merges, st->splits, st->reseeds,   st->changed, (int64_t)in->checksum,
                          st->T,         st->E,      st->E_prev, st->total_var};
  ckpt_content_t content = {c.sc,         st->A,      st->vel,       st->rms_prev, st->center,
                            st->h_energy, st->h_temp, st->h_changed, st->h_k,      0};
  va_config_visit(st->cfg, hash_config_pair, &content.config_hash);
  c.checksum = content_hash(&content, assignments_sum(st));
  c.metadata_checksum = metadata_hash(&c.sc, content.config_hash, in->file, in->dataset, va_dtype_name(in->dtype));
  const double bytes = 20.0 * (double)st->k * (double)st->d + 8.0 * (double)(st->k + st->d) + 32.0 * (double)st->iter +
                       4.0 * (double)st->n;
  return va_h5_write_file("checkpoint", path, bytes, st->cfg->io, ckpt_setup, ckpt_rows, &c);
}

/* --- reading: every call returns non-zero instead of failing, so that a damaged file is a message --- */
static int read_1d(hid_t f, const char *name, hid_t mtype, int64_t len, void *buf) {
  hid_t ds = H5Dopen2(f, name, H5P_DEFAULT), sp = ds >= 0 ? H5Dget_space(ds) : -1;
  const hssize_t points = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
  const int ok = points == len && (len == 0 || H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
  if (sp >= 0) H5Sclose(sp);
  if (ds >= 0) H5Dclose(ds);
  return !ok;
}

static int attr_read(hid_t f, const char *name, hid_t mtype, void *v) {
  hid_t a = H5Aexists(f, name) > 0 ? H5Aopen(f, name, H5P_DEFAULT) : -1;
  const int ok = a >= 0 && H5Aread(a, mtype, v) >= 0;
  if (a >= 0) H5Aclose(a);
  return !ok;
}

static int read_scalars(hid_t f, ckpt_scalars_t *sc) {
  int64_t *ints = &sc->n;
  double *reals = &sc->T;
  int bad = 0;
  for (size_t i = 0; i < N_INT; i++) bad |= attr_read(f, SCALAR_NAMES[i], H5T_NATIVE_INT64, &ints[i]);
  for (size_t i = 0; i < N_REAL; i++) bad |= attr_read(f, REAL_NAMES[i], H5T_NATIVE_DOUBLE, &reals[i]);
  return bad;
}

typedef struct {
  hid_t cg;
  char *err;
  size_t errlen;
  int bad;
  uint64_t hash;
} cmp_ctx_t;
/* Hashes every saved key = value and records the first difference from this run's configuration. */
static void compare_key(const char *key, const char *value, void *vctx) {
  cmp_ctx_t *c = vctx;
  char saved[VA_PATH_MAX + 32];
  if (va_h5_attr_read_str(c->cg, key, saved, sizeof saved)) {
    if (!c->bad) snprintf(c->err, c->errlen, "key '%s' is missing from its configuration (damaged file?)", key);
    c->bad = VA_EXIT_INPUT;
    return;
  }
  hash_config_pair(key, saved, &c->hash);
  if (c->bad || resumable_key(key) || !strcmp(saved, value)) return;
  snprintf(c->err, c->errlen, "it was made with %s = '%s', this run has '%s'; resume with the same configuration", key,
           saved, value);
  c->bad = VA_EXIT_USAGE;
}

/* Opens path and checks what rank 0 can check without the data: a vecanneal checkpoint of this input's
 * size and type, with this configuration. 0, or an exit code with err set; *f open on success. */
static int open_checked(const char *path, const va_config_t *cfg, const va_input_t *in, hid_t *f, ckpt_scalars_t *sc,
                        uint64_t *config_hash, char *err, size_t errlen) {
  char s[VA_PATH_MAX], src[VA_PATH_MAX + 300] = "", dtype[32] = "", label[VA_PATH_MAX + 300];
  *f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (*f < 0) {
    snprintf(err, errlen,
             "cannot resume from '%s': it cannot be opened as HDF5 (missing, damaged or not a checkpoint): %s", path,
             va_h5_last_error());
    return VA_EXIT_INPUT;
  }
  if (va_h5_attr_read_str(*f, "format", s, sizeof s) || strcmp(s, "vecanneal-checkpoint")) {
    snprintf(err, errlen,
             "cannot resume from '%s': it is not a vecanneal checkpoint (no format = vecanneal-checkpoint)", path);
    return VA_EXIT_INPUT;
  }
  int64_t checksum, meta_saved;
  if (read_scalars(*f, sc) || attr_read(*f, "checksum", H5T_NATIVE_INT64, &checksum) ||
      attr_read(*f, "metadata_checksum", H5T_NATIVE_INT64, &meta_saved)) {
    snprintf(err, errlen,
             "cannot resume from '%s': it lacks attributes every checkpoint has (damaged, or written by an older "
             "vecanneal)",
             path);
    return VA_EXIT_INPUT;
  }
  char file[VA_PATH_MAX] = "", dset[256] = "";
  va_h5_attr_read_str(*f, "source_file", file, sizeof file);
  va_h5_attr_read_str(*f, "source_dataset", dset, sizeof dset);
  va_h5_attr_read_str(*f, "source_dtype", dtype, sizeof dtype);
  snprintf(src, sizeof src, "'%s%s%s'", file, dset[0] ? ":" : "", dset); /* no dataset: a vector file */
  char why[2 * VA_PATH_MAX] = "";
  cmp_ctx_t c = {H5Gopen2(*f, "/config", H5P_DEFAULT), why, sizeof why, 0, 0};
  if (c.cg < 0) snprintf(why, sizeof why, "it has no /config group"), c.bad = VA_EXIT_INPUT;
  else va_config_visit(cfg, compare_key, &c), H5Gclose(c.cg);
  *config_hash = c.hash;
  if (c.bad != VA_EXIT_INPUT && (uint64_t)meta_saved != metadata_hash(sc, c.hash, file, dset, dtype)) {
    snprintf(err, errlen, "cannot resume from '%s': its attributes do not match their checksum (damaged file)", path);
    return VA_EXIT_INPUT;
  }
  if (c.bad) {
    snprintf(err, errlen, "cannot resume from '%s': %s", path, why);
    return c.bad;
  }
  if (sc->n != in->n || sc->d != in->d || strcmp(dtype, va_dtype_name(in->dtype))) {
    snprintf(
        err, errlen,
        "cannot resume from '%s': it was made from %s, %lld x %lld %s, but this job's input '%s' is %lld x %lld %s; "
        "resume with the input it was made from",
        path, src, (long long)sc->n, (long long)sc->d, dtype, va_input_label(in, label, sizeof label), (long long)in->n,
        (long long)in->d, va_dtype_name(in->dtype));
    return VA_EXIT_INPUT;
  }
  return 0;
}

void va_checkpoint_check(const char *path, const va_config_t *cfg, const va_input_t *in) {
  char err[3 * VA_PATH_MAX] = "";
  int rc = 0;
  if (va_proc.rank == 0) {
    hid_t f;
    ckpt_scalars_t sc;
    uint64_t config_hash;
    rc = open_checked(path, cfg, in, &f, &sc, &config_hash, err, sizeof err);
    if (f >= 0) H5Fclose(f);
  }
  VA_AGREE_OR_EXIT(rc, err);
}

static int all_finite_f32(const float *v, int64_t len) {
  for (int64_t i = 0; i < len; i++)
    if (!isfinite(v[i])) return 0;
  return 1;
}

static int all_finite_f64(const double *v, int64_t len) {
  for (int64_t i = 0; i < len; i++)
    if (!isfinite(v[i])) return 0;
  return 1;
}

void va_checkpoint_read(const char *path, va_state_t *st, const va_input_t *in) {
  char err[3 * VA_PATH_MAX] = "", label[VA_PATH_MAX + 300];
  ckpt_scalars_t sc;
  uint64_t config_hash = 0;
  hid_t f = -1;
  /* Every rank opens it (rank 0 checked it before the read; this one may be on another node). */
  int rc = open_checked(path, st->cfg, in, &f, &sc, &config_hash, err, sizeof err);
  int ok = !rc && sc.k >= 1 && sc.k <= sc.n && sc.iter >= 0 && sc.k <= UINT32_MAX;
  if (!rc && !ok) {
    snprintf(err, sizeof err, "cannot resume from '%s': it is damaged (k %lld, iteration %lld)", path, (long long)sc.k,
             (long long)sc.iter);
    rc = VA_EXIT_INPUT;
  }
  if (!rc && (uint64_t)sc.input_checksum != in->checksum) {
    snprintf(err, sizeof err,
             "cannot resume from '%s': it was made from other data than this job's input '%s' (the same %lld x %lld, "
             "but other values): resume with the input it was made from",
             path, va_input_label(in, label, sizeof label), (long long)in->n, (long long)in->d);
    rc = VA_EXIT_INPUT;
  }
  if (va_agree(rc, err)) {
    if (f >= 0) H5Fclose(f);
    va_exit_all(rc);
  }
  st->k = sc.k;
  st->k_initial = sc.k_initial;
  st->A = va_malloc((size_t)(st->k * st->d) * sizeof(float), "checkpoint anchors");
  int bad = read_1d(f, "/anchors", H5T_NATIVE_FLOAT, st->k * st->d, st->A);
  va_state_alloc(st); /* grows A in place, allocates the rest */
  const int64_t it = sc.iter;
  st->h_cap = it > 0 ? it : 1;
  st->h_energy = va_malloc((size_t)st->h_cap * sizeof(double), "history");
  st->h_temp = va_malloc((size_t)st->h_cap * sizeof(double), "history");
  st->h_changed = va_malloc((size_t)st->h_cap * sizeof(int64_t), "history");
  st->h_k = va_malloc((size_t)st->h_cap * sizeof(int64_t), "history");
  double *center = va_malloc((size_t)st->d * sizeof(double), "checkpoint centre");
  bad |= read_1d(f, "/velocity", H5T_NATIVE_DOUBLE, st->k * st->d, st->vel);
  bad |= read_1d(f, "/rms_prev", H5T_NATIVE_DOUBLE, st->k, st->rms_prev);
  bad |= read_1d(f, "/center", H5T_NATIVE_DOUBLE, st->d, center);
  bad |= read_1d(f, "/history_energy", H5T_NATIVE_DOUBLE, it, st->h_energy);
  bad |= read_1d(f, "/history_temperature", H5T_NATIVE_DOUBLE, it, st->h_temp);
  bad |= read_1d(f, "/history_changed", H5T_NATIVE_INT64, it, st->h_changed);
  bad |= read_1d(f, "/history_anchors", H5T_NATIVE_INT64, it, st->h_k);
  /* This rank's rows of the last assignment. */
  hid_t ds = H5Dopen2(f, "/assignments", H5P_DEFAULT), fs = ds >= 0 ? H5Dget_space(ds) : -1;
  hsize_t rows = 0;
  bad |= fs < 0 || H5Sget_simple_extent_dims(fs, &rows, NULL) != 1 || rows != (hsize_t)st->n;
  if (!bad && st->n_local > 0) {
    hsize_t off = (hsize_t)st->row0, cnt = (hsize_t)st->n_local;
    hid_t ms = H5Screate_simple(1, &cnt, NULL);
    bad |= ms < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, &off, NULL, &cnt, NULL) < 0 ||
           H5Dread(ds, H5T_NATIVE_UINT32, ms, fs, H5P_DEFAULT, st->prev) < 0;
    if (ms >= 0) H5Sclose(ms);
  }
  if (fs >= 0) H5Sclose(fs);
  if (ds >= 0) H5Dclose(ds);
  H5Fclose(f);
  for (int64_t i = 0; i < st->n_local && !bad; i++) bad |= st->prev[i] >= (uint32_t)st->k;
  if (bad)
    snprintf(err, sizeof err,
             "cannot resume from '%s': its data cannot be read, or holds impossible values (damaged file)", path);
  if (!bad && !(all_finite_f32(st->A, st->k * st->d) && all_finite_f64(st->vel, st->k * st->d) && isfinite(sc.T) &&
                isfinite(sc.E))) {
    snprintf(err, sizeof err, "cannot resume from '%s': its anchors or state hold NaN or Inf", path);
    bad = 1;
  }
  /* The checksum covers every value the checkpoint holds; the assignments' share is summed over ranks. */
  const uint64_t asg = va_rows_checksum(st->prev, sizeof(uint32_t), st->row0, bad ? 0 : st->n_local, st->aopts.threads);
  uint64_t total = asg;
  VA_MPI(MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
  if (!bad) {
    ckpt_content_t content = {sc,           st->A,      st->vel,       st->rms_prev, center,
                              st->h_energy, st->h_temp, st->h_changed, st->h_k,      config_hash};
    int64_t saved = 0;
    hid_t g = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (g < 0 || attr_read(g, "checksum", H5T_NATIVE_INT64, &saved) ||
        (uint64_t)saved != content_hash(&content, total)) {
      snprintf(err, sizeof err, "cannot resume from '%s': its content does not match its checksum (damaged file)",
               path);
      bad = 1;
    }
    if (g >= 0) H5Fclose(g);
  }
  free(center);
  VA_AGREE_OR_EXIT(bad ? VA_EXIT_INPUT : 0, err);
  st->iter = sc.iter;
  st->still = sc.still;
  st->converged = (int)sc.converged;
  st->merges = sc.merges;
  st->splits = sc.splits;
  st->reseeds = sc.reseeds;
  st->changed = sc.changed;
  st->T = sc.T;
  st->E = sc.E;
  st->E_prev = sc.E_prev;
  st->be->push_prev(st);
  va_state_anchor_norms(st);
}
