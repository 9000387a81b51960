/* stop.h: SIGTERM and SIGUSR1 (what Slurm's --signal sends before the time limit, and scancel by
 * default) as a request to stop, from the first instruction of the process to its last.
 * The handler, installed before MPI starts, only records the request. The job acts on it at its stop
 * points, where every rank agrees:
 *   before the annealing loop (read, initialisation) va_stop_point ends every rank with
 *     VA_EXIT_STOPPED and a message saying that no iteration was checkpointed;
 *   in the loop the request travels with the statistics and the job checkpoints at the end of the
 *     iteration, then exits with VA_EXIT_STOPPED (anneal.c);
 *   after the last iteration (va_stop_finishing) the final pass and the index write are short and
 *     bounded: the job completes instead of losing its finished work.
 * A second request before the job acted on the first takes the signal's default action (the process
 * ends at once, its temporary files removed): a call that never returns (a read stuck inside HDF5 on a
 * damaged file) never reaches a stop point. */
#ifndef VECANNEAL_STOP_H
#define VECANNEAL_STOP_H

/* Installs the handler (main, before MPI_Init). */
void va_stop_install(void);
/* Whether a stop was requested on this rank (or VECANNEAL_FAULT_STOP_AFTER=N says so after N calls:
 * a deterministic stop for tests). */
int va_stop_requested(void);
/* Collective: when any rank was asked to stop, rank 0 prints "stopped by a signal during <phase>"
 * and the advice (va_stop_advice), and every rank exits with VA_EXIT_STOPPED (temporary files
 * removed). */
void va_stop_point(const char *phase);
/* What the stop points print after the phase: how to run the job again. */
void va_stop_advice(const char *advice);
/* From now on requests are recorded and not acted on: the job finishes. */
void va_stop_finishing(void);
/* Fault injection for tests: VECANNEAL_FAULT_SIGNAL_AT=PHASE makes the process send itself SIGUSR1
 * when it reaches the named point (read, init, finish, ...), as a signal arriving there would. */
void va_stop_fault_point(const char *phase);
#endif
