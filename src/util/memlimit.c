/* memlimit.c: the limits of memlimit.h, read from /proc and /sys/fs/cgroup. */
#define _GNU_SOURCE
#include "util/memlimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h> /* getrlimit */

/* A "Key:   123 kB" line of a /proc file, in bytes; -1 when absent. */
static double proc_kb(const char *file, const char *key) {
  FILE *f = fopen(file, "r");
  if (!f) return -1;
  char line[256];
  double v = -1;
  const size_t len = strlen(key);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, key, len) && line[len] == ':') {
      v = 1024.0 * strtod(line + len + 1, NULL);
      break;
    }
  fclose(f);
  return v;
}

/* The number in a cgroup file; -1 when absent or "max" (no limit). */
static double cgroup_number(const char *dir, const char *name) {
  char path[4096], text[64] = "";
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  if (!fgets(text, sizeof text, f)) text[0] = 0;
  fclose(f);
  char *end;
  double v = strtod(text, &end);
  return end == text ? -1 : v;
}

/* The tightest room (limit - usage) over the cgroup of this process and its ancestors: a limit may be
 * set on any level (Slurm sets it on the job's and the step's). v2 files first, then v1's. */
static void cgroup_room(double *room, double *limit) {
  *room = *limit = -1;
  /* Tests point these at a made-up hierarchy (tests/jobs/reliability.sh, case memory). */
  const char *self = getenv("VECANNEAL_TEST_PROC_CGROUP"), *mount = getenv("VECANNEAL_TEST_CGROUP_MOUNT");
  FILE *f = fopen(self ? self : "/proc/self/cgroup", "r");
  if (!f) return;
  char line[4096], rel[4096] = "", base[4096] = "";
  const char *max_name = NULL, *cur_name = NULL;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c1 = *c2 = 0; /* "ID:CONTROLLERS:PATH" */
    const char *controllers = c1 + 1;
    if (!strcmp(line, "0") && !controllers[0] && !max_name) { /* v2 */
      snprintf(rel, sizeof rel, "%s", c2 + 1);
      snprintf(base, sizeof base, "%s", mount ? mount : "/sys/fs/cgroup");
      max_name = "memory.max";
      cur_name = "memory.current";
    } else {
      char list[256];
      snprintf(list, sizeof list, ",%s,", controllers);
      if (strstr(list, ",memory,")) { /* v1 wins: it is the memory controller's own hierarchy */
        snprintf(rel, sizeof rel, "%s", c2 + 1);
        snprintf(base, sizeof base, "%s/memory", mount ? mount : "/sys/fs/cgroup");
        max_name = "memory.limit_in_bytes";
        cur_name = "memory.usage_in_bytes";
      }
    }
  }
  fclose(f);
  if (!max_name) return;
  /* Inside a cgroup namespace the process's own cgroup is the mount's root: walk from the deepest
   * existing level up to the root. */
  for (;;) {
    char dir[8192];
    snprintf(dir, sizeof dir, "%s%s", base, rel);
    const double lim = cgroup_number(dir, max_name), cur = cgroup_number(dir, cur_name);
    if (lim > 0 && lim < 1e18) {
      const double r = lim - (cur > 0 ? cur : 0);
      if (*room < 0 || r < *room) {
        *room = r > 0 ? r : 0;
        *limit = lim;
      }
    }
    if (!rel[0]) break;
    char *slash = strrchr(rel, '/');
    if (!slash) break;
    *slash = 0; /* "/a/b" -> "/a" -> "" (the root) */
  }
}

va_mem_room_t va_mem_room_resident(int local_ranks) {
  const double share = local_ranks > 0 ? local_ranks : 1;
  va_mem_room_t r = {-1, "physical memory", -1};
  const double avail = proc_kb("/proc/meminfo", "MemAvailable");
  if (avail >= 0) {
    r.bytes = avail / share;
    r.limit_bytes = proc_kb("/proc/meminfo", "MemTotal");
  }
  double room, limit;
  cgroup_room(&room, &limit);
  if (room >= 0 && (r.bytes < 0 || room / share < r.bytes)) {
    r.bytes = room / share;
    r.source = "the memory cgroup's limit (a Slurm job's --mem)";
    r.limit_bytes = limit;
  }
  return r;
}

va_mem_room_t va_mem_room_address(void) {
  va_mem_room_t r = {-1, "", -1};
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const double used = proc_kb("/proc/self/status", "VmSize");
    r.bytes = (double)rl.rlim_cur - (used > 0 ? used : 0);
    r.source = "the address-space limit (ulimit -v)";
    r.limit_bytes = (double)rl.rlim_cur;
  }
  if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const double used = proc_kb("/proc/self/status", "VmData");
    const double room = (double)rl.rlim_cur - (used > 0 ? used : 0);
    if (r.bytes < 0 || room < r.bytes) {
      r.bytes = room;
      r.source = "the data-segment limit (ulimit -d)";
      r.limit_bytes = (double)rl.rlim_cur;
    }
  }
  if (r.bytes < 0 && r.limit_bytes >= 0) r.bytes = 0;
  return r;
}

double va_mem_address_overhead(int threads, int blas) {
  const double t = threads > 0 ? threads : 1, mib = 1048576.0;
  return t * 8.0 * mib + 32.0 * mib + (blas ? t * 128.0 * mib : 0.0);
}
