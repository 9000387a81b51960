/* checkpoint.h: the annealing state at an iteration boundary, written atomically to HDF5 and read back
 * by --resume. A resumed run with the same ranks, threads and backend ends bitwise identical to an
 * uninterrupted one: everything that feeds a later decision is saved (anchors, momentum, previous
 * RMS, temperature, energies, convergence counter, histories, counters and every row's last anchor);
 * random draws are counter-based, keyed by iteration, so no generator state is needed. */
#ifndef VECANNEAL_CHECKPOINT_H
#define VECANNEAL_CHECKPOINT_H
#include "core/anneal.h"
#include "io/h5io.h"

/* The checkpoint path of a job: cfg->checkpoint, or OUT.ckpt.h5. */
void va_checkpoint_path(const va_config_t *cfg, char *out, size_t len);
/* Collective. Returns 0 or VA_EXIT_OUTPUT. */
int va_checkpoint_write(const char *path, const va_state_t *st, const va_input_t *in);
/* Collective, before the read: rank 0 checks that path is a readable checkpoint of an input of this
 * size and type made with this configuration (the keys that may change aside); exits every rank
 * with one message otherwise (VA_EXIT_INPUT; VA_EXIT_USAGE for another configuration). */
void va_checkpoint_check(const char *path, const va_config_t *cfg, const va_input_t *in);
/* Collective, in place of initialisation: restores st (after preprocessing, before va_state_alloc is
 * called; it allocates). A checkpoint carries a checksum of everything it holds (checksum.h; the
 * assignments' share summed over ranks) and the checksum of the input it was made from (in->checksum,
 * set by the read): every rank exits with VA_EXIT_INPUT and one message naming the file when either
 * differs, when a read fails, or when anchors or state are not finite. */
void va_checkpoint_read(const char *path, va_state_t *st, const va_input_t *in);

#endif
