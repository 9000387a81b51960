/* options.h: matching "--name value" / "--name=value" in a command's argv, reading integer values, and
 * the message for an argument no option matched. */
#ifndef VECANNEAL_OPTIONS_H
#define VECANNEAL_OPTIONS_H
#include <stddef.h>
#include <stdint.h>

/* "--name value" or "--name=value"; advances *i past the value. NULL when argv[*i] is another option,
 * or is this one without a value (the next word missing or an option). */
const char *va_opt(int argc, char **argv, int *i, const char *name);
/* The message for an argument no option matched: "option --anchors needs a value" when it was one
 * without its value, else "unknown argument". */
void va_opt_unknown(const char *cmd, const char *arg, char *err, size_t len);
/* A whole decimal integer in [lo, hi]: 0 and *out set, else 1 (*out unchanged). */
int va_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* The value v of option `name` as va_parse_i64 reads it: 0, or 1 with the message in err ("--k: expected
 * an integer >= 1, got 'x'"; hi = INT64_MAX means no upper bound). */
int va_opt_i64(const char *name, const char *v, int64_t lo, int64_t hi, int64_t *out, char *err, size_t len);
#endif
