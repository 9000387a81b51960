/* checkpoint.c: checkpoint files (see checkpoint.h) and the stop-signal flag. */
#include "checkpoint.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static volatile sig_atomic_t stop_flag;
static void on_stop(int sig) { (void)sig; stop_flag = 1; }

void va_install_stop_signals(va_stop_mode_t mode) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  /* FINISH records the signal like CHECKPOINT, but nothing reads the flag any more: the job completes. */
  sa.sa_handler = mode == VA_STOP_DEFAULT ? SIG_DFL : on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
  /* Fault injection for tests: VECANNEAL_FAULT_SIGNAL_ON_FINISH=1 sends this process SIGUSR1 as soon as
   * FINISH is in force, as a Slurm warning that arrives just after the last iteration would. */
  const char *e = getenv("VECANNEAL_FAULT_SIGNAL_ON_FINISH");
  if (mode == VA_STOP_FINISH && e && atoi(e) == 1) raise(SIGUSR1);
}

int va_stop_requested(void) {
  /* Fault injection for tests: VECANNEAL_FAULT_STOP_AFTER=N acts as a stop signal once N iterations
   * have run (deterministic, unlike timing a kill). */
  static int64_t after = -2;
  static int64_t calls;
  if (after == -2) {
    const char *e = getenv("VECANNEAL_FAULT_STOP_AFTER");
    after = e ? atoll(e) : -1;
  }
  if (after >= 0 && calls++ >= after) return 1;
  return stop_flag != 0;
}

void va_checkpoint_path(const va_config_t *cfg, char *out, size_t len) {
  if (cfg->checkpoint[0]) snprintf(out, len, "%s", cfg->checkpoint);
  else snprintf(out, len, "%s.ckpt.h5", cfg->out);
}

/* Keys that may change between the interrupted run and the resumed one. */
static int resumable_key(const char *key) {
  static const char *const free_keys[] = {"out", "metrics", "checkpoint", "checkpoint_every", "progress_every", "max_iter",
                                          "threads", "io", "read_chunk_mb", "tile_rows", "backend"};
  for (size_t i = 0; i < sizeof free_keys / sizeof *free_keys; i++)
    if (!strcmp(key, free_keys[i])) return 1;
  return 0;
}

typedef struct { const va_state_t *st; const va_input_t *in; } ckpt_ctx_t;

