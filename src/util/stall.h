/* stall.h: a guard against a collective transfer that never ends.
 * HDF5 1.10's collective calls are not safe against a failure on one rank: a metadata write that
 * fails on one rank inside H5Fclose sends it down another path while its peers wait in a barrier,
 * and no call returns to vecanneal. While a guard is up, a helper thread watches for progress (each
 * completed chunk of the transfer); when none comes for VECANNEAL_STALL_SECONDS (default 600), it
 * prints the guard's message, removes the job's temporary files and ends this rank with the guard's
 * exit code (_exit: the launcher then ends the others, as for any rank that exits non-zero). */
#ifndef VECANNEAL_STALL_H
#define VECANNEAL_STALL_H

/* Raises the guard: code VA_EXIT_OUTPUT or VA_EXIT_INPUT, what and path name the file in the message. */
void va_stall_guard_begin(int code, const char *what, const char *path);
/* A chunk of the transfer completed on this rank. */
void va_stall_guard_progress(void);
/* Lowers the guard. */
void va_stall_guard_end(void);
#endif
