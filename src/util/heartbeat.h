/* heartbeat.h: rank 0 never goes quiet for long. While a command runs, a helper thread on rank 0
 * prints "(still working: N s since the line above)" whenever no line has been printed for
 * va_progress_seconds(), so that a person (or a Slurm log) sees that a long stage without progress
 * lines of its own (a large read, a k-means++ pass, a write) is alive. The thread calls no MPI and
 * prints through va_log0_aside, which serialises lines with va_log0's. */
#ifndef VECANNEAL_UTIL_HEARTBEAT_H
#define VECANNEAL_UTIL_HEARTBEAT_H

/* Rank 0: starts the thread (nothing on other ranks, nor when it is already running). */
void va_heartbeat_start(void);
/* Stops and joins it; safe to call when it is not running. */
void va_heartbeat_stop(void);
#endif
