/* info.h: the info job (`vecanneal info INDEX.h5`): a readable summary of an index (rank 0 reads). */
#ifndef VECANNEAL_JOB_INFO_H
#define VECANNEAL_JOB_INFO_H

/* Collective: prints the summary; a missing, damaged or foreign file is VA_EXIT_INPUT (one message). */
int va_info_job(const char *path);
#endif
