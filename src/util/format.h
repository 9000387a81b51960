/* format.h: numbers as text for people and for files: durations ("3m07s") and doubles in their
 * shortest round-trip form. Plain C with no MPI, so that parsers fuzzed alone (core/config.c) can use it. */
#ifndef VECANNEAL_UTIL_FORMAT_H
#define VECANNEAL_UTIL_FORMAT_H
#include <stddef.h>

/* A duration for a person: "42s", "3m07s", "2h05m"; "?" when unknown (negative, NaN, absurd). */
void va_format_seconds(double seconds, char *buf, size_t len);
/* x in the shortest %g form that reads back (strtod) as the same double: 0.1, not 0.10000000000000001. */
void va_format_double(double x, char *buf, size_t len);
#endif
