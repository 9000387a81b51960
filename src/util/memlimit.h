/* memlimit.h: the memory a rank may use, from every limit a job can meet:
 * - physical memory (MemAvailable of /proc/meminfo), shared by the node's ranks;
 * - the memory cgroup of the process (v2: memory.max - memory.current of its own cgroup, as Slurm's
 *   task/cgroup plugin sets it; v1: memory.limit_in_bytes - memory.usage_in_bytes), shared by the
 *   node's ranks in that cgroup;
 * - the process's own address-space and data limits (ulimit -v: RLIMIT_AS, ulimit -d: RLIMIT_DATA),
 *   less what it maps already (VmSize, VmData of /proc/self/status). These count address space, not
 *   resident memory: thread stacks, malloc's per-thread arenas and the BLAS library's buffers too. */
#ifndef VECANNEAL_MEMLIMIT_H
#define VECANNEAL_MEMLIMIT_H

typedef struct {
  double bytes;       /* what this rank may still use (-1: no limit found) */
  const char *source; /* the limit that decides it: "physical memory", "cgroup memory.max", "ulimit -v", ... */
  double limit_bytes; /* that limit's own value */
} va_mem_room_t;

/* Local. Resident memory this rank may still use: physical memory and the cgroup limit over
 * local_ranks ranks. */
va_mem_room_t va_mem_room_resident(int local_ranks);
/* Local. Address space this process may still map (RLIMIT_AS, RLIMIT_DATA). */
va_mem_room_t va_mem_room_address(void);
/* Address space a process maps beyond the bytes it touches when it runs `threads` threads: a stack
 * each and some slack for malloc, and, where they call BLAS (blas != 0), OpenBLAS's work buffer of
 * 128 MiB per calling thread (docs/performance.md). */
double va_mem_address_overhead(int threads, int blas);
#endif
