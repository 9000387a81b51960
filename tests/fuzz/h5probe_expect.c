/* h5probe_expect.c: the verdict va_input_probe must give on each committed HDF5 file (seed corpus
 * and regressions), from tests/fuzz/h5probe.expect. A line is
 *   PATH 0 NxD DTYPE HINT      accepted: shape, element type, metric hint (auto | cosine)
 *   PATH RC WORDS              rejected with exit code RC and WORDS ('_' for a space) in the message
 * with PATH relative to tests/fuzz; '#' starts a comment. Files not listed are not checked.
 * usage: h5probe_expect TESTS_FUZZ_DIR */
#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#include "io/h5io.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: h5probe_expect TESTS_FUZZ_DIR\n");
    return 2;
  }
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  char path[4096], line[4096];
  snprintf(path, sizeof path, "%s/h5probe.expect", argv[1]);
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    return 2;
  }
  int checked = 0, failed = 0;
  while (fgets(line, sizeof line, f)) {
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char file[1024], a[256] = "", b[64] = "", c[64] = "";
    int rc_want;
    if (sscanf(line, "%1023s %d %255s %63s %63s", file, &rc_want, a, b, c) < 3) continue;
    char spec[6000], err[1024] = "";
    snprintf(spec, sizeof spec, "%s/%s:/train", argv[1], file);
    va_input_t in;
    int rc = va_input_probe(spec, &in, err, sizeof err);
    char got[1400];
    if (rc) snprintf(got, sizeof got, "rc %d: %s", rc, err);
    else
      snprintf(got, sizeof got, "0 %lldx%lld %s %s", (long long)in.n, (long long)in.d, va_dtype_name(in.dtype),
               in.metric_hint == VA_METRIC_COSINE ? "cosine" : "auto");
    for (char *u = a; *u; u++)
      if (*u == '_') *u = ' ';
    int ok;
    if (rc_want == 0) {
      char want[512];
      snprintf(want, sizeof want, "0 %s %s %s", a, b, c);
      ok = !strcmp(want, got);
    } else {
      ok = rc == rc_want && strstr(err, a) != NULL;
    }
    checked++;
    if (!ok) {
      failed++;
      printf("FAIL: %s: expected '%d %s %s %s', got '%s'\n", file, rc_want, a, b, c, got);
    }
  }
  fclose(f);
  printf("h5probe_expect: %d files checked, %d differ\n", checked, failed);
  return failed ? 1 : checked ? 0 : 2;
}
