/* backend_visible.c: narrowing CUDA_VISIBLE_DEVICES to the rank's GPU before the CUDA driver starts
 * (backend/visible.h). Plain C, no CUDA call: it runs before the driver does. */
#define _POSIX_C_SOURCE 200112L /* setenv */
#include "backend/visible.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h" /* va_proc (the node-local rank) */

enum { MAX_ENTRIES = 1024 };

/* The entries of a CUDA_VISIBLE_DEVICES list, spaces trimmed: their starts and lengths; -1 when one is
 * empty (CUDA ends the list there) or there are more than MAX_ENTRIES. */
static int split_list(const char *list, const char **at, size_t *len) {
  int n = 0;
  for (const char *p = list;; p++) {
    while (isspace((unsigned char)*p)) p++;
    const char *end = strchr(p, ',');
    size_t l = end ? (size_t)(end - p) : strlen(p);
    while (l > 0 && isspace((unsigned char)p[l - 1])) l--;
    if (l == 0 || n == MAX_ENTRIES) return -1;
    at[n] = p;
    len[n++] = l;
    if (!end) return n;
    p = end;
  }
}

va_visible_t va_visible_choose(const char *cvd, int nodes, int listed, int requested, int local_rank, char *out,
                               size_t len) {
  if (len > 0) out[0] = '\0';
  const char *at[MAX_ENTRIES];
  size_t at_len[MAX_ENTRIES];
  const int n = cvd ? split_list(cvd, at, at_len) : nodes == listed ? nodes : -1;
  if (n < 2) return VA_VISIBLE_LEFT;
  const int device = requested >= 0 ? requested : (local_rank > 0 ? local_rank : 0) % n;
  if (device >= n) return VA_VISIBLE_NONE;
  const int wrote =
      cvd ? snprintf(out, len, "%.*s", (int)at_len[device], at[device]) : snprintf(out, len, "%d", device);
  return wrote >= 0 && (size_t)wrote < len ? VA_VISIBLE_NARROWED : VA_VISIBLE_LEFT;
}

/* Entries of dir whose names start with prefix, followed by digits alone when digits is set; -1 when dir
 * cannot be read. */
static int count_entries(const char *dir, const char *prefix, int digits) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  const size_t pl = strlen(prefix);
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, pl)) continue;
    const char *rest = e->d_name + pl;
    int ok = !digits || *rest;
    for (const char *c = rest; digits && *c; c++) ok &= isdigit((unsigned char)*c) != 0;
    n += ok;
  }
  closedir(d);
  return n;
}

va_visible_t va_visible_narrow(int requested) {
  static int decided = 0;
  static va_visible_t result = VA_VISIBLE_LEFT;
  if (decided) return result;
  decided = 1;
  const char *all = getenv("VECANNEAL_ALL_GPUS");
  if (all && *all && strcmp(all, "0")) return result;
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  const int nodes = cvd ? 0 : count_entries("/dev", "nvidia", 1);
  const int listed = cvd ? 0 : count_entries("/proc/driver/nvidia/gpus", "", 0);
  char entry[256];
  result = va_visible_choose(cvd, nodes, listed, requested, va_proc.local_rank, entry, sizeof entry);
  if (result == VA_VISIBLE_NARROWED && setenv("CUDA_VISIBLE_DEVICES", entry, 1)) result = VA_VISIBLE_LEFT;
  return result;
}
