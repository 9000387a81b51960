/* commands.h: the subcommands behind the vecanneal CLI. Each returns the process exit code. */
#ifndef VECANNEAL_COMMANDS_H
#define VECANNEAL_COMMANDS_H
#include <stddef.h>
int va_cmd_gen(int argc, char **argv);
int va_cmd_compress(int argc, char **argv);
int va_cmd_info(int argc, char **argv);
int va_cmd_embed(int argc, char **argv);
/* Shared option matcher: "--name value" or "--name=value"; advances *i past the value. NULL when argv[*i]
 * is another option, or is this one without a value (the next word missing or an option). */
const char *va_opt(int argc, char **argv, int *i, const char *name);
/* The message for an argument no option matched: "option --anchors needs a value" when it was one
 * without its value, else "unknown argument". */
void va_opt_unknown(const char *cmd, const char *arg, char *err, size_t len);
#endif
