/* replay_main.c: a main() for the fuzz harnesses without libFuzzer, so that the committed corpus and
 * regression inputs run with any C compiler, in the plain build and in the sanitizer build
 * (tests/fuzz.cmake, test fuzz_replay). Runs every FILE, and every file of every DIR (sorted), once,
 * in the order given; each input is copied into a buffer of exactly its size (ASan sees overreads).
 * usage: replay_TARGET FILE|DIR...
 * Exit 0 when every input ran to completion (a finding aborts the process, as under libFuzzer). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static long ran;

static void run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(2);
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "out of memory reading %s\n", path);
    exit(2);
  }
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) {
    fprintf(stderr, "out of memory reading %s\n", path);
    exit(2);
  }
  memcpy(exact, buf, n);
  free(buf);
  fprintf(stderr, "Running: %s\n", path);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  ran++;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static void run_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "note: %s absent, skipped\n", path);
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    run_file(path);
    return;
  }
  struct dirent **names;
  int k = scandir(path, &names, NULL, by_name);
  if (k < 0) {
    perror(path);
    exit(2);
  }
  for (int i = 0; i < k; i++) {
    if (names[i]->d_name[0] != '.' && !strstr(names[i]->d_name, ".md")) {
      char sub[4096];
      snprintf(sub, sizeof sub, "%s/%s", path, names[i]->d_name);
      run_path(sub);
    }
    free(names[i]);
  }
  free(names);
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  for (int i = 1; i < argc; i++) run_path(argv[i]);
  printf("%s: %ld inputs ran clean\n", argv[0], ran);
  return 0;
}
