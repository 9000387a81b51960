/* index_args.c: the shared command line of assign and add (cli/index_args.h). */
#include "cli/index_args.h"

#include <stdio.h>
#include <string.h>

#include "cli/options.h" /* va_opt, va_opt_unknown */

int va_index_args_parse(const char *cmd, int argc, char **argv, va_index_args_t *a, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
  va_config_src_t *src = va_config_src_new();
  static const char *const shorthand[][2] = {
      {"--input", "input"}, {"--input-format", "input_format"}, {"--metrics", "metrics"}, {"--backend", "backend"}};
  const char *v;
  int rc = 0;
  for (int i = 0; i < argc && !rc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      a->help = 1;
      break;
    }
    if ((v = va_opt(argc, argv, &i, "--index"))) {
      a->index = v;
      continue;
    }
    if ((v = va_opt(argc, argv, &i, "--out"))) {
      a->out = v;
      continue;
    }
    if ((v = va_opt(argc, argv, &i, "--set"))) {
      rc = va_config_src_add_kv(src, v, "--set", err, errlen);
      continue;
    }
    int matched = 0;
    for (size_t s = 0; s < sizeof shorthand / sizeof shorthand[0] && !matched; s++)
      if ((v = va_opt(argc, argv, &i, shorthand[s][0]))) {
        rc = va_config_src_add(src, shorthand[s][1], v, shorthand[s][0], err, errlen);
        matched = 1;
      }
    if (!matched) {
      va_opt_unknown(cmd, argv[i], err, errlen);
      rc = 1;
    }
  }
  if (!rc && !a->help) rc = va_config_resolve(src, &a->cfg, err, errlen);
  va_config_src_free(src);
  if (rc || a->help) return rc;
  if (!a->index || !a->cfg.input[0] || !a->out || !a->out[0]) {
    snprintf(err, errlen, "%s: --index, --input and --out are required (see vecanneal %s --help)", cmd, cmd);
    return 1;
  }
  return 0;
}
