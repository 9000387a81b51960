/* test_visible.c: the choice of a rank's GPU before the CUDA driver starts (backend/visible.h), without a
 * GPU: va_visible_choose on device-file counts and CUDA_VISIBLE_DEVICES lists (indices, UUIDs, spaces, empty
 * entries, a requested device past the list, a buffer too short), then va_visible_narrow on a list set in
 * this process's environment: narrowed to the node-local rank's entry, and decided once. Exits non-zero on
 * any failure. */
#define _POSIX_C_SOURCE 200112L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/visible.h"

#include "../check.h" /* failures, CHECK */

static void expect(const char *cvd, int nodes, int listed, int requested, int local_rank, va_visible_t want,
                   const char *want_entry) {
  char out[64];
  const va_visible_t got = va_visible_choose(cvd, nodes, listed, requested, local_rank, out, sizeof out);
  CHECK(got == want, "cvd '%s' nodes %d listed %d requested %d local rank %d: %d, not %d", cvd ? cvd : "(unset)", nodes,
        listed, requested, local_rank, (int)got, (int)want);
  if (got == VA_VISIBLE_NARROWED && want == VA_VISIBLE_NARROWED)
    CHECK(!strcmp(out, want_entry), "cvd '%s' nodes %d requested %d local rank %d: entry '%s', not '%s'",
          cvd ? cvd : "(unset)", nodes, requested, local_rank, out, want_entry);
}

int main(void) {
  /* unset: the device files, when /proc lists as many GPUs */
  expect(NULL, 2, 2, -1, 0, VA_VISIBLE_NARROWED, "0");
  expect(NULL, 2, 2, -1, 1, VA_VISIBLE_NARROWED, "1");
  expect(NULL, 2, 2, -1, 3, VA_VISIBLE_NARROWED, "1");
  expect(NULL, 8, 8, -1, 13, VA_VISIBLE_NARROWED, "5");
  expect(NULL, 2, 2, 1, 0, VA_VISIBLE_NARROWED, "1");
  expect(NULL, 2, 2, 2, 0, VA_VISIBLE_NONE, "");
  expect(NULL, 2, 3, -1, 0, VA_VISIBLE_LEFT, "");
  expect(NULL, 2, -1, -1, 0, VA_VISIBLE_LEFT, "");
  expect(NULL, 1, 1, -1, 0, VA_VISIBLE_LEFT, "");
  expect(NULL, 1, 1, 3, 0, VA_VISIBLE_LEFT, ""); /* one device: the driver's count judges the request */
  expect(NULL, 0, 0, -1, 0, VA_VISIBLE_LEFT, "");
  expect(NULL, -1, -1, -1, 0, VA_VISIBLE_LEFT, "");
  /* set: its entries */
  expect("2,3", 0, 0, -1, 1, VA_VISIBLE_NARROWED, "3");
  expect("2,3", 5, 5, -1, 2, VA_VISIBLE_NARROWED, "2");
  expect("1,0", 0, 0, 0, 1, VA_VISIBLE_NARROWED, "1");
  expect("0,1", 0, 0, 5, 0, VA_VISIBLE_NONE, "");
  expect(" GPU-5a1b-77 , GPU-0c2d-88 ", 0, 0, -1, 0, VA_VISIBLE_NARROWED, "GPU-5a1b-77");
  expect(" GPU-5a1b-77 , GPU-0c2d-88 ", 0, 0, -1, 1, VA_VISIBLE_NARROWED, "GPU-0c2d-88");
  expect("MIG-aa/1/2,MIG-bb/3/4,MIG-cc/5/6", 0, 0, -1, 5, VA_VISIBLE_NARROWED, "MIG-cc/5/6");
  expect("3", 4, 4, -1, 1, VA_VISIBLE_LEFT, ""); /* one entry: nothing to narrow */
  expect("", 4, 4, -1, 0, VA_VISIBLE_LEFT, "");  /* no device: CUDA says so */
  expect("0,,1", 0, 0, -1, 0, VA_VISIBLE_LEFT, "");
  expect("0,1,", 0, 0, -1, 0, VA_VISIBLE_LEFT, "");
  {
    char small[4];
    CHECK(va_visible_choose("GPU-5a1b-77,GPU-0c2d-88", 0, 0, -1, 0, small, sizeof small) == VA_VISIBLE_LEFT,
          "an entry longer than the buffer is not left alone");
    CHECK(va_visible_choose(NULL, 20, 20, -1, 12, small, 2) == VA_VISIBLE_LEFT,
          "an index longer than the buffer is not left alone");
  }
  /* the process's choice: node-local rank 0 (no MPI here) takes the list's first entry, once */
  unsetenv("VECANNEAL_ALL_GPUS");
  setenv("CUDA_VISIBLE_DEVICES", "6,4", 1);
  CHECK(va_visible_narrow(-1) == VA_VISIBLE_NARROWED, "a two-entry list is not narrowed");
  const char *now = getenv("CUDA_VISIBLE_DEVICES");
  CHECK(now && !strcmp(now, "6"), "CUDA_VISIBLE_DEVICES is '%s', not '6'", now ? now : "(unset)");
  setenv("CUDA_VISIBLE_DEVICES", "1,2,3", 1);
  CHECK(va_visible_narrow(1) == VA_VISIBLE_NARROWED, "a second call did not return the first call's choice");
  now = getenv("CUDA_VISIBLE_DEVICES");
  CHECK(now && !strcmp(now, "1,2,3"), "a second call changed CUDA_VISIBLE_DEVICES to '%s'", now ? now : "(unset)");
  printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
