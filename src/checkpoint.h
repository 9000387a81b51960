/* checkpoint.h: the annealing state at an iteration boundary, written atomically to HDF5 and read back
 * by --resume. A resumed run with the same ranks, threads and backend ends bitwise identical to an
 * uninterrupted one: everything that feeds a later decision is saved (anchors, momentum, previous
 * RMS, temperature, energies, convergence counter, histories, counters and every row's last anchor);
 * random draws are counter-based, keyed by iteration, so no generator state is needed. */
#ifndef VECANNEAL_CHECKPOINT_H
#define VECANNEAL_CHECKPOINT_H
#include "anneal.h"
#include "h5io.h"

/* The checkpoint path of a job: cfg->checkpoint, or OUT.ckpt.h5. */
void va_checkpoint_path(const va_config_t *cfg, char *out, size_t len);
/* Collective. Returns 0 or VA_EXIT_OUTPUT. */
int va_checkpoint_write(const char *path, const va_state_t *st, const va_input_t *in);
/* Collective, in place of initialisation: restores st (after preprocessing, before va_state_alloc is
 * called; it allocates). Exits every rank with a clear message when the checkpoint does not belong to
 * this job (other input, n, d, seed or algorithm keys). */
void va_checkpoint_read(const char *path, va_state_t *st, const va_input_t *in);

/* What SIGTERM / SIGUSR1 (what Slurm sends before the time limit) do:
 * DEFAULT    their default action (before the loop: a read stuck on a damaged file stays killable);
 * CHECKPOINT set a flag the loop agrees on at the end of an iteration: checkpoint, then exit 75;
 * FINISH     nothing (after the loop): the final pass and the index write are short and bounded, so a
 *            signal that arrives after the last iteration lets the job complete instead of killing it
 *            with its work done and the index half-written. */
typedef enum { VA_STOP_DEFAULT = 0, VA_STOP_CHECKPOINT = 1, VA_STOP_FINISH = 2 } va_stop_mode_t;
void va_install_stop_signals(va_stop_mode_t mode);
int va_stop_requested(void);
#endif
