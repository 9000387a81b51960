# Applied to a copy of the tree only: per-batch GPU time and the host time of cuBLASLt's heuristic
# queries and of the first matmul launch per new bucket (lazy kernel load), printed to stderr.
import sys
p = sys.argv[1] + '/src/embed/bert_cuda.cu'
s = open(p).read()
s = s.replace('#include <type_traits>\n', '#include <type_traits>\n#include <time.h>\n#include <stdlib.h>\n'
  'static double tr_now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}\n'
  'static double tr_heur, tr_first, tr_rest; static int tr_nheur;\n', 1)
old = '''  if (!slot->ok) {
    cublasLtMatmulHeuristicResult_t res;'''
new = '''  int tr_new = !slot->ok; double tr0 = tr_now();
  if (!slot->ok) {
    tr_nheur++;
    cublasLtMatmulHeuristicResult_t res;'''
assert old in s; s = s.replace(old, new, 1)
old = '''  const float one = 1.0f, zero = 0.0f;
  VA_CUBLAS(va_blas().cublasLtMatmul('''
new = '''  const float one = 1.0f, zero = 0.0f;
  double tr1 = tr_now(); tr_heur += tr1 - tr0;
  VA_CUBLAS(va_blas().cublasLtMatmul('''
assert old in s; s = s.replace(old, new, 1)
i = s.index('VA_CUBLAS(va_blas().cublasLtMatmul(', s.index('double tr1'))
j = s.index(';\n', i) + 2
s = s[:j] + '  if (tr_new) tr_first += tr_now() - tr1; else tr_rest += tr_now() - tr1;\n' + s[j:]
old = '''  g->ncol++;
  if (!g->dev_out)'''
new = '''  g->ncol++;
  if (getenv("VA_TRACE_BATCH")) fprintf(stderr, "batch %lld seqs %d gpu_ms %.3f\\n", (long long)g->ncol, g->nseq[slot], ms);
  if (!g->dev_out)'''
assert old in s; s = s.replace(old, new, 1)
old = '''  if (!g) return;
  VA_CUDA(cudaSetDevice(g->device));
  VA_CUDA(cudaStreamSynchronize(g->stream));'''
new = old + '''
  fprintf(stderr, "trace: %d heuristic queries %.3f s, first launches %.3f s, other launches %.3f s\\n", tr_nheur, tr_heur, tr_first, tr_rest);'''
assert old in s; s = s.replace(old, new, 1)
open(p, 'w').write(s)
# Experiment: VA_ALGO_OCTAVE=1 keys the algorithm cache by octave of the bucket (rows in [1024*2^j,
# 2048*2^j)), querying the heuristic once per octave at its largest bucket (2048*2^j rows).
s = open(p).read()
old = '''  gemm_op::algo_slot *slot = &op->cache[m / ROWPAD];
  int tr_new = !slot->ok; double tr0 = tr_now();
  if (!slot->ok) {
    tr_nheur++;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
'''
new = '''  static int octave = -1; if (octave < 0) octave = getenv("VA_ALGO_OCTAVE") != NULL;
  int64_t oj = 0; while ((int64_t)2048 << oj <= (int64_t)m) oj++;
  const uint64_t qm = octave ? (uint64_t)((int64_t)2048 << oj) : m;
  gemm_op::algo_slot *slot = &op->cache[octave ? oj : m / ROWPAD];
  int tr_new = !slot->ok; double tr0 = tr_now();
  if (!slot->ok) {
    tr_nheur++;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (qm != m) { VA_CUBLAS(va_blas().cublasLtMatrixLayoutSetAttribute(op->lb, CUBLASLT_MATRIX_LAYOUT_COLS, &qm, sizeof qm));
                   VA_CUBLAS(va_blas().cublasLtMatrixLayoutSetAttribute(op->ld, CUBLASLT_MATRIX_LAYOUT_COLS, &qm, sizeof qm)); }
'''
assert old in s; s = s.replace(old, new, 1)
old = '''    slot->algo = res.algo;
    slot->ok = 1;
  }'''
new = '''    slot->algo = res.algo;
    slot->ok = 1;
    if (qm != m) { VA_CUBLAS(va_blas().cublasLtMatrixLayoutSetAttribute(op->lb, CUBLASLT_MATRIX_LAYOUT_COLS, &m, sizeof m));
                   VA_CUBLAS(va_blas().cublasLtMatrixLayoutSetAttribute(op->ld, CUBLASLT_MATRIX_LAYOUT_COLS, &m, sizeof m)); }
  }'''
assert old in s; s = s.replace(old, new, 1)
open(p, 'w').write(s)
