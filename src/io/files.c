/* files.c: file identity, output directory checks, output claims and temporary names (see files.h). */
#define _GNU_SOURCE
#include "io/files.h"

#include <errno.h>  /* errno, EEXIST, ESRCH */
#include <fcntl.h>  /* open, O_EXCL */
#include <libgen.h> /* dirname, basename */
#include <limits.h> /* PATH_MAX */
#include <signal.h> /* kill */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h> /* stat, S_ISDIR */
#include <time.h>
#include <unistd.h> /* access, pathconf, write */

#include "util/util.h" /* va_proc, va_agree, va_pending_add, exit codes */

typedef struct {
  int exists;
  dev_t dev;
  ino_t ino;
  char resolved[PATH_MAX + 256];
} identity_t;

static void split_path(const char *path, char *dir, char *base, size_t len) {
  char a[PATH_MAX], b[PATH_MAX];
  snprintf(a, sizeof a, "%s", path);
  snprintf(b, sizeof b, "%s", path);
  snprintf(dir, len, "%s", dirname(a));
  snprintf(base, len, "%s", basename(b));
}

static void identify(const char *path, identity_t *id) {
  struct stat st;
  memset(id, 0, sizeof *id);
  char dir[PATH_MAX], base[PATH_MAX], real[PATH_MAX];
  if (stat(path, &st) == 0) {
    id->exists = 1;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
  }
  if (realpath(path, real)) {
    snprintf(id->resolved, sizeof id->resolved, "%s", real);
    return;
  }
  split_path(path, dir, base, sizeof dir);
  if (realpath(dir, real)) snprintf(id->resolved, sizeof id->resolved, "%s/%s", real, base);
  else snprintf(id->resolved, sizeof id->resolved, "%s", path);
}

static int same_identity(const identity_t *a, const identity_t *b) {
  if (a->exists && b->exists) return a->dev == b->dev && a->ino == b->ino;
  return !strcmp(a->resolved, b->resolved);
}

int va_same_file(const char *a, const char *b) {
  identity_t ia, ib;
  identify(a, &ia);
  identify(b, &ib);
  return same_identity(&ia, &ib);
}

