/* json.h: the one JSON writer of the program (metrics files of every command). A streaming writer
 * over a FILE: objects and arrays opened and closed in order, members written with their key (NULL
 * inside arrays). Strings are escaped as RFC 8259 requires (quote, backslash, control characters) and
 * kept valid UTF-8 (a byte that is not part of a well-formed UTF-8 sequence becomes U+FFFD), so any
 * path or command line gives a file every JSON parser reads. Numbers are written in their shortest
 * form that reads back as the same double; a non-finite number is written as null. Our own rather than
 * a library's: about a hundred lines, and the GPU machines the project runs on have no package
 * registry to bring one. */
#ifndef VECANNEAL_UTIL_JSON_H
#define VECANNEAL_UTIL_JSON_H
#include <stdint.h>
#include <stdio.h>

#define VA_JSON_MAX_DEPTH 16

typedef struct {
  FILE *f;
  int depth;                      /* open objects and arrays; 0 before start and after finish */
  int members[VA_JSON_MAX_DEPTH]; /* members written so far at each depth */
  char closer[VA_JSON_MAX_DEPTH]; /* '}' or ']' */
} va_json_writer_t;

/* Opens the top-level object on f. */
void va_json_start(va_json_writer_t *j, FILE *f);
/* Closes every open object and array and ends the line. */
void va_json_finish(va_json_writer_t *j);

/* Opens a member object or array (key NULL inside an array); va_json_end closes the innermost. */
void va_json_object(va_json_writer_t *j, const char *key);
void va_json_array(va_json_writer_t *j, const char *key);
void va_json_end(va_json_writer_t *j);

void va_json_string(va_json_writer_t *j, const char *key, const char *value); /* NULL value: null */
void va_json_int(va_json_writer_t *j, const char *key, int64_t value);
void va_json_number(va_json_writer_t *j, const char *key, double value);
void va_json_bool(va_json_writer_t *j, const char *key, int value);

/* Collective: every rank's host and device (`device`: this rank's, "cpu" or a GPU's name and bus id),
 * gathered to rank 0 for va_json_run_header; NULL on the other ranks. Free with free(). */
char *va_json_gather_layout(const char *device);
/* Rank 0: the members every metrics file starts with, identifying the run: the format's schema name,
 * the program's version and git commit, the command and its command line, the host and start time
 * (UTC, ISO 8601), the ranks and, per rank, its host and device (layout: va_json_gather_layout's). */
void va_json_run_header(va_json_writer_t *j, const char *command, const char *layout);
#endif
