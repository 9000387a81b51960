/* check.h: the failure count and the CHECK macro of the C tests. A condition that does not hold is
 * counted and reported with its file:line and message (the first 50; the count always, by the test's
 * main, which exits non-zero when failures > 0). */
#ifndef VECANNEAL_TESTS_CHECK_H
#define VECANNEAL_TESTS_CHECK_H
#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                                                                               \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      failures++;                                                                                                      \
      if (failures <= 50) {                                                                                            \
        printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                                    \
        printf(__VA_ARGS__);                                                                                           \
        printf("\n");                                                                                                  \
        fflush(stdout);                                                                                                \
      }                                                                                                                \
    }                                                                                                                  \
  } while (0)
#endif
