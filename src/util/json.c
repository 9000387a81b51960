/* json.c: the JSON writer of json.h and the run header every metrics file starts with. */
#define _POSIX_C_SOURCE 200809L
#include "util/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "git_commit.h" /* VECANNEAL_GIT_COMMIT, generated at build time (cmake/git_commit.cmake) */
#include "util/util.h"  /* va_proc, va_format_double, VA_MPI, va_malloc, VA_FATAL */

/* The width of one rank's entry in the gathered layout: host, NUL, device, NUL. */
#define LAYOUT_ENTRY 320

static void indent(va_json_writer_t *j) {
  fputc('\n', j->f);
  for (int d = 0; d < j->depth; d++) fputs("  ", j->f);
}

static void escaped(FILE *f, const char *s) {
  fputc('"', f);
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned char c = *p;
    if (c == '"' || c == '\\') {
      fputc('\\', f);
      fputc(c, f);
      p++;
    } else if (c < 0x20) {
      switch (c) {
      case '\n': fputs("\\n", f); break;
      case '\t': fputs("\\t", f); break;
      case '\r': fputs("\\r", f); break;
      default: fprintf(f, "\\u%04x", c);
      }
      p++;
    } else if (c < 0x80) {
      fputc(c, f);
      p++;
    } else {
      /* A well-formed UTF-8 sequence (no overlong forms, no surrogates, at most U+10FFFF) passes as it is. */
      int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
      int ok = len > 0;
      for (int k = 1; ok && k < len; k++) ok = (p[k] & 0xC0) == 0x80;
      if (ok && len == 3) ok = !(c == 0xE0 && p[1] < 0xA0) && !(c == 0xED && p[1] >= 0xA0);
      if (ok && len == 4) ok = !(c == 0xF0 && p[1] < 0x90) && !(c == 0xF4 && p[1] >= 0x90);
      if (ok) {
        fwrite(p, 1, (size_t)len, f);
        p += len;
      } else {
        fputs("\\ufffd", f);
        p++;
      }
    }
  }
  fputc('"', f);
}

/* Starts a member: separator, new line, key. */
static void member(va_json_writer_t *j, const char *key) {
  if (j->depth < 1) VA_FATAL("JSON writer: a member outside the top-level object");
  if (j->members[j->depth - 1]++) fputc(',', j->f);
  indent(j);
  if (key) {
    escaped(j->f, key);
    fputs(": ", j->f);
  }
}

static void open_level(va_json_writer_t *j, char opener, char closer) {
  if (j->depth >= VA_JSON_MAX_DEPTH) VA_FATAL("JSON writer: nesting deeper than %d", VA_JSON_MAX_DEPTH);
  fputc(opener, j->f);
  j->members[j->depth] = 0;
  j->closer[j->depth] = closer;
  j->depth++;
}

void va_json_start(va_json_writer_t *j, FILE *f) {
  memset(j, 0, sizeof *j);
  j->f = f;
  open_level(j, '{', '}');
}

void va_json_object(va_json_writer_t *j, const char *key) {
  member(j, key);
  open_level(j, '{', '}');
}

void va_json_array(va_json_writer_t *j, const char *key) {
  member(j, key);
  open_level(j, '[', ']');
}

void va_json_end(va_json_writer_t *j) {
  if (j->depth < 1) VA_FATAL("JSON writer: nothing open to close");
  j->depth--;
  if (j->members[j->depth]) indent(j);
  fputc(j->closer[j->depth], j->f);
}

void va_json_finish(va_json_writer_t *j) {
  while (j->depth > 0) va_json_end(j);
  fputc('\n', j->f);
}

void va_json_string(va_json_writer_t *j, const char *key, const char *value) {
  member(j, key);
  if (value) escaped(j->f, value);
  else fputs("null", j->f);
}

void va_json_int(va_json_writer_t *j, const char *key, int64_t value) {
  member(j, key);
  fprintf(j->f, "%lld", (long long)value);
}

void va_json_number(va_json_writer_t *j, const char *key, double value) {
  member(j, key);
  if (!isfinite(value)) {
    fputs("null", j->f);
    return;
  }
  char buf[40];
  va_format_double(value, buf, sizeof buf);
  fputs(buf, j->f);
}

void va_json_bool(va_json_writer_t *j, const char *key, int value) {
  member(j, key);
  fputs(value ? "true" : "false", j->f);
}

char *va_json_gather_layout(const char *device) {
  char mine[LAYOUT_ENTRY] = {0};
  snprintf(mine, 128, "%s", va_proc.host);
  snprintf(mine + 128, LAYOUT_ENTRY - 128, "%s", device ? device : "");
  char *all = va_proc.rank == 0 ? va_malloc((size_t)va_proc.nranks * LAYOUT_ENTRY, "the ranks' layout") : NULL;
  VA_MPI(MPI_Gather(mine, LAYOUT_ENTRY, MPI_CHAR, all, LAYOUT_ENTRY, MPI_CHAR, 0, MPI_COMM_WORLD));
  return all;
}

void va_json_run_header(va_json_writer_t *j, const char *command, const char *layout) {
  va_json_string(j, "schema", "vecanneal-metrics/2");
  va_json_string(j, "command", command);
  va_json_string(j, "version", VECANNEAL_VERSION);
  va_json_string(j, "git_commit", VECANNEAL_GIT_COMMIT);
  int argc = 0;
  char *const *argv = va_proc_command_line(&argc);
  va_json_array(j, "command_line");
  for (int i = 0; i < argc; i++) va_json_string(j, NULL, argv[i]);
  va_json_end(j);
  va_json_string(j, "host", va_proc.host);
  char when[32];
  time_t t = (time_t)va_proc.start_time;
  struct tm tm;
  if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  else snprintf(when, sizeof when, "unknown");
  va_json_string(j, "start_time", when);
  va_json_int(j, "ranks", va_proc.nranks);
  va_json_array(j, "layout");
  for (int r = 0; layout && r < va_proc.nranks; r++) {
    va_json_object(j, NULL);
    va_json_int(j, "rank", r);
    va_json_string(j, "host", layout + (size_t)r * LAYOUT_ENTRY);
    va_json_string(j, "device", layout + (size_t)r * LAYOUT_ENTRY + 128);
    va_json_end(j);
  }
  va_json_end(j);
}
