/* options.h: matching "--name value" / "--name=value" in a command's argv, and the message for an
 * argument no option matched. */
#ifndef VECANNEAL_OPTIONS_H
#define VECANNEAL_OPTIONS_H
#include <stddef.h>

/* "--name value" or "--name=value"; advances *i past the value. NULL when argv[*i] is another option,
 * or is this one without a value (the next word missing or an option). */
const char *va_opt(int argc, char **argv, int *i, const char *name);
/* The message for an argument no option matched: "option --anchors needs a value" when it was one
 * without its value, else "unknown argument". */
void va_opt_unknown(const char *cmd, const char *arg, char *err, size_t len);
#endif
