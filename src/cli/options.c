/* options.c: the option matcher every command's parser uses (see options.h). */
#include "cli/options.h"

#include <stdio.h>
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
