/* commands.h: the subcommands behind the vecanneal CLI. Each returns the process exit code. */
#ifndef VECANNEAL_COMMANDS_H
#define VECANNEAL_COMMANDS_H
int va_cmd_gen(int argc, char **argv);
int va_cmd_compress(int argc, char **argv);
int va_cmd_info(int argc, char **argv);
int va_cmd_embed(int argc, char **argv);
int va_cmd_assign(int argc, char **argv);
int va_cmd_add(int argc, char **argv);
int va_cmd_search(int argc, char **argv);
#endif
