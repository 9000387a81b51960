/* format.c: the text forms of format.h. */
#include "util/format.h"

#include <stdio.h>
#include <stdlib.h>

void va_format_seconds(double s, char *buf, size_t len) {
  if (!(s >= 0) || s > 1e8) snprintf(buf, len, "?");
  else if (s < 60) snprintf(buf, len, "%.0fs", s);
  else if (s < 3600) snprintf(buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
  else snprintf(buf, len, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
}

void va_format_double(double x, char *buf, size_t len) {
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(buf, len, "%.*g", digits, x);
    if (strtod(buf, NULL) == x) return;
  }
}
