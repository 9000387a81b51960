/* fuzz_config_kv.c: libFuzzer harness of the command-line assignments (--set key=value) of
 * src/core/config.c. Each input line is one va_config_src_add_kv call (as main's --set / --config loop
 * makes them), then va_config_resolve. Same contract checks as fuzz_config_file.c. */
#include "fuzz_common.h"

#include "core/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[4096] = "";
  va_config_src_t *src = va_config_src_new();
  FZ_CHECK(src != NULL, "va_config_src_new");
  /* Lines as NUL-terminated strings (an embedded NUL ends that argument, as it would in argv). */
  char *buf = malloc(size + 1);
  memcpy(buf, data, size);
  buf[size] = 0;
  int rc = 0;
  for (char *line = buf; line && !rc;) {
    char *nl = memchr(line, '\n', (size_t)(buf + size - line));
    if (nl) *nl = 0;
    err[0] = 0;
    rc = va_config_src_add_kv(src, line, "--set", err, sizeof err);
    FZ_CHECK(!rc || err[0], "add_kv failed without a message");
    line = nl ? nl + 1 : NULL;
  }
  if (!rc) {
    va_config_t cfg;
    err[0] = 0;
    rc = va_config_resolve(src, &cfg, err, sizeof err);
    FZ_CHECK(!rc || err[0], "resolve failed without a message");
    if (!rc) {
      FZ_CHECK(cfg.k >= 1, "k %lld", (long long)cfg.k);
      FZ_CHECK(cfg.trim_near + cfg.trim_far < 0.95, "trim %g + %g", cfg.trim_near, cfg.trim_far);
      FILE *devnull = fopen("/dev/null", "w");
      if (devnull) {
        va_config_print_ini(&cfg, devnull);
        fclose(devnull);
      }
    }
  }
  free(buf);
  va_config_src_free(src);
  return 0;
}
