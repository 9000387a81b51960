/* backend_visible.h: which GPU a rank takes, decided before the CUDA driver starts. The driver starts every
 * device a process may see, though a rank uses one: 0.13 s for one NVIDIA H200, 0.33 s for two on one host
 * (docs/performance.md, "Start-up"). So a rank narrows CUDA_VISIBLE_DEVICES to its own device first, which
 * is then its device 0. */
#ifndef VECANNEAL_BACKEND_VISIBLE_H
#define VECANNEAL_BACKEND_VISIBLE_H
#include <stddef.h>

/* What va_visible_choose decided. */
typedef enum {
  VA_VISIBLE_LEFT = 0,     /* the devices were not narrowed: count them through the driver */
  VA_VISIBLE_NARROWED = 1, /* `out` names the one device to see (device 0 of the process) */
  VA_VISIBLE_NONE = -1     /* `requested` is past the devices there are: no device for this rank */
} va_visible_t;

/* The choice alone, from what the process can read without the driver: `cvd` the value of
 * CUDA_VISIBLE_DEVICES (NULL: unset), whose comma-separated entries are the devices when set; else
 * `nodes` NVIDIA device files (/dev/nvidiaN) and `listed` GPUs in /proc/driver/nvidia/gpus, trusted as the
 * count only when they agree. The device is `requested` when >= 0, else `local_rank` modulo the count; its
 * entry (an index, or a UUID where the list gave one) goes to out. Left alone: fewer than two devices, an
 * empty entry, counts that disagree. */
va_visible_t va_visible_choose(const char *cvd, int nodes, int listed, int requested, int local_rank, char *out,
                               size_t len);

/* The process's choice, made once (later calls return the first call's result whatever they ask): reads the
 * environment, /dev and /proc, and sets CUDA_VISIBLE_DEVICES when it narrows. Must come before the process's
 * first CUDA call and while no other thread reads the environment. VECANNEAL_ALL_GPUS=1 leaves the devices
 * alone (the choice is then the driver's count, as va_cuda_pick_device makes it). */
va_visible_t va_visible_narrow(int requested);
#endif
