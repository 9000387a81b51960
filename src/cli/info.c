/* info.c (cli): `vecanneal info INDEX.h5`: one argument, then the job (job/info.h). */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h" /* va_cmd_info */
#include "job/info.h"     /* va_info_job */
#include "util/util.h"    /* va_log0, va_agree */

int va_cmd_info(int argc, char **argv) {
  if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
    va_log0("usage: vecanneal info INDEX.h5\n");
    return 0;
  }
  if (argc != 1 || argv[0][0] == '-') return va_agree(VA_EXIT_USAGE, "usage: vecanneal info INDEX.h5");
  return va_info_job(argv[0]);
}
