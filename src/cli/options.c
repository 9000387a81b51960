/* options.c: the option matcher every command's parser uses (see options.h). */
#include "cli/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *option_without_value;

const char *va_opt(int argc, char **argv, int *i, const char *name) {
  size_t len = strlen(name);
  if (strncmp(argv[*i], name, len)) return NULL;
  if (argv[*i][len] == '=') return argv[*i] + len + 1;
  if (argv[*i][len] != 0) return NULL;
  /* The last word, or another option, is no value. */
  if (*i + 1 >= argc || !strncmp(argv[*i + 1], "--", 2)) {
    option_without_value = name;
    return NULL;
  }
  return argv[++*i];
}

void va_opt_unknown(const char *cmd, const char *arg, char *err, size_t len) {
  if (option_without_value && !strcmp(arg, option_without_value))
    snprintf(err, len, "%s: option %s needs a value (see vecanneal %s --help)", cmd, arg, cmd);
  else snprintf(err, len, "%s: unknown argument '%.200s' (see vecanneal %s --help)", cmd, arg, cmd);
}

int va_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  const long long v = strtoll(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) return 1;
  *out = v;
  return 0;
}

int va_opt_i64(const char *name, const char *v, int64_t lo, int64_t hi, int64_t *out, char *err, size_t len) {
  if (!va_parse_i64(v, lo, hi, out)) return 0;
  if (hi == INT64_MAX) snprintf(err, len, "%s: expected an integer >= %lld, got '%s'", name, (long long)lo, v);
  else snprintf(err, len, "%s: expected an integer in [%lld, %lld], got '%s'", name, (long long)lo, (long long)hi, v);
  return 1;
}
