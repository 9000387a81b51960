# ad hoc (device only, session 15): timestamps to stderr at the start-up and exit steps of a copy of the tree
def sub(path, old, new):
    s = open(path).read()
    assert old in s, (path, old)
    open(path, 'w').write(s.replace(old, new, 1))
s = open('src/util.h').read()
i = s.rindex('#endif')
s = s[:i] + '''#include <stdio.h>
#include <stdlib.h>
#include <time.h>
extern double va_trace_zero;
#define VA_TR(tag) do { if (getenv("VA_TRACE")) { struct timespec ts_; clock_gettime(CLOCK_REALTIME, &ts_); fprintf(stderr, "TRACE %-22s %.4f\\n", tag, ts_.tv_sec + 1e-9 * ts_.tv_nsec - va_trace_zero); } } while (0)
''' + s[i:]
open('src/util.h', 'w').write(s)
sub('src/util.c', 'void va_exit_all(int code) {\n', 'double va_trace_zero;\nvoid va_exit_all(int code) {\n  VA_TR("exit_all");\n')
sub('src/util.c', '  MPI_Finalize();\n  exit(code);', '  MPI_Finalize();\n  VA_TR("finalized");\n  exit(code);')
sub('src/main.c', 'int main(int argc, char **argv) {\n', '''static void at_end(void) { VA_TR("atexit-last"); }
int main(int argc, char **argv) {
  { const char *z = getenv("VA_TRACE"); va_trace_zero = z ? atof(z) : 0; atexit(at_end); VA_TR("main"); }
''')
sub('src/main.c', '  va_proc_init();', '  VA_TR("mpi_init done");\n  va_proc_init();')
sub('src/compress.c', '  backend_plan_t plan = plan_backend(&st, &cfg);', '  VA_TR("plan start");\n  backend_plan_t plan = plan_backend(&st, &cfg);\n  VA_TR("plan done");')
sub('src/compress.c', '  double t_attach = va_now();', '  VA_TR("read done");\n  double t_attach = va_now();')
sub('src/compress.c', '  double t_anchors = va_now();', '  VA_TR("backend attached");\n  double t_anchors = va_now();')
sub('src/compress.c', '  double t_loop = va_now();', '  VA_TR("init done");\n  double t_loop = va_now();')
sub('src/compress.c', '  double E = va_final_pass(&st, counts, mse);', '  VA_TR("loop done");\n  double E = va_final_pass(&st, counts, mse);\n  VA_TR("final pass done");')
sub('src/compress.c', '  va_metrics_write(cfg.metrics, &sum, &cfg);\n  free(anchors);', '  VA_TR("written");\n  va_metrics_write(cfg.metrics, &sum, &cfg);\n  free(anchors);')
sub('src/compress.c', '  va_state_free(&st);\n  va_comm_finalize();\n  return 0;', '  va_state_free(&st);\n  VA_TR("state freed");\n  va_comm_finalize();\n  return 0;')
# exit variants (call 3): VA_RESET=1 resets the device before MPI_Finalize (its cost traced);
# VA_QUICK_EXIT=1 leaves by _exit after MPI_Finalize (no atexit handlers: the CUDA runtime's teardown skipped)
sub('src/util.c', 'void va_exit_all(int code) {\n', 'extern int cudaDeviceReset(void);\n#include <unistd.h>\nvoid va_exit_all(int code) {\n')
sub('src/util.c', '  MPI_Finalize();\n  VA_TR("finalized");', '  if (getenv("VA_RESET")) { cudaDeviceReset(); VA_TR("reset"); }\n  MPI_Finalize();\n  VA_TR("finalized");\n  if (getenv("VA_QUICK_EXIT")) { fflush(NULL); _exit(code); }')
