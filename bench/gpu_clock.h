/* gpu_clock.h: the SM clock and board power of a benchmark's GPU, read through NVML (the driver's
 * management library). Under its power limit a GPU lowers its clock, and every tensor-core figure with
 * it, by different amounts from run to run and from one precision to another, so the benchmarks print
 * the clock beside their timings. NVML is opened at run time (dlopen): a build without the driver, and a
 * run on a machine without a GPU, need no library. */
#ifndef VA_BENCH_GPU_CLOCK_H
#define VA_BENCH_GPU_CLOCK_H

#include <dlfcn.h>  /* dlopen, dlsym, dlclose */
#include <stddef.h> /* NULL */

/* The few NVML entry points used, with NVML's ABI: return 0 on success; a device is an opaque handle. */
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_by_pci_fn)(const char *pci_bus_id, void **device);
typedef int (*nvml_clock_fn)(void *device, int clock_type, unsigned *mhz);
typedef int (*nvml_power_fn)(void *device, unsigned *milliwatts);
enum { NVML_CLOCK_SM_TYPE = 1 }; /* nvmlClockType_t's NVML_CLOCK_SM */

typedef struct {
  void *device; /* NULL: no reading (no NVML, or the device not found) */
  nvml_clock_fn clock;
  nvml_power_fn power;
} gpu_clock_t;

/* Opens NVML for the device with this PCI bus id ("domain:bus:device.function"); on any failure the
 * reader stays empty and gpu_clock_read returns 0. */
static inline gpu_clock_t gpu_clock_open(const char *pci_bus_id) {
  gpu_clock_t g = {NULL, NULL, NULL};
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return g;
  nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
  nvml_by_pci_fn by_pci = (nvml_by_pci_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  g.clock = (nvml_clock_fn)dlsym(lib, "nvmlDeviceGetClockInfo");
  g.power = (nvml_power_fn)dlsym(lib, "nvmlDeviceGetPowerUsage");
  if (!init || !by_pci || !g.clock || !g.power || init() != 0 || by_pci(pci_bus_id, &g.device) != 0) {
    g.device = NULL;
    dlclose(lib); /* kept open, for the reader's calls, only when the device was found */
  }
  return g;
}

/* The SM clock now (MHz) and the board's power draw as NVML reports it (W); 1 when both were read. */
static inline int gpu_clock_read(const gpu_clock_t *g, unsigned *sm_mhz, double *watts) {
  unsigned mw = 0;
  if (!g->device || g->clock(g->device, NVML_CLOCK_SM_TYPE, sm_mhz) != 0 || g->power(g->device, &mw) != 0) return 0;
  *watts = mw / 1000.0;
  return 1;
}

#endif
