/* index_args.h: the command line of the commands that use an index (assign, add): --index, --input,
 * --input-format, --out, --metrics and --set for the execution keys, resolved into a configuration. */
#ifndef VECANNEAL_CLI_INDEX_ARGS_H
#define VECANNEAL_CLI_INDEX_ARGS_H
#include "core/config.h" /* va_config_t */

typedef struct {
  va_config_t cfg; /* input, input_format, metrics and whatever --set gave; the rest defaults */
  const char *index, *out;
  int help;
} va_index_args_t;

/* Local: 0, or 1 with err set (a usage error: unknown option, bad key, --index, --input or --out
 * missing). cmd names the command in messages. */
int va_index_args_parse(const char *cmd, int argc, char **argv, va_index_args_t *a, char *err, size_t errlen);
#endif
