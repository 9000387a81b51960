/* fuzz_config_file.c: libFuzzer harness of the INI config parser (src/core/config.c).
 * The input bytes become a config file; va_config_src_load_file parses it, va_config_resolve applies
 * it over defaults and preset, and on success every resolved key is formatted again (va_config_visit,
 * va_config_print_ini) as info/metrics/--print-config do. Contract checked besides ASan/UBSan:
 * an error always comes with a message, and a resolved configuration satisfies the key ranges the
 * rest of the program relies on. */
#include "fuzz_common.h"

#include "core/config.h"

static void visit(const char *key, const char *value, void *ctx) {
  FZ_CHECK(key && *key && value, "visit got an empty key or NULL value");
  (*(size_t *)ctx) += strlen(value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fz_temp_path(".ini");
  fz_write(data, size);
  char err[4096] = "";
  va_config_src_t *src = va_config_src_new();
  FZ_CHECK(src != NULL, "va_config_src_new");
  int rc = va_config_src_load_file(src, path, err, sizeof err);
  FZ_CHECK(!rc || err[0], "load_file failed without a message");
  if (!rc) {
    va_config_t cfg;
    err[0] = 0;
    rc = va_config_resolve(src, &cfg, err, sizeof err);
    FZ_CHECK(!rc || err[0], "resolve failed without a message");
    if (!rc) {
      FZ_CHECK(cfg.k >= 1, "k %lld", (long long)cfg.k);
      FZ_CHECK(cfg.trim_near + cfg.trim_far < 0.95, "trim %g + %g", cfg.trim_near, cfg.trim_far);
      FZ_CHECK(cfg.k_max <= 0 || cfg.k_max >= cfg.k_min, "k_max %lld < k_min %lld", (long long)cfg.k_max,
               (long long)cfg.k_min);
      FZ_CHECK(cfg.init_kind != VA_INIT_FILE || (cfg.init_file[0] && cfg.init_dataset[0]), "init=file without a path");
      FZ_CHECK(memchr(cfg.input, 0, sizeof cfg.input) && memchr(cfg.init, 0, sizeof cfg.init),
               "unterminated string key");
      size_t total = 0;
      va_config_visit(&cfg, visit, &total);
      FILE *devnull = fopen("/dev/null", "w");
      if (devnull) {
        va_config_print_ini(&cfg, devnull);
        fclose(devnull);
      }
    }
  }
  va_config_src_free(src);
  return 0;
}
