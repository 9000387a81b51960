/* config.h: every tunable of a vecanneal job, one table of keys with types, defaults, ranges and docs.
 * Sources are applied in order: built-in defaults, the preset (preset = vlc), the config file, then
 * --set key=value and the CLI shorthands (--anchors, --input, --out, --metrics). An unknown key or a
 * bad value is a usage error naming the key and where it came from. */
#ifndef VECANNEAL_CONFIG_H
#define VECANNEAL_CONFIG_H
#include <stdint.h>
#include <stdio.h>

enum { VA_BACKEND_AUTO, VA_BACKEND_CPU, VA_BACKEND_CUDA };
enum { VA_PREC_FP32, VA_PREC_TF32, VA_PREC_FP16, VA_PREC_BF16 }; /* same values as VA_CUDA_* */
enum { VA_METRIC_AUTO, VA_METRIC_L2, VA_METRIC_COSINE };
enum { VA_INIT_KMEANSPP, VA_INIT_RANDOM, VA_INIT_FARTHEST, VA_INIT_FILE };
enum { VA_ROBUST_NONE, VA_ROBUST_TRIM, VA_ROBUST_HUBER };
enum { VA_TOL_RELATIVE, VA_TOL_ABSOLUTE };
enum { VA_SPLITVAR_RELATIVE, VA_SPLITVAR_ABSOLUTE }; /* split_var_mode */
enum { VA_IO_AUTO, VA_IO_COLLECTIVE, VA_IO_INDEPENDENT };
/* input_format: auto = by the file's extension (io/vecfile.h) */
enum { VA_INPUT_AUTO, VA_INPUT_HDF5, VA_INPUT_FVECS, VA_INPUT_BVECS, VA_INPUT_IVECS, VA_INPUT_NPY };
enum { VA_STREAM_AUTO, VA_STREAM_ON, VA_STREAM_OFF }; /* gpu_stream */
enum { VA_GPU_COLL_NCCL, VA_GPU_COLL_MPI };           /* gpu_collectives */
enum { VA_CODES_NONE, VA_CODES_PQ };                  /* codes */

#define VA_PATH_MAX 1024

typedef struct {
  /* job */
  char input[VA_PATH_MAX]; /* FILE:DATASET (HDF5) or FILE */
  int input_format;        /* VA_INPUT_* */
  char out[VA_PATH_MAX];
  char metrics[VA_PATH_MAX];
  char preset[16];
  /* The keys a config file or the command line set over the preset's value, for the job's log:
   * "max_iter = 50 (run.ini:4; preset: 1000), ..." (empty when none). Not a key. */
  char preset_overrides[1024];
  int64_t k;
  int64_t train_sample; /* rows the loop trains on (0: all) */
  uint64_t seed;
  int backend, metric;
  int precision; /* VA_PREC_* (CUDA backend) */
  int64_t device;
  double gpu_min_work;
  int gpu_stream, gpu_collectives;
  double gpu_stream_chunk_mb, gpu_mem_limit_mb;
  /* initialisation */
  char init[VA_PATH_MAX];
  int64_t kmeans_rounds;
  double kmeans_oversample;
  int64_t kmeans_sample;
  /* robust statistics */
  int robust;
  double trim_near, trim_far;
  int64_t trim_bins;
  double huber_c;
  /* update */
  double lr, T0, cooling_rate, max_step, momentum;
  /* convergence */
  int64_t max_iter;
  double tol;
  int tol_mode;
  int64_t min_changes;
  /* maintenance */
  int64_t maintenance_interval;
  double merge_factor, split_count_factor, split_var_factor;
  int split_var_mode;
  int64_t split_iters, k_min, k_max;
  /* codes (docs/codes.md) */
  int codes;                       /* VA_CODES_* */
  int64_t pq_m, pq_bits, pq_iters; /* subspaces, bits per code, iteration limit of each codebook's loop */
  int64_t pq_train_sample;         /* rows the codebooks train on (0: the anchors' training rows) */
  /* checkpoints */
  int64_t checkpoint_every;
  char checkpoint[VA_PATH_MAX];
  /* execution */
  int64_t threads, tile_rows, progress_every;
  int cpu_assign; /* VA_CPU_ASSIGN_* of kernels/assign.h */
  double read_chunk_mb;
  int io;
  int memory_check;
  /* derived from init (not keys) */
  int init_kind;
  char init_file[VA_PATH_MAX], init_dataset[256];
} va_config_t;

/* Accumulates raw key=value assignments from files and the command line; resolved in one go. */
typedef struct va_config_src va_config_src_t;
va_config_src_t *va_config_src_new(void);
void va_config_src_free(va_config_src_t *src);
/* Returns 0, or writes an error to err and returns non-zero. */
int va_config_src_add(va_config_src_t *src, const char *key, const char *value, const char *origin, char *err,
                      size_t errlen);
int va_config_src_add_kv(va_config_src_t *src, const char *kv, const char *origin, char *err, size_t errlen);
int va_config_src_load_file(va_config_src_t *src, const char *path, char *err, size_t errlen);
/* Applies defaults, preset and assignments to cfg and validates. Returns 0 or non-zero with err set. */
int va_config_resolve(const va_config_src_t *src, va_config_t *cfg, char *err, size_t errlen);

/* Iterates every key with its resolved value as text (for index attributes, info and metrics). */
typedef void (*va_config_visit_fn)(const char *key, const char *value, void *ctx);
void va_config_visit(const va_config_t *cfg, va_config_visit_fn fn, void *ctx);
/* What a key's value is: VA_CONFIG_TEXT (strings, choices), VA_CONFIG_INTEGER or VA_CONFIG_REAL (its text
 * from va_config_visit reads back exactly with strtoll / strtod); for typed output (JSON, attributes). */
enum { VA_CONFIG_TEXT, VA_CONFIG_INTEGER, VA_CONFIG_REAL };
int va_config_key_kind(const char *key);
/* Prints the configuration as an INI file, one documented line per key: keys that differ from the
 * built-in defaults and the preset are set, the others commented at that value (so the output, read
 * back as a config file, resolves to the same configuration; with no options it is
 * configs/default.ini). */
void va_config_print_ini(const va_config_t *cfg, FILE *f);
/* Prints every key: name, default, doc. */
void va_config_print_keys(FILE *f);
/* Prints docs/config.md: every key by section as a markdown table (tests/tools/config_doc). */
void va_config_print_markdown(FILE *f);
const char *va_config_enum_name(const char *key, int value);
#endif