static void write_1d(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int64_t len, const void *buf) {
  hsize_t dims[1] = {(hsize_t)(len > 0 ? len : 0)};
  hid_t sp = VA_H5(H5Screate_simple(1, dims, NULL));
  hid_t ds = VA_H5(H5Dcreate2(loc, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  va_h5_write_whole(ds, mtype, buf);
  H5Dclose(ds);
  H5Sclose(sp);
}

static void config_attr(const char *key, const char *value, void *ctx) { va_h5_attr_str(*(hid_t *)ctx, key, value); }

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
  H5Dclose(VA_H5(H5Dcreate2(f, "/assignments", H5T_STD_U32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  H5Sclose(sp);
  va_h5_attr_str(f, "format", "vecanneal-checkpoint");
  va_h5_attr_str(f, "source_file", c->in->file);
  va_h5_attr_str(f, "source_dataset", c->in->dataset);
  va_h5_attr_i64(f, "n", st->n);
  va_h5_attr_i64(f, "d", st->d);
  va_h5_attr_i64(f, "k", st->k);
  va_h5_attr_i64(f, "k_initial", st->k_initial);
  va_h5_attr_i64(f, "iter", st->iter);
  va_h5_attr_i64(f, "still", st->still);
  va_h5_attr_i64(f, "converged", st->converged);
  va_h5_attr_i64(f, "merges", st->merges);
  va_h5_attr_i64(f, "splits", st->splits);
  va_h5_attr_i64(f, "reseeds", st->reseeds);
  va_h5_attr_i64(f, "changed", st->changed);
  va_h5_attr_i64(f, "ranks", va_proc.nranks);
  va_h5_attr_f64(f, "T", st->T);
  va_h5_attr_f64(f, "E", st->E);
  va_h5_attr_f64(f, "E_prev", st->E_prev);
  va_h5_attr_f64(f, "total_var", st->total_var);
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
  ckpt_ctx_t c = {st, in};
  return va_h5_write_file(path, st->cfg->io, ckpt_setup, ckpt_rows, &c);
}

static void read_1d(hid_t f, const char *name, hid_t mtype, void *buf) {
  hid_t ds = VA_H5(H5Dopen2(f, name, H5P_DEFAULT));
  VA_H5(H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf));
  H5Dclose(ds);
}

static int64_t attr_i64(hid_t f, const char *name) {
  int64_t v = 0;
  hid_t a = VA_H5(H5Aopen(f, name, H5P_DEFAULT));
  VA_H5(H5Aread(a, H5T_NATIVE_INT64, &v));
  H5Aclose(a);
  return v;
}

static double attr_f64(hid_t f, const char *name) {
  double v = 0;
  hid_t a = VA_H5(H5Aopen(f, name, H5P_DEFAULT));
  VA_H5(H5Aread(a, H5T_NATIVE_DOUBLE, &v));
  H5Aclose(a);
  return v;
}

typedef struct { hid_t cg; char *err; size_t errlen; int bad; } cmp_ctx_t;
static void compare_key(const char *key, const char *value, void *vctx) {
  cmp_ctx_t *c = vctx;
  if (c->bad || resumable_key(key)) return;
  char saved[VA_PATH_MAX + 32];
  if (va_h5_attr_read_str(c->cg, key, saved, sizeof saved) || strcmp(saved, value)) {
    snprintf(c->err, c->errlen, "the checkpoint was made with %s = '%s', this run has '%s'; resume with the same configuration", key, saved, value);
    c->bad = 1;
  }
}

void va_checkpoint_read(const char *path, va_state_t *st, const va_input_t *in) {
  char err[2048] = "", s[VA_PATH_MAX];
  int rc = 0;
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) { snprintf(err, sizeof err, "cannot open checkpoint '%s': %s", path, va_h5_last_error()); rc = VA_EXIT_INPUT; }
  else if (va_h5_attr_read_str(f, "format", s, sizeof s) || strcmp(s, "vecanneal-checkpoint")) { snprintf(err, sizeof err, "'%s' is not a vecanneal checkpoint", path); rc = VA_EXIT_INPUT; }
  else if (attr_i64(f, "n") != st->n || attr_i64(f, "d") != st->d || (va_h5_attr_read_str(f, "source_file", s, sizeof s), strcmp(s, in->file))) {
    snprintf(err, sizeof err, "checkpoint '%s' belongs to another input (%s, %lld x %lld)", path, s, (long long)attr_i64(f, "n"), (long long)attr_i64(f, "d"));
    rc = VA_EXIT_INPUT;
  } else {
    cmp_ctx_t c = {VA_H5(H5Gopen2(f, "/config", H5P_DEFAULT)), err, sizeof err, 0};
    va_config_visit(st->cfg, compare_key, &c);
    H5Gclose(c.cg);
    if (c.bad) rc = VA_EXIT_USAGE;
  }
  if (va_agree(rc, err)) { if (f >= 0) H5Fclose(f); va_exit_all(rc); }
  st->k = attr_i64(f, "k");
  st->k_initial = attr_i64(f, "k_initial");
  st->A = va_malloc((size_t)(st->k * st->d) * sizeof(float), "checkpoint anchors");
  read_1d(f, "/anchors", H5T_NATIVE_FLOAT, st->A);
  va_state_alloc(st); /* grows A in place, allocates the rest */
  read_1d(f, "/velocity", H5T_NATIVE_DOUBLE, st->vel);
  read_1d(f, "/rms_prev", H5T_NATIVE_DOUBLE, st->rms_prev);
  st->iter = attr_i64(f, "iter");
  st->still = attr_i64(f, "still");
  st->converged = (int)attr_i64(f, "converged");
  st->merges = attr_i64(f, "merges");
  st->splits = attr_i64(f, "splits");
  st->reseeds = attr_i64(f, "reseeds");
  st->changed = attr_i64(f, "changed");
  st->T = attr_f64(f, "T");
  st->E = attr_f64(f, "E");
  st->E_prev = attr_f64(f, "E_prev");
  st->h_cap = st->iter > 0 ? st->iter : 1;
  st->h_energy = va_malloc((size_t)st->h_cap * sizeof(double), "history");
  st->h_temp = va_malloc((size_t)st->h_cap * sizeof(double), "history");
  st->h_changed = va_malloc((size_t)st->h_cap * sizeof(int64_t), "history");
  st->h_k = va_malloc((size_t)st->h_cap * sizeof(int64_t), "history");
  if (st->iter > 0) {
    read_1d(f, "/history_energy", H5T_NATIVE_DOUBLE, st->h_energy);
    read_1d(f, "/history_temperature", H5T_NATIVE_DOUBLE, st->h_temp);
    read_1d(f, "/history_changed", H5T_NATIVE_INT64, st->h_changed);
    read_1d(f, "/history_anchors", H5T_NATIVE_INT64, st->h_k);
  }
  /* This rank's rows of the last assignment. */
  hid_t ds = VA_H5(H5Dopen2(f, "/assignments", H5P_DEFAULT));
  hid_t fs = VA_H5(H5Dget_space(ds));
  if (st->n_local > 0) {
    hsize_t off = (hsize_t)st->row0, cnt = (hsize_t)st->n_local;
    VA_H5(H5Sselect_hyperslab(fs, H5S_SELECT_SET, &off, NULL, &cnt, NULL));
    hid_t ms = VA_H5(H5Screate_simple(1, &cnt, NULL));
    VA_H5(H5Dread(ds, H5T_NATIVE_UINT32, ms, fs, H5P_DEFAULT, st->prev));
    H5Sclose(ms);
  }
  H5Sclose(fs);
  H5Dclose(ds);
  H5Fclose(f);
  st->be->push_prev(st);
  va_state_anchor_norms(st);
}