void va_temp_name(const char *path, const char *suffix, char *out, size_t len) {
  char dir[PATH_MAX], base[PATH_MAX];
  split_path(path, dir, base, sizeof dir);
  long name_max = pathconf(dir, _PC_NAME_MAX);
  if (name_max <= 0) name_max = 255;
  if ((long)(strlen(base) + strlen(suffix)) <= name_max) {
    snprintf(out, len, "%s%s", path, suffix);
    return;
  }
  uint64_t h = 1469598103934665603ull; /* FNV-1a of the name */
  for (const char *p = base; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  snprintf(out, len, "%s/.vecanneal-%016llx%s", dir, (unsigned long long)h, suffix);
}

/* --- claims ----------------------------------------------------------------------------------------- */
#define CLAIM_TAG "vecanneal-claim"

static const char *env_or(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v && v[0] ? v : dflt;
}

/* Whether the holder recorded in line is certainly gone. */
static int claim_is_stale(const char *line) {
  char host[256] = "", job[64] = "", restart[32] = "";
  long pid = 0;
  if (strncmp(line, CLAIM_TAG, strlen(CLAIM_TAG))) return 0;
  const char *p;
  if ((p = strstr(line, " host="))) sscanf(p + 6, "%255s", host);
  if ((p = strstr(line, " pid="))) pid = strtol(p + 5, NULL, 10);
  if ((p = strstr(line, " slurm_job="))) sscanf(p + 11, "%63s", job);
  if ((p = strstr(line, " slurm_restart="))) sscanf(p + 15, "%31s", restart);
  if (!strcmp(host, va_proc.host) && pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 1;
  const char *my_job = env_or("SLURM_JOB_ID", "-");
  if (strcmp(job, "-") && !strcmp(job, my_job) && atol(restart) < atol(env_or("SLURM_RESTART_COUNT", "0"))) return 1;
  return 0;
}

/* Creates tmp exclusively with this job's holder line. 0, or VA_EXIT_OUTPUT with err set. */
static int claim(const char *role, const char *path, const char *tmp, char *err, size_t errlen) {
  for (int attempt = 0; attempt < 2; attempt++) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
      char line[768], when[32];
      const time_t t = time(NULL);
      struct tm utc;
      strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &utc));
      int len =
          snprintf(line, sizeof line, CLAIM_TAG " host=%s pid=%ld slurm_job=%s slurm_restart=%s started=%s\n",
                   va_proc.host, (long)getpid(), env_or("SLURM_JOB_ID", "-"), env_or("SLURM_RESTART_COUNT", "0"), when);
      const int wrote = (int)write(fd, line, (size_t)len) == len, saved = errno;
      const int closed = close(fd) == 0;
      if (wrote && closed) return 0;
      unlink(tmp);
      snprintf(err, errlen, "cannot write the %s '%s': creating '%s' failed: %s", role, path, tmp,
               strerror(wrote ? errno : saved));
      return VA_EXIT_OUTPUT;
    }
    if (errno != EEXIST) {
      snprintf(err, errlen, "cannot write the %s '%s': creating '%s' failed: %s", role, path, tmp, strerror(errno));
      return VA_EXIT_OUTPUT;
    }
    char line[768] = "";
    FILE *f = fopen(tmp, "r");
    if (f) {
      if (!fgets(line, sizeof line, f)) line[0] = 0;
      fclose(f);
    }
    line[strcspn(line, "\n")] = 0;
    if (attempt == 0 && claim_is_stale(line)) {
      va_log0("note: '%s' was left by a job that no longer runs (%s): taken over\n", tmp, line + strlen(CLAIM_TAG) + 1);
      unlink(tmp);
      continue;
    }
    if (!strncmp(line, CLAIM_TAG, strlen(CLAIM_TAG)))
      snprintf(err, errlen,
               "the %s '%s' is being written by another job (%s): two jobs must not share an output; if that job "
               "no longer runs, remove '%s'",
               role, path, line + strlen(CLAIM_TAG) + 1, tmp);
    else
      snprintf(err, errlen,
               "the %s '%s' is being written by another job, or one died while writing it: '%s' exists; if no "
               "job writes it, remove '%s'",
               role, path, tmp, tmp);
    return VA_EXIT_OUTPUT;
  }
  snprintf(err, errlen, "cannot claim the %s '%s'", role, path);
  return VA_EXIT_OUTPUT;
}

/* --- checks ----------------------------------------------------------------------------------------- */
static int check_directory(const va_file_use_t *o, char *err, size_t errlen) {
  char dir[PATH_MAX], base[PATH_MAX];
  struct stat st;
  split_path(o->path, dir, base, sizeof dir);
  if (stat(dir, &st) != 0) {
    snprintf(err, errlen, "cannot write the %s '%s': its directory '%s': %s", o->role, o->path, dir, strerror(errno));
    return VA_EXIT_OUTPUT;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "cannot write the %s '%s': '%s' is not a directory", o->role, o->path, dir);
    return VA_EXIT_OUTPUT;
  }
  if (access(dir, W_OK | X_OK) != 0) {
    snprintf(err, errlen, "cannot write the %s '%s': directory '%s': %s", o->role, o->path, dir, strerror(errno));
    return VA_EXIT_OUTPUT;
  }
  if (stat(o->path, &st) == 0 && !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "the %s '%s' exists and is %s; name a file to be written", o->role, o->path,
             S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    return VA_EXIT_USAGE;
  }
  return 0;
}

/* The files an output writes: its own name and its temporary name. */
static void output_names(const va_file_use_t *o, char names[2][PATH_MAX + 64]) {
  snprintf(names[0], sizeof names[0], "%s", o->path);
  va_temp_name(o->path, ".partial", names[1], sizeof names[1]);
}

