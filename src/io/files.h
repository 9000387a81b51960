/* files.h: what a job reads and writes, checked before any compute.
 * - Outputs never touch inputs: every output (and its temporary name) is compared with every input and
 *   with every other output by file identity: device and inode where the file exists, else the resolved
 *   path (the directory's real path plus the name), so "./in.h5", a symbolic or a hard link name the
 *   same file as "in.h5". A clash is VA_EXIT_USAGE naming both files and their roles.
 * - Each output's directory exists and is writable, and the output is not a directory.
 * - One job per output: rank 0 creates OUT's temporary file (va_temp_name(OUT, ".partial")) with
 *   O_EXCL and writes its holder's line into it (host, pid, Slurm job and restart count, start time).
 *   A second job finds it and stops at once naming the first. A claim whose holder is gone (same host
 *   and its pid no longer runs, or the same Slurm job restarted) is taken over. The claim becomes the
 *   output's temporary file: the writer truncates and fills it, and renames it to OUT when complete;
 *   any other exit removes it.
 * - Temporary names never push a legal name over the directory's NAME_MAX: a name that would is
 *   replaced by a hidden one derived from a hash of the output's name. */
#ifndef VECANNEAL_FILES_H
#define VECANNEAL_FILES_H
#include <stddef.h>
#include <stdio.h>

typedef struct {
  const char *role; /* "input", "config file", "index", ... */
  const char *path;
  int claim; /* outputs: claim it for this job (O_EXCL temporary file) */
} va_file_use_t;

/* The temporary name of path with suffix (".partial", ".ckpt.h5"): path + suffix when that name fits
 * the directory's NAME_MAX, else DIR/.vecanneal-HASH + suffix. */
void va_temp_name(const char *path, const char *suffix, char *out, size_t len);

/* Collective. Checks inputs against outputs and outputs against each other, then the outputs'
 * directories, then claims the outputs marked claim (rank 0). Returns 0, or an agreed exit code
 * (VA_EXIT_USAGE: a clash; VA_EXIT_OUTPUT: not writable, or claimed by another job) after rank 0
 * printed one message. Claimed temporary files are pending (removed by any exit that does not
 * complete them). */
int va_files_prepare(const va_file_use_t *inputs, int ninputs, const va_file_use_t *outputs, int noutputs);

/* A text file written by rank 0 (the metrics' JSON): va_text_open creates path's temporary file (NULL
 * when it cannot, the reason kept for the commit); va_text_commit, collective (other ranks pass NULL),
 * flushes it to disk, closes it and renames it to path. Returns 0, or VA_EXIT_OUTPUT agreed on every
 * rank with the system's reason printed once. role names the file in messages. */
FILE *va_text_open(const char *path);
int va_text_commit(FILE *f, const char *role, const char *path);

/* Local: whether a and b are the same file (identity as above). */
int va_same_file(const char *a, const char *b);
#endif