static int check_clashes(const va_file_use_t *in, int nin, const va_file_use_t *out, int nout, char *err,
                         size_t errlen) {
  for (int a = 0; a < nout; a++) {
    if (!out[a].path || !out[a].path[0]) continue;
    char names[2][PATH_MAX + 64];
    output_names(&out[a], names);
    for (int w = 0; w < 2; w++) {
      identity_t ia;
      identify(names[w], &ia);
      const char *what = w ? "the temporary file of the " : "the ";
      for (int b = 0; b < nin; b++) {
        if (!in[b].path || !in[b].path[0]) continue;
        identity_t ib;
        identify(in[b].path, &ib);
        if (same_identity(&ia, &ib)) {
          snprintf(err, errlen, "%s%s '%s' is the %s '%s': an output never replaces an input; choose another name",
                   what, out[a].role, names[w], in[b].role, in[b].path);
          return VA_EXIT_USAGE;
        }
      }
      for (int b = a + 1; b < nout; b++) {
        if (!out[b].path || !out[b].path[0]) continue;
        char other[2][PATH_MAX + 64];
        output_names(&out[b], other);
        for (int v = 0; v < 2; v++) {
          identity_t ib;
          identify(other[v], &ib);
          if (same_identity(&ia, &ib)) {
            snprintf(err, errlen, "%s%s '%s' is also %s%s '%s': every output needs its own file", what, out[a].role,
                     names[w], v ? "the temporary file of the " : "the ", out[b].role, other[v]);
            return VA_EXIT_USAGE;
          }
        }
      }
    }
  }
  return 0;
}

int va_files_prepare(const va_file_use_t *inputs, int ninputs, const va_file_use_t *outputs, int noutputs) {
  char err[3 * PATH_MAX] = "";
  int rc = 0;
  if (va_proc.rank == 0) {
    rc = check_clashes(inputs, ninputs, outputs, noutputs, err, sizeof err);
    for (int o = 0; o < noutputs && !rc; o++)
      if (outputs[o].path && outputs[o].path[0]) rc = check_directory(&outputs[o], err, sizeof err);
    for (int o = 0; o < noutputs && !rc; o++) {
      if (!outputs[o].claim || !outputs[o].path || !outputs[o].path[0]) continue;
      char tmp[PATH_MAX + 64];
      va_temp_name(outputs[o].path, ".partial", tmp, sizeof tmp);
      rc = claim(outputs[o].role, outputs[o].path, tmp, err, sizeof err);
      if (!rc) va_pending_add(tmp, 1);
    }
  }
  rc = va_agree(rc, err);
  if (rc) {
    va_pending_remove_all(); /* rank 0's claims of this job, if any */
    return rc;
  }
  for (int o = 0; o < noutputs; o++)
    if (outputs[o].claim && outputs[o].path && outputs[o].path[0]) {
      char tmp[PATH_MAX + 64];
      va_temp_name(outputs[o].path, ".partial", tmp, sizeof tmp);
      va_pending_add(tmp, 1);
    }
  return 0;
}

/* --- text outputs ------------------------------------------------------------------------------------ */
static int text_open_errno;

FILE *va_text_open(const char *path) {
  char tmp[PATH_MAX + 64];
  va_temp_name(path, ".partial", tmp, sizeof tmp);
  FILE *f = fopen(tmp, "w");
  text_open_errno = f ? 0 : errno;
  if (f) va_pending_add(tmp, 0);
  return f;
}

int va_text_commit(FILE *f, const char *role, const char *path) {
  char tmp[PATH_MAX + 64], err[2 * PATH_MAX + 256] = "";
  int rc = 0;
  va_temp_name(path, ".partial", tmp, sizeof tmp);
  if (va_proc.rank == 0) {
    if (!f) {
      snprintf(err, sizeof err, "cannot write the %s '%s': creating '%s' failed: %s", role, path, tmp,
               strerror(text_open_errno));
      rc = VA_EXIT_OUTPUT;
    } else {
      errno = 0;
      const int bad = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0;
      const int saved = errno;
      if (fclose(f) != 0 || bad) {
        snprintf(err, sizeof err, "cannot write the %s '%s': writing '%s' failed: %s", role, path, tmp,
                 strerror(saved   ? saved
                          : errno ? errno
                                  : EIO));
        rc = VA_EXIT_OUTPUT;
      } else if (rename(tmp, path) != 0) {
        snprintf(err, sizeof err, "cannot write the %s '%s': renaming '%s' to it failed: %s", role, path, tmp,
                 strerror(errno));
        rc = VA_EXIT_OUTPUT;
      } else {
        va_pending_drop(tmp);
      }
    }
  }
  return va_agree(rc, err);
}
